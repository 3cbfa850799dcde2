package main

import (
	"bytes"
	"path"
	"strings"

	"github.com/plexus-agent/plexus/engine/workspace"
)

// workspaceWalk walks as git sees the workspace and skips directories it
// cannot read instead of failing the whole count.
var workspaceWalk = workspace.WalkOptions{OnError: func(string, error) error { return nil }}

// language is a language's name and comment syntax.
type language struct {
	name string
	// line are the markers that start a comment running to the end of the
	// line; block the pairs that open and close a block comment.
	line  []string
	block [][2]string
}

var (
	cStyle   = language{line: []string{"//"}, block: [][2]string{{"/*", "*/"}}}
	hash     = language{line: []string{"#"}}
	markup   = language{block: [][2]string{{"<!--", "-->"}}}
	noMarker = language{}
)

func lang(name string, syntax language) *language {
	syntax.name = name
	return &syntax
}

// byExtension maps a lower-case file extension to its language.
var byExtension = map[string]*language{
	".go": lang("Go", cStyle), ".c": lang("C", cStyle), ".h": lang("C", cStyle),
	".cc": lang("C++", cStyle), ".cpp": lang("C++", cStyle), ".cxx": lang("C++", cStyle),
	".hh": lang("C++", cStyle), ".hpp": lang("C++", cStyle), ".java": lang("Java", cStyle),
	".kt": lang("Kotlin", cStyle), ".cs": lang("C#", cStyle), ".rs": lang("Rust", cStyle),
	".swift": lang("Swift", cStyle), ".scala": lang("Scala", cStyle),
	".js": lang("JavaScript", cStyle), ".mjs": lang("JavaScript", cStyle), ".cjs": lang("JavaScript", cStyle),
	".jsx": lang("JavaScript", cStyle), ".ts": lang("TypeScript", cStyle), ".tsx": lang("TypeScript", cStyle),
	".proto": lang("Protocol Buffers", cStyle), ".css": lang("CSS", language{block: [][2]string{{"/*", "*/"}}}),
	".py": lang("Python", hash), ".rb": lang("Ruby", hash), ".sh": lang("Shell", hash),
	".bash": lang("Shell", hash), ".pl": lang("Perl", hash), ".r": lang("R", hash),
	".yaml": lang("YAML", hash), ".yml": lang("YAML", hash), ".toml": lang("TOML", hash),
	".php": lang("PHP", language{line: []string{"//", "#"}, block: [][2]string{{"/*", "*/"}}}),
	".sql": lang("SQL", language{line: []string{"--"}, block: [][2]string{{"/*", "*/"}}}),
	".lua": lang("Lua", language{line: []string{"--"}}), ".hs": lang("Haskell", language{line: []string{"--"}, block: [][2]string{{"{-", "-}"}}}),
	".html": lang("HTML", markup), ".htm": lang("HTML", markup), ".xml": lang("XML", markup),
	".md": lang("Markdown", markup), ".json": lang("JSON", noMarker),
}

// byName maps file names that have no telling extension.
var byName = map[string]*language{
	"Makefile": lang("Makefile", hash), "makefile": lang("Makefile", hash), "GNUmakefile": lang("Makefile", hash),
	"Dockerfile": lang("Dockerfile", hash),
}

// languageOf returns the language of a file path, or nil.
func languageOf(name string) *language {
	base := path.Base(name)
	if l := byName[base]; l != nil {
		return l
	}
	return byExtension[strings.ToLower(path.Ext(base))]
}

// count adds the lines of data to c: blank, comment or code (see the
// package doc).
func (l *language) count(data []byte, c *LanguageCount) {
	var closer string // the block comment we are inside, if any
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		s := strings.TrimSpace(string(line))
		if s == "" && closer == "" {
			c.Blank++
			continue
		}
		code := false
		closer, code = l.scan(s, closer)
		if code {
			c.Code++
		} else {
			c.Comment++
		}
	}
}

// scan reads one trimmed line starting inside the block comment closer
// ("" for none) and returns the block comment it ends inside and whether
// any code was on it.
func (l *language) scan(s, closer string) (string, bool) {
	code := false
	for s != "" {
		if closer != "" {
			i := strings.Index(s, closer)
			if i < 0 {
				return closer, code
			}
			s, closer = strings.TrimSpace(s[i+len(closer):]), ""
			continue
		}
		start, open := len(s), ""
		for _, b := range l.block {
			if i := strings.Index(s, b[0]); i >= 0 && i < start {
				start, open, closer = i, b[0], b[1]
			}
		}
		lineAt := len(s)
		for _, m := range l.line {
			if i := strings.Index(s, m); i >= 0 && i < lineAt {
				lineAt = i
			}
		}
		if lineAt < start { // a line comment comes first: the rest is comment
			return "", code || strings.TrimSpace(s[:lineAt]) != ""
		}
		if open == "" {
			return "", true
		}
		code = code || strings.TrimSpace(s[:start]) != ""
		s = s[start+len(open):]
	}
	return closer, code
}
