// Package search is the built-in code search tool plugin. Its tools ask the
// engine's code index through the host callbacks of engine.ToolHost, so
// every tool plugin searches the same index:
//
//   - search_symbols {query, kind?, path?, include_refs?, limit?}: symbol
//     definitions (and references) by name, exact, prefix or fuzzy
//     (SymbolsResult). No fallback: without an index it fails.
//   - search_text, in one of two modes chosen by which field is given:
//     {pattern, regex?, case_insensitive?, path?, include?,
//     context_lines?, limit?} finds a literal (by default) or an RE2
//     regular expression line by line, streams each match as a ToolOutput
//     on stream MatchStream ("path:line:column: text") and returns a
//     TextResult; {query, path?, limit?} ranks code chunks against a
//     natural-language query with BM25 (ChunksResult).
//   - vector_search {query, path?, limit?}: chunks ranked by embedding
//     similarity (ChunksResult). No fallback: without an index or an
//     embedding model it fails, with the host's words.
//
// All three are read-only, risk low. When the engine has no index
// (ToolHost answers engine.ErrUnsupported), does not know the call's
// workspace (engine.ErrNotFound), or the call comes without host
// callbacks, a pattern search_text walks the workspace itself instead:
// gitignore-aware through engine/workspace (explicitly named ignored
// directories are searched in full; .git never), confined to the
// workspace, skipping binary files and files larger than
// Options.MaxSearchFileBytes, streaming matches in path order. Its result
// has the same shape, plus files_skipped and unreadable when not zero.
//
// Every path a call names is confined to InvokeRequest.WorkspaceRoot with
// workspace.Root (`..` that climbs out, absolute paths outside and
// symlinks leading out are refused with code permission_denied) and must
// exist (code not_found). Arguments are decoded strictly: an unknown
// field, a wrong type or a missing required field is an *engine.ToolError
// with code invalid_input whose message names the field. The host's errors
// keep their words: engine.ErrInvalidRequest becomes invalid_input;
// ErrUnsupported and ErrNotFound (no index, where there is no fallback)
// failed, followed by what to use instead; ErrPermissionDenied
// permission_denied; ErrTimeout timeout. A call whose context ends is
// code cancelled (or timeout, when its deadline passed).
package search

