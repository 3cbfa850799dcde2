package fs

import (
	"fmt"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// toolDef is a tool's spec with the property names its decoder accepts,
// in schema order.
type toolDef struct {
	spec   engine.ToolSpec
	fields []string
}

// prop is one property of a tool's input schema.
func prop(name string, schema map[string]any) toolkit.Prop {
	return toolkit.Prop{Name: name, Schema: schema}
}

// pendingNote tells the model how edit tools' proposals work.
const pendingNote = "Nothing changes on disk when you call this: the edits of your whole response are shown to the user as one patch and applied only if they approve (all of it, some files or some hunks); the result's status \"proposed\" means exactly that, and you are told afterwards what was applied. " +
	"Later calls in the same response already see the pending content: read_file returns it (with \"pending\": true), list_files lists new files and leaves out deleted ones, and edit_file and write_file build on it."

// toolDefs returns the tools' definitions for opts (with defaults
// applied), in the order Tools lists them.
func toolDefs(o Options) []toolDef {
	def := func(spec engine.ToolSpec, required []string, props ...toolkit.Prop) toolDef {
		schema, fields := toolkit.ObjectSchema(required, props...)
		spec.InputSchema = schema
		return toolDef{spec: spec, fields: fields}
	}
	read := func(name, desc string) engine.ToolSpec {
		return engine.ToolSpec{Name: name, Description: desc, Risk: engine.RiskLow, ReadOnly: true}
	}
	// Edit tools change nothing themselves (read-only, no approval per
	// call); the engine asks for approval of the patch they propose.
	edit := func(name, desc string) engine.ToolSpec {
		return engine.ToolSpec{Name: name, Description: desc, Risk: engine.RiskMedium, ReadOnly: true, Kind: engine.ToolKindEdit}
	}
	pathDesc := "Path relative to the workspace root (an absolute path inside the workspace also works)."
	ignoredDesc := "Also include files that .gitignore (or .git/info/exclude) excludes, such as node_modules or build output. Default false. The .git directory is never included. A path that is itself ignored is always listed in full."
	rationale := prop("rationale", toolkit.Str("Why you make this change, in a sentence or two; the user sees it beside the proposed patch when deciding."))
	criteria := prop("acceptance_criteria", toolkit.StrArray("How the user (or you, afterwards) can tell the change works, one check per item, e.g. \"go test ./parser passes\"; shown with the proposed patch."))
	maxFile := formatBytes(int64(o.MaxFileBytes))
	return []toolDef{
		def(read(ReadFileTool,
			fmt.Sprintf("Read a text file from the workspace. Returns the requested lines verbatim as `content`, with `start_line`, `end_line` and `total_lines` (1-based). "+
				"One call returns at most %d lines and %s; when `truncated` is true, call again with start_line set to end_line + 1 to read on. "+
				"Binary files are refused. Use list_files or search_text to find files first. "+
				"If an earlier call of this response proposed an edit of the file, you get the pending content and `pending` is true; a file proposed for deletion reads as not found.", o.MaxReadLines, formatBytes(int64(o.MaxReadBytes)))),
			[]string{"path"},
			prop("path", toolkit.Str("File to read. "+pathDesc)),
			prop("start_line", toolkit.Integer("First line to return, 1-based. Default 1.", 1, 0)),
			prop("end_line", toolkit.Integer("Last line to return, 1-based and inclusive. Default: the end of the file (within the per-call limit). A value past the end is allowed.", 1, 0)),
		),
		def(read(ListFilesTool,
			"List files in a workspace directory. `files` holds paths relative to the workspace root, ready to pass to read_file, in sorted order. "+
				"Files excluded by .gitignore are left out unless include_ignored is true. "+
				"Recursive by default (files only); with recursive false, one level is listed and directories end in \"/\". "+
				"`truncated` is true when there were more than max_results entries: narrow the path or add a pattern. "+
				"Files proposed earlier in this response are included (and named again in `pending`); files proposed for deletion are left out."),
			nil,
			prop("path", toolkit.Str("Directory to list. Default \".\", the workspace root. "+pathDesc)),
			prop("recursive", toolkit.Boolean("List everything below path (true) or only its direct entries (false).", true)),
			prop("pattern", toolkit.Str("Glob that entries must match, e.g. \"*.go\" or \"src/**/*_test.ts\". Without a slash it is matched against the file name; with one, against the path relative to the workspace root or to path. Supports *, ?, [abc] and ** (any number of directories).")),
			prop("max_results", toolkit.Integer(fmt.Sprintf("Most entries to return. Default %d.", o.ListResults), 1, o.MaxListResults)),
			prop("include_ignored", toolkit.Boolean(ignoredDesc, false)),
		),
		def(edit(WriteFileTool,
			fmt.Sprintf("Propose creating a file, or replacing the entire contents of one, with `content` (the whole file, not a diff; to change part of a file use edit_file). "+
				"A symlink is written through to its target. The parent directory must exist unless create_dirs is true. Content is at most %s. ", maxFile)+pendingNote),
			[]string{"path", "content"},
			prop("path", toolkit.Str("File to create or replace. "+pathDesc)),
			prop("content", toolkit.Str("The complete new contents of the file, as text.")),
			prop("create_dirs", toolkit.Boolean("Allow a parent directory that does not exist yet; the missing directories are created when the patch is applied.", false)),
			rationale, criteria,
		),
		def(edit(EditFileTool,
			fmt.Sprintf("Propose replacing exact text in an existing text file: old_string must match the file's current content exactly, whitespace, indentation and line endings included, and occur exactly once unless replace_all is true. "+
				"Read the file first (read_file) and copy old_string from it; include enough surrounding lines to make it unique. "+
				"To create a file or rewrite one whole, use write_file. The file may be at most %s, before and after. ", maxFile)+pendingNote),
			[]string{"path", "old_string", "new_string"},
			prop("path", toolkit.Str("File to edit. "+pathDesc)),
			prop("old_string", toolkit.Str("The exact text to replace, copied from the file (not empty).")),
			prop("new_string", toolkit.Str("The text to put in its place; must differ from old_string. \"\" removes old_string.")),
			prop("replace_all", toolkit.Boolean("Replace every occurrence of old_string instead of requiring exactly one.", false)),
			rationale, criteria,
		),
		def(edit(DeleteFileTool,
			fmt.Sprintf("Propose deleting one file (a regular file of at most %s: not a directory, not a symlink). ", maxFile)+pendingNote),
			[]string{"path"},
			prop("path", toolkit.Str("File to delete. "+pathDesc)),
			rationale,
		),
	}
}

// formatBytes formats n bytes for people: "512 B", "2.1 KiB", "3.0 MiB".
func formatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)))
	case n < 1<<30:
		return trimZero(fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)))
	}
	return trimZero(fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)))
}

// trimZero turns "40.0 KiB" into "40 KiB".
func trimZero(s string) string {
	if n := len(s); n > 6 && s[n-6:n-4] == ".0" {
		return s[:n-6] + s[n-4:]
	}
	return s
}
