// Package fs is the built-in file tool plugin (package name fs, like its
// directory; import io/fs under another name beside it). It provides five
// tools over the workspace of each call:
//
//   - read_file {path, start_line?, end_line?}: a range of lines of a text
//     file (ReadResult). Read-only, risk low.
//   - list_files {path?, recursive?, pattern?, max_results?,
//     include_ignored?}: the files under a directory, gitignore-aware
//     (ListResult, whose key "files" the front-ends rely on). Read-only,
//     risk low.
//   - write_file {path, content, create_dirs?, rationale?,
//     acceptance_criteria?}: propose creating a file or replacing its whole
//     content (WriteResult).
//   - edit_file {path, old_string, new_string, replace_all?, rationale?,
//     acceptance_criteria?}: propose replacing exact text in a file
//     (EditResult).
//   - delete_file {path, rationale?}: propose deleting a regular file
//     (DeleteResult).
//
// write_file, edit_file and delete_file are edit tools (ToolSpec.Kind
// engine.ToolKindEdit, risk medium): they change nothing themselves, so
// they are read-only and need no approval per call. Each returns one
// engine.FileEdit in ToolResult.Edits, computed against the file's current
// content; the engine gathers the edits of a model response into a patch
// set, asks the user and applies what was approved. Their results say
// "status": "proposed". rationale and acceptance_criteria are for the
// engine's patch set; the tools only check their types.
//
// The current content of a file is its pending content when an earlier
// call of the same model response edited it (InvokeRequest.Overlay), else
// the disk's: read_file reads pending content (ReadResult.Pending), a
// pending deletion reads as not found, list_files lists pending new files
// and leaves pending deletions out, and an edit computed on top of a
// pending one has the pending content as its FileEdit.Base.
//
// Every path is confined to InvokeRequest.WorkspaceRoot: it goes through
// workspace.Root.Resolve and Real (`..` that climbs out, absolute paths
// outside, symlinks that lead out are refused) and every file operation
// through the workspace's os.Root, so a symlink swapped in after the check
// is refused too. Refusals are *engine.ToolError with code
// permission_denied naming the path and the workspace. Paths in results
// are workspace-relative with forward slashes; FileEdit.Path (and the
// overlay key it becomes) is the file itself, symlinks resolved, so an
// edit of a symlink changes its target. Files in .git are never edited.
//
// Searching file contents is the search plugin's (tools/search:
// search_text, search_symbols, vector_search).
//
// Arguments are decoded strictly: an unknown field, a wrong type or a
// missing required field is an *engine.ToolError with code invalid_input
// whose message names the field. A missing file or directory is code
// not_found; a call whose context ends is code cancelled (or timeout, when
// its deadline passed).
package fs

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// Tool names.
const (
	ReadFileTool   = "read_file"
	ListFilesTool  = "list_files"
	WriteFileTool  = "write_file"
	EditFileTool   = "edit_file"
	DeleteFileTool = "delete_file"
)

// toolNames are the tools in the order Tools lists them.
var toolNames = []string{ReadFileTool, ListFilesTool, WriteFileTool, EditFileTool, DeleteFileTool}

// Defaults for Options fields left zero.
const (
	// DefaultMaxReadLines is how many lines one read_file call returns at
	// most.
	DefaultMaxReadLines = 2000
	// DefaultMaxReadBytes is how many bytes of file content one read_file
	// call returns at most. It leaves room for JSON escaping under the
	// engine's default cap on a tool result (engine.DefaultMaxToolResultBytes),
	// so that typical source text reaches the model uncut.
	DefaultMaxReadBytes = 40 << 10
	// DefaultListResults is how many paths list_files returns when the call
	// gives no max_results.
	DefaultListResults = 1000
	// DefaultMaxListResults is the largest max_results list_files accepts.
	DefaultMaxListResults = 10000
	// DefaultMaxFileBytes is the largest file, in bytes, the edit tools
	// propose content for or compute an edit on.
	DefaultMaxFileBytes = 10 << 20
)

// binarySniffBytes is how much of a file is checked for a NUL byte to
// tell binary from text, as git does.
const binarySniffBytes = 8000