import (
	"context"
	"errors"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"syscall"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// Tool names.
const (
	SearchSymbolsTool = "search_symbols"
	SearchTextTool    = "search_text"
	VectorSearchTool  = "vector_search"
)

// Limits of the limit argument, and its defaults, by kind of result.
const (
	// DefaultSymbolResults and MaxSymbolResults bound search_symbols.
	DefaultSymbolResults = 20
	MaxSymbolResults     = 200
	// DefaultTextResults and MaxTextResults bound pattern searches.
	DefaultTextResults = 100
	MaxTextResults     = 1000
	// DefaultChunkResults and MaxChunkResults bound query searches and
	// vector_search.
	DefaultChunkResults = 10
	MaxChunkResults     = 100
	// MaxContextLines bounds context_lines.
	MaxContextLines = 10
)

// DefaultMaxSearchFileBytes is the size, in bytes, above which the
// fallback text search skips a file.
const DefaultMaxSearchFileBytes = 1 << 20

// Options configure Tools. The zero value of every field means its
// default.
type Options struct {
	// MaxSearchFileBytes: the fallback text search skips larger files, in
	// bytes. Default DefaultMaxSearchFileBytes.
	MaxSearchFileBytes int64
	// SearchWorkers is how many files the fallback text search reads and
	// matches at once. Default runtime.GOMAXPROCS(0).
	SearchWorkers int
	// Logger receives debug lines (fallbacks taken, files and
	// directories the fallback skipped); nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxSearchFileBytes <= 0 {
		o.MaxSearchFileBytes = DefaultMaxSearchFileBytes
	}
	if o.SearchWorkers <= 0 {
		o.SearchWorkers = defaultWorkers()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Tools is the search toolset. It caches one open workspace.Root per
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

// call is one tool call as a toolFunc gets it.
type call struct {
	root     *workspace.Root
	host     engine.ToolHost // nil when the host offers no callbacks
	onUpdate func(engine.ToolUpdate)
}

// toolFunc runs one call of a tool.
type toolFunc func(ctx context.Context, c call, args []byte) (engine.ToolResult, error)

var _ engine.Toolset = (*Tools)(nil)

// New returns the search toolset configured by opts.
func New(opts Options) *Tools {
	t := &Tools{opts: opts.withDefaults(), fields: map[string][]string{}}
	for _, d := range toolDefs(t.opts) {
		t.specs = append(t.specs, d.spec)
		t.fields[d.spec.Name] = d.fields
	}
	t.tools = map[string]toolFunc{
		SearchSymbolsTool: t.searchSymbols,
		SearchTextTool:    t.searchText,
		VectorSearchTool:  t.vectorSearch,
	}
	return t
}

// Serve serves the search toolset as a tool plugin over go-plugin's gRPC
// transport and returns when the host closes the connection. It logs to
// stderr as plugins.Logger does.
func Serve() {
	t := New(Options{Logger: plugins.Logger()})
	defer t.Close()
	plugins.ServeTool(t)
}

// Tools returns the specs of search_symbols, search_text and
// vector_search, in that order, with JSON Schema (draft 2020-12) input
// schemas.
func (t *Tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	return append([]engine.ToolSpec(nil), t.specs...), nil
}

// Invoke runs one call (see the package doc). On success the content is
// a SymbolsResult, TextResult or ChunksResult. Errors are
// *engine.ToolError: invalid_input (the message names the field),
// not_found, permission_denied, unknown_tool, cancelled, timeout, failed.
// A pattern search_text streams each match through onUpdate as it is
// found (stream MatchStream); the fallback also sends a progress message
// every 100 files or half second. onUpdate is never called concurrently.
func (t *Tools) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	run, ok := t.tools[req.Tool]
	if !ok {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "the search plugin has no tool %q; it provides %s, %s and %s", req.Tool, SearchSymbolsTool, SearchTextTool, VectorSearchTool)
	}
	if onUpdate == nil {
		onUpdate = func(engine.ToolUpdate) {}
	}
	root, terr := t.roots.Get(req.Tool, req.WorkspaceRoot)
	if terr != nil {
		return engine.ToolResult{}, terr
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, toolkit.CtxError(req.Tool, err)
	}
	res, err := run(ctx, call{root: root, host: req.Host, onUpdate: onUpdate}, req.Args)
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

// isDir reports whether the path is a directory. Errors are
// *engine.ToolError.
func (p resolved) isDir(tool string, root *workspace.Root) (bool, error) {
	fi, err := root.FS().Stat(p.real)
	if err != nil {
		return false, pathError(tool, root, p.given, err)
	}
	return fi.IsDir(), nil
}

// resolve confines the path a call named ("" is the workspace root) and
// checks that it exists. Errors are *engine.ToolError.
func (t *Tools) resolve(tool string, root *workspace.Root, given string) (resolved, error) {
	if given == "" {
		given = "."
	}
	lexical, err := root.Resolve(given)
	if err != nil {
		return resolved{}, pathError(tool, root, given, err)
	}
	real, err := root.Real(given)
	if err != nil {
		return resolved{}, pathError(tool, root, given, err)
	}
	if _, err := root.FS().Stat(real); err != nil {
		return resolved{}, pathError(tool, root, given, err)
	}
	if t.afterResolve != nil {
		t.afterResolve(real)
	}
	return resolved{given: given, show: filepath.ToSlash(lexical), real: real}, nil
}

// indexPath is the path prefix to give the index for p: where the files
// really are ("" for the whole workspace), since the index, like Walk,
// does not see files through symlinked directories.
func (p resolved) indexPath() string {
	if p.real == "." {
		return ""
	}
	return filepath.ToSlash(p.real)
}

// pathError turns an error about the path given (from workspace.Root or
// an operation through its os.Root) into a *engine.ToolError.
func pathError(tool string, root *workspace.Root, given string, err error) *engine.ToolError {
	err = root.FSError(given, err)
	var esc *workspace.EscapeError
	switch {
	case errors.As(err, &esc):
		return engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: %v", tool, esc)
	case errors.Is(err, engine.ErrInvalidRequest):
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %v", tool, err)
	case errors.Is(err, iofs.ErrNotExist) && errors.Is(err, syscall.ENOTDIR):
		return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %v", tool, err)
	case errors.Is(err, iofs.ErrNotExist):
		return engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %q does not exist in the workspace %s; use list_files to see what is there", tool, given, root.Dir())
	case errors.Is(err, iofs.ErrPermission):
		return engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: the operating system refused access to %q: %v", tool, given, err)
	case errors.Is(err, syscall.ELOOP):
		return engine.ToolErrorf(engine.ToolCodeFailed, "%s: %q goes through a loop of symlinks: %v", tool, given, err)
	}
	return engine.ToolErrorf(engine.ToolCodeFailed, "%s: %q: %v", tool, given, err)
}

// noIndex reports whether a host error means that there is no index to
// search for this workspace: the engine has none (ErrUnsupported) or does
// not know the workspace (ErrNotFound).
func noIndex(err error) bool {
	return errors.Is(err, engine.ErrUnsupported) || errors.Is(err, engine.ErrNotFound)
}

// hostError turns an error of a host search into a *engine.ToolError that
// keeps the host's words. When the error means there is no index (see
// noIndex), the code is failed and hint (what to use instead) follows.
func hostError(ctx context.Context, tool string, err error, hint string) *engine.ToolError {
	if ctx.Err() != nil {
		return toolkit.CtxError(tool, ctx.Err())
	}
	switch {
	case noIndex(err) && hint != "":
		return engine.ToolErrorf(engine.ToolCodeFailed, "%s is not available: %v. %s", tool, err, hint)
	case noIndex(err):
		return engine.ToolErrorf(engine.ToolCodeFailed, "%s is not available: %v", tool, err)
	case errors.Is(err, engine.ErrInvalidRequest):
		return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %v", tool, err)
	case errors.Is(err, engine.ErrPermissionDenied):
		return engine.ToolErrorf(engine.ToolCodePermissionDenied, "%s: %v", tool, err)
	case errors.Is(err, engine.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return engine.ToolErrorf(engine.ToolCodeTimeout, "%s: %v", tool, err)
	case errors.Is(err, context.Canceled):
		return engine.ToolErrorf(engine.ToolCodeCancelled, "%s: %v", tool, err)
	}
	return engine.ToolErrorf(engine.ToolCodeFailed, "%s: the code index failed: %v", tool, err)
}
