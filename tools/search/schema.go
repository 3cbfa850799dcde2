package search

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
	def := func(name, desc string, required []string, props ...toolkit.Prop) toolDef {
		schema, fields := toolkit.ObjectSchema(required, props...)
		return toolDef{
			spec: engine.ToolSpec{
				Name: name, Description: desc, InputSchema: schema,
				Risk: engine.RiskLow, ReadOnly: true,
			},
			fields: fields,
		}
	}
	pathDesc := "Directory (or single file) to search in, relative to the workspace root; an absolute path inside the workspace also works. Default: the whole workspace."
	return []toolDef{
		def(SearchSymbolsTool,
			"Find where functions, methods, types, variables and other symbols are defined, by name, using the workspace's code index. "+
				"Matches exact names first, then prefixes, then fuzzy matches that understand camelCase and snake_case (\"readf\" finds ReadFile and read_file). "+
				"Returns `symbols` as {name, kind, container, path, language, start_line, end_line, definition, match, score}, best first; "+
				"read a hit with read_file using its path and line range. Needs the code index: when there is none, use search_text with a pattern instead.",
			[]string{"query"},
			prop("query", toolkit.Str("The symbol name or part of it, e.g. \"ReadFile\", \"readf\" or \"read_file\". Not a sentence: use search_text with query for questions in words.")),
			prop("kind", toolkit.Str("Only return symbols of this kind, e.g. \"function\", \"method\", \"type\", \"interface\", \"variable\" or \"constant\". Default: every kind.")),
			prop("path", toolkit.Str(pathDesc)),
			prop("include_refs", toolkit.Boolean("Also return references (calls and other uses) of exact matches, with definition false.", false)),
			prop("limit", toolkit.Integer(fmt.Sprintf("Most symbols to return. Default %d.", DefaultSymbolResults), 1, MaxSymbolResults)),
		),
		def(SearchTextTool,
			"Search the workspace's code. Give exactly one of `pattern` or `query`.\n"+
				"With `pattern`: find exact text (or, with regex true, an RE2 regular expression as in Go: no lookaround or backreferences) line by line. "+
				"Returns `matches` as {path, line, column, text} (1-based; column counts characters), with `before` and `after` context lines when context_lines is set, "+
				"plus `files_searched` and `truncated`. Files excluded by .gitignore (unless path names an ignored directory), binary files and .git are not searched; "+
				fmt.Sprintf("without the code index, files larger than %s are skipped too.\n", formatBytes(o.MaxSearchFileBytes))+
				"With `query`: rank code chunks (functions, types) by how well they match a question or description in words, "+
				"e.g. \"where are HTTP retries configured\"; returns `chunks` as {path, start_line, end_line, language, kind, name, score, text}, best first. "+
				"Query search needs the code index; pattern search works without it.",
			nil,
			prop("pattern", toolkit.Str("Text to find, exactly as written (case-sensitive unless case_insensitive is true). With regex true, an RE2 regular expression. Use this or query, not both.")),
			prop("query", toolkit.Str("A question or description in natural language, to rank code chunks by relevance. Use this or pattern, not both.")),
			prop("regex", toolkit.Boolean("Treat pattern as an RE2 regular expression rather than exact text. Only with pattern.", false)),
			prop("case_insensitive", toolkit.Boolean("Match letters regardless of case. Only with pattern.", false)),
			prop("path", toolkit.Str(pathDesc)),
			prop("include", toolkit.Str("Glob restricting which files are searched, e.g. \"*.go\" or \"src/**/*.ts\". Without a slash it is matched against the file name; with one, against the path relative to the workspace root. Only with pattern.")),
			prop("context_lines", toolkit.Integer("Lines of context to return before and after each match. Default 0. Only with pattern.", 0, MaxContextLines)),
			prop("limit", toolkit.Integer(fmt.Sprintf("Most results to return: matching lines with pattern (default %d, at most %d), chunks with query (default %d, at most %d).",
				DefaultTextResults, MaxTextResults, DefaultChunkResults, MaxChunkResults), 1, MaxTextResults)),
		),
		def(VectorSearchTool,
			"Find code by meaning: rank code chunks (functions, types) by embedding similarity to a question or description in words, "+
				"so it finds related code even when it uses different words than the query. "+
				"Returns `chunks` as {path, start_line, end_line, language, kind, name, score, text}, most similar first. "+
				"Needs the code index and an embedding model; when they are not available it fails, and search_text (with query or pattern) is the alternative.",
			[]string{"query"},
			prop("query", toolkit.Str("A question or description in natural language, e.g. \"validate a user's password\".")),
			prop("path", toolkit.Str(pathDesc)),
			prop("limit", toolkit.Integer(fmt.Sprintf("Most chunks to return. Default %d.", DefaultChunkResults), 1, MaxChunkResults)),
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

// plural formats a count with its noun: "1 file", "3 files".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