// Options configure Tools. The zero value of every field means its default.
type Options struct {
	// MaxReadLines caps the lines of one read_file result. Default
	// DefaultMaxReadLines.
	MaxReadLines int
	// MaxReadBytes caps the content bytes of one read_file result; whole
	// lines are returned, except a first line longer than the cap, which
	// is cut. Default DefaultMaxReadBytes.
	MaxReadBytes int
	// ListResults is list_files' max_results when a call gives none.
	// Default DefaultListResults; capped at MaxListResults.
	ListResults int
	// MaxListResults is the largest max_results list_files accepts.
	// Default DefaultMaxListResults.
	MaxListResults int
	// MaxFileBytes is the largest file, in bytes, the edit tools handle:
	// write_file's content, the file edit_file changes (before and after)
	// and the file delete_file deletes (the engine keeps it for undo).
	// Default DefaultMaxFileBytes.
	MaxFileBytes int
	// Logger receives debug lines (directories a walk could not read);
	// nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxReadLines, DefaultMaxReadLines)
	def(&o.MaxReadBytes, DefaultMaxReadBytes)
	def(&o.MaxListResults, DefaultMaxListResults)
	def(&o.ListResults, DefaultListResults)
	o.ListResults = min(o.ListResults, o.MaxListResults)
	def(&o.MaxFileBytes, DefaultMaxFileBytes)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Tools is the file toolset. It caches one open workspace.Root per
// workspace directory and is safe for concurrent use.
type Tools struct {
	opts   Options
	specs  []engine.ToolSpec
	fields map[string][]string // accepted argument names, by tool
	tools  map[string]toolFunc

	roots toolkit.Roots // open workspaces, by WorkspaceRoot

	// afterResolve, when set (by tests), runs between resolving a path and
	// operating on it, to swap a symlink in.
	afterResolve func(real string)
}

// toolFunc runs one call of a tool on an open workspace, with the pending
// content of the call's model response.
type toolFunc func(ctx context.Context, root *workspace.Root, ov overlay, args []byte) (engine.ToolResult, error)

var _ engine.Toolset = (*Tools)(nil)

// New returns the file toolset configured by opts.
func New(opts Options) *Tools {
	t := &Tools{opts: opts.withDefaults(), fields: map[string][]string{}}
	for _, d := range toolDefs(t.opts) {
		t.specs = append(t.specs, d.spec)
		t.fields[d.spec.Name] = d.fields
	}
	t.tools = map[string]toolFunc{
		ReadFileTool:   t.readFile,
		ListFilesTool:  t.listFiles,
		WriteFileTool:  t.writeFile,
		EditFileTool:   t.editFile,
		DeleteFileTool: t.deleteFile,
	}
	return t
}

// Serve serves the file toolset as a tool plugin over go-plugin's gRPC
// transport and returns when the host closes the connection. It logs to
// stderr as plugins.Logger does.
func Serve() {
	t := New(Options{Logger: plugins.Logger()})
	defer t.Close()
	plugins.ServeTool(t)
}

// Tools returns the specs of read_file, list_files, write_file, edit_file
// and delete_file, in that order, with JSON Schema (draft 2020-12) input
// schemas whose limits are those of the Options.
func (t *Tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	return append([]engine.ToolSpec(nil), t.specs...), nil
}

// Invoke runs one call (see the package doc), reading req.Overlay before
// the disk. On success the content is a ReadResult, ListResult,
// WriteResult, EditResult or DeleteResult, and an edit tool's result holds
// its one engine.FileEdit in Edits (none when write_file finds the content
// unchanged). Nothing is written to the disk. Errors are
// *engine.ToolError: invalid_input (the message names the field),
// not_found, permission_denied (a path outside the workspace or in .git,
// or the operating system refused), unknown_tool, cancelled, timeout,
// failed. The tools send no updates.
func (t *Tools) Invoke(ctx context.Context, req engine.InvokeRequest, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
	run, ok := t.tools[req.Tool]
	if !ok {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "the fs plugin has no tool %q; it provides %s", req.Tool, strings.Join(toolNames, ", "))
	}
	root, terr := t.roots.Get(req.Tool, req.WorkspaceRoot)
	if terr != nil {
		return engine.ToolResult{}, terr
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, toolkit.CtxError(req.Tool, err)
	}
	res, err := run(ctx, root, newOverlay(req.Overlay), req.Args)
	if err != nil {
		return engine.ToolResult{}, toolkit.CallError(ctx, req.Tool, err)
	}
	return res, nil
}

// Close closes the cached workspace handles. The Tools stays usable: a
// later call opens its workspace again.
func (t *Tools) Close() error { return t.roots.Close() }

// resolved is a path a call named, confined to the workspace.
type resolved struct {
	given string // as the call gave it
	show  string // workspace-relative, slash-separated; "." for the root
	real  string // what to pass to the os.Root: symlinks resolved, OS form
}

// file is the real path, slash-separated: the key of the file in an
// overlay and the Path of an edit of it.
func (p resolved) file() string { return filepath.ToSlash(p.real) }

// resolve confines a path a call named. Errors are *engine.ToolError.
func (t *Tools) resolve(tool string, root *workspace.Root, given string) (resolved, error) {
	lexical, err := root.Resolve(given)
	if err != nil {
		return resolved{}, pathError(tool, root, given, err)
	}
	real, err := root.Real(given)
	if err != nil {
		return resolved{}, pathError(tool, root, given, err)
	}
	if t.afterResolve != nil {
		t.afterResolve(real)
	}
	return resolved{given: given, show: filepath.ToSlash(lexical), real: real}, nil
}

// pathError turns an error about the path given (from workspace.Root or
// an operation through its os.Root) into a *engine.ToolError.
func pathError(tool string, root *workspace.Root, given string, err error) *engine.ToolError {
	te := root.ToolError(tool, given, err)
	if te.Code == engine.ToolCodeNotFound && !errors.Is(err, syscall.ENOTDIR) {
		te.Message += "; use list_files to see what is there"
	}
	return te
}

// inGitDir reports whether a slash path has a .git component.
func inGitDir(p string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if part == ".git" {
			return true
		}
	}
	return false
}
