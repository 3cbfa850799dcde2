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

// toolDefs returns the three tools' definitions for opts (with defaults
// applied), in the order Tools lists them.
func toolDefs(o Options) []toolDef {
	def := func(name, desc string, risk engine.RiskLevel, readOnly bool, required []string, props ...toolkit.Prop) toolDef {
		schema, fields := toolkit.ObjectSchema(required, props...)
		return toolDef{
			spec: engine.ToolSpec{
				Name: name, Description: desc, InputSchema: schema,
				Risk: risk, ReadOnly: readOnly, NeedsApproval: !readOnly,
			},
			fields: fields,
		}
	}
	pathDesc := "Path relative to the workspace root (an absolute path inside the workspace also works)."
	ignoredDesc := "Also include files that .gitignore (or .git/info/exclude) excludes, such as node_modules or build output. Default false. The .git directory is never included. A path that is itself ignored is always listed in full."
	return []toolDef{
		def(ReadFileTool,
			fmt.Sprintf("Read a text file from the workspace. Returns the requested lines verbatim as `content`, with `start_line`, `end_line` and `total_lines` (1-based). "+
				"One call returns at most %d lines and %s; when `truncated` is true, call again with start_line set to end_line + 1 to read on. "+
				"Binary files are refused. Use list_files or search_text to find files first.", o.MaxReadLines, formatBytes(int64(o.MaxReadBytes))),
			engine.RiskLow, true, []string{"path"},
			prop("path", toolkit.Str("File to read. "+pathDesc)),
			prop("start_line", toolkit.Integer("First line to return, 1-based. Default 1.", 1, 0)),
			prop("end_line", toolkit.Integer("Last line to return, 1-based and inclusive. Default: the end of the file (within the per-call limit). A value past the end is allowed.", 1, 0)),
		),
		def(ListFilesTool,
			"List files in a workspace directory. `files` holds paths relative to the workspace root, ready to pass to read_file, in sorted order. "+
				"Files excluded by .gitignore are left out unless include_ignored is true. "+
				"Recursive by default (files only); with recursive false, one level is listed and directories end in \"/\". "+
				"`truncated` is true when there were more than max_results entries: narrow the path or add a pattern.",
			engine.RiskLow, true, nil,
			prop("path", toolkit.Str("Directory to list. Default \".\", the workspace root. "+pathDesc)),
			prop("recursive", toolkit.Boolean("List everything below path (true) or only its direct entries (false).", true)),
			prop("pattern", toolkit.Str("Glob that entries must match, e.g. \"*.go\" or \"src/**/*_test.ts\". Without a slash it is matched against the file name; with one, against the path relative to the workspace root or to path. Supports *, ?, [abc] and ** (any number of directories).")),
			prop("max_results", toolkit.Integer(fmt.Sprintf("Most entries to return. Default %d.", o.ListResults), 1, o.MaxListResults)),
			prop("include_ignored", toolkit.Boolean(ignoredDesc, false)),
		),
		def(WriteFileTool,
			fmt.Sprintf("Create a file in the workspace or replace its entire contents with `content` (not a patch: send the whole file). "+
				"The write is atomic and keeps an existing file's permissions; a symlink is written through to its target. "+
				"The parent directory must exist unless create_dirs is true. Content is at most %s. The user approves each call.", formatBytes(int64(o.MaxWriteBytes))),
			engine.RiskMedium, false, []string{"path", "content"},
			prop("path", toolkit.Str("File to write. "+pathDesc)),
			prop("content", toolkit.Str("The complete new contents of the file, as text.")),
			prop("create_dirs", toolkit.Boolean("Create missing parent directories.", false)),
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
