package engine

import (
	"path"
	"regexp"
	"strings"
)

// This file finds code related to a file by convention, without an index:
// the language family of a file, the imports it declares, where its tests
// live, and the function or block around a line. Everything here is best
// effort over untrusted text: it never fails, it may miss.

// Language families the context gathering knows.
const (
	langGo     = "go"
	langJS     = "js" // JavaScript and TypeScript
	langPython = "python"
	langJava   = "java"
	langRust   = "rust"
	langOther  = ""
)

var jsExts = []string{".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"}

// langFamily is the family of the workspace-relative file rel, by its
// extension, else by the editor's language id.
func langFamily(rel, languageID string) string {
	ext := strings.ToLower(path.Ext(rel))
	switch {
	case ext == ".go":
		return langGo
	case isJSExt(ext):
		return langJS
	case ext == ".py" || ext == ".pyi":
		return langPython
	case ext == ".java":
		return langJava
	case ext == ".rs":
		return langRust
	}
	switch strings.ToLower(languageID) {
	case "go":
		return langGo
	case "javascript", "typescript", "javascriptreact", "typescriptreact":
		return langJS
	case "python":
		return langPython
	case "java":
		return langJava
	case "rust":
		return langRust
	}
	return langOther
}

func isJSExt(ext string) bool {
	for _, e := range jsExts {
		if ext == e {
			return true
		}
	}
	return false
}

// maxImportScan bounds how much of a file parseImports reads.
const maxImportScan = 256 << 10

// parseImports returns the import specifiers src declares, in order and
// without duplicates: Go import paths; JavaScript/TypeScript module
// specifiers of import, export … from, require() and import(); Python
// modules of import and from … import, relative ones keeping their dots
// (".models", "..pkg.util"; "from . import a" gives ".a"). Other families
// give nil. Only the first maxImportScan bytes are read.
func parseImports(family string, src []byte) []string {
	if len(src) > maxImportScan {
		src = src[:maxImportScan]
	}
	var specs []string
	switch family {
	case langGo:
		specs = goImports(string(src))
	case langJS:
		for _, m := range jsImportRE.FindAllStringSubmatch(string(src), -1) {
			for _, s := range m[1:] {
				if s != "" {
					specs = append(specs, s)
				}
			}
		}
	case langPython:
		specs = pythonImports(string(src))
	}
	seen := map[string]bool{}
	out := specs[:0]
	for _, s := range specs {
		if s != "" && !seen[s] && !strings.ContainsAny(s, "\n\r\x00") {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// goImports reads the import declarations at the top of a Go file; it
// stops at the first func, type, var or const declaration.
func goImports(src string) []string {
	var specs []string
	inBlock, inComment := false, false
	for line := range strings.SplitSeq(src, "\n") {
		line = strings.TrimSpace(line)
		if inComment {
			end := strings.Index(line, "*/")
			if end < 0 {
				continue
			}
			line, inComment = strings.TrimSpace(line[end+2:]), false
		}
		if i := strings.Index(line, "//"); i >= 0 && !strings.ContainsAny(line[:i], "\"`") {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "/*") {
			if !strings.Contains(line[2:], "*/") {
				inComment = true
			}
			continue
		}
		switch {
		case inBlock:
			if strings.HasPrefix(line, ")") {
				inBlock = false
				continue
			}
			if i := strings.Index(line, ")"); i >= 0 && !strings.ContainsAny(line[i:], "\"`") {
				line, inBlock = line[:i], false
			}
			specs = append(specs, quoted(line)...)
		case strings.HasPrefix(line, "import"):
			rest := strings.TrimSpace(strings.TrimPrefix(line, "import"))
			if strings.HasPrefix(rest, "(") {
				rest = rest[1:]
				inBlock = true
				if i := strings.LastIndex(rest, ")"); i >= 0 && !strings.ContainsAny(rest[i:], "\"`") {
					rest, inBlock = rest[:i], false
				}
			}
			specs = append(specs, quoted(rest)...)
		case strings.HasPrefix(line, "func") || strings.HasPrefix(line, "type") ||
			strings.HasPrefix(line, "var") || strings.HasPrefix(line, "const"):
			return specs
		}
	}
	return specs
}

// quoted returns the "…" and `…` strings of a line of Go import specs.
func quoted(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, "\"`")
		if i < 0 {
			return out
		}
		q := s[i]
		j := strings.IndexByte(s[i+1:], q)
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+2+j:]
	}
}

// jsImportRE matches the module specifier of an ES import or re-export, a
// require() and a dynamic import(); one group per form.
var jsImportRE = regexp.MustCompile(`(?m)` +
	`^\s*import\s+(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"\n]+)['"]` +
	`|^\s*export\s+(?:type\s+)?(?:\*|\{[^}]*\})(?:\s+as\s+[\w$]+)?\s+from\s+['"]([^'"\n]+)['"]` +
	`|\brequire\(\s*['"]([^'"\n]+)['"]\s*\)` +
	`|\bimport\(\s*['"]([^'"\n]+)['"]\s*\)`)

var (
	pyFromRE   = regexp.MustCompile(`^from\s+(\.*[\w.]*)\s+import\s+(.*)$`)
	pyImportRE = regexp.MustCompile(`^import\s+(.*)$`)
	pyNameRE   = regexp.MustCompile(`^[A-Za-z_][\w.]*$`)
)

// pythonImports reads import and from … import statements at line starts
// (any indentation).
func pythonImports(src string) []string {
	var specs []string
	for line := range strings.SplitSeq(src, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if m := pyFromRE.FindStringSubmatch(line); m != nil {
			mod := m[1]
			if strings.Trim(mod, ".") != "" {
				specs = append(specs, mod)
				continue
			}
			if mod == "" {
				continue
			}
			// from . import a, b: a and b may be modules of the package.
			for _, name := range strings.Split(strings.Trim(m[2], "() \\"), ",") {
				name = strings.TrimSpace(name)
				if before, _, ok := strings.Cut(name, " as "); ok {
					name = strings.TrimSpace(before)
				}
				if pyNameRE.MatchString(name) {
					specs = append(specs, mod+name)
				}
			}
			continue
		}
		if m := pyImportRE.FindStringSubmatch(line); m != nil {
			for _, name := range strings.Split(m[1], ",") {
				name = strings.TrimSpace(name)
				if before, _, ok := strings.Cut(name, " as "); ok {
					name = strings.TrimSpace(before)
				}
				if pyNameRE.MatchString(name) {
					specs = append(specs, name)
				}
			}
		}
	}
	return specs
}

// goModule is a Go module found in the workspace.
type goModule struct {
	dir  string // workspace-relative, slash-separated; "." for the root
	path string // the module path of its go.mod
}

// modulePath returns the module path declared in a go.mod file, "" when
// there is none.
func modulePath(gomod []byte) string {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest = strings.TrimSpace(rest)
			if i := strings.Index(rest, "//"); i >= 0 {
				rest = strings.TrimSpace(rest[:i])
			}
			return strings.Trim(rest, "\"`")
		}
	}
	return ""
}

// importPath is the Go import path of the package in directory dir
// (workspace-relative) of module m.
func (m goModule) importPath(dir string) string {
	if dir == m.dir {
		return m.path
	}
	sub := dir
	if m.dir != "." {
		sub = strings.TrimPrefix(dir, m.dir+"/")
	}
	return m.path + "/" + sub
}

// importCandidates returns the workspace-relative files (or, for Go, the
// package directory) that spec, imported by the file rel, may name, most
// likely first; nil when spec is not in the workspace (a standard library
// or third-party module, a bare JavaScript package name). mod is the Go
// module rel belongs to (zero when none).
func importCandidates(family, rel, spec string, mod goModule) []string {
	dir := path.Dir(rel)
	switch family {
	case langGo:
		if mod.path == "" || (spec != mod.path && !strings.HasPrefix(spec, mod.path+"/")) {
			return nil
		}
		return []string{path.Join(mod.dir, strings.TrimPrefix(spec, mod.path))}
	case langJS:
		if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") && spec != "." && spec != ".." {
			return nil
		}
		base := path.Join(dir, spec)
		out := []string{base}
		ext := path.Ext(base)
		if stem := strings.TrimSuffix(base, ext); isJSExt(ext) {
			// TypeScript's ESM imports name the emitted .js file.
			for _, e := range []string{".ts", ".tsx", ".mts", ".cts"} {
				out = append(out, stem+e)
			}
		}
		for _, e := range jsExts {
			out = append(out, base+e)
		}
		for _, e := range jsExts {
			out = append(out, base+"/index"+e)
		}
		return out
	case langPython:
		dots := len(spec) - len(strings.TrimLeft(spec, "."))
		mod := strings.ReplaceAll(spec[dots:], ".", "/")
		var bases []string
		if dots > 0 {
			d := dir
			for range dots - 1 {
				d = path.Dir(d)
			}
			bases = []string{d}
		} else {
			bases = []string{".", "src"}
		}
		var out []string
		for _, b := range bases {
			if mod == "" {
				out = append(out, path.Join(b, "__init__.py"))
				continue
			}
			out = append(out, path.Join(b, mod+".py"), path.Join(b, mod, "__init__.py"))
		}
		return out
	}
	return nil
}

// testConvention returns, for the workspace-relative file rel, where its
// tests live by the naming conventions of its language (Go x_test.go;
// JavaScript/TypeScript x.test.ts, x.spec.ts, __tests__/x.ts; Python
// test_x.py, x_test.py, tests/test_x.py; Java XTest.java, also under
// src/test/ for src/main/), or, when rel is itself a test, where its source
// lives. inFile is true for Rust, whose unit tests sit in the file itself.
func testConvention(rel string) (tests, sources []string, inFile bool) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	join := func(parts ...string) string { return path.Join(append([]string{dir}, parts...)...) }
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	switch {
	case ext == ".go":
		if s, ok := strings.CutSuffix(stem, "_test"); ok {
			return nil, []string{join(s + ".go")}, false
		}
		return []string{join(stem + "_test.go")}, nil, false
	case isJSExt(ext):
		exts := []string{ext}
		switch ext {
		case ".ts":
			exts = append(exts, ".tsx")
		case ".tsx":
			exts = append(exts, ".ts")
		case ".js":
			exts = append(exts, ".jsx")
		case ".jsx":
			exts = append(exts, ".js")
		}
		for _, kind := range []string{".test", ".spec"} {
			if s, ok := strings.CutSuffix(stem, kind); ok {
				for _, e := range exts {
					sources = append(sources, join(s+e))
					if path.Base(dir) == "__tests__" {
						sources = append(sources, path.Join(path.Dir(dir), s+e))
					}
				}
				return nil, sources, false
			}
		}
		if path.Base(dir) == "__tests__" {
			for _, e := range exts {
				sources = append(sources, path.Join(path.Dir(dir), stem+e))
			}
			return nil, sources, false
		}
		for _, e := range exts {
			tests = append(tests, join(stem+".test"+e), join(stem+".spec"+e))
		}
		for _, e := range exts {
			tests = append(tests, join("__tests__", stem+e), join("__tests__", stem+".test"+e))
		}
		return tests, nil, false
	case ext == ".py":
		s, isTest := strings.CutPrefix(stem, "test_")
		if !isTest {
			s, isTest = strings.CutSuffix(stem, "_test")
		}
		if isTest {
			sources = []string{join(s + ".py")}
			if b := path.Base(dir); b == "tests" || b == "test" {
				sources = append(sources, path.Join(path.Dir(dir), s+".py"))
			}
			return nil, sources, false
		}
		return []string{join("test_" + stem + ".py"), join(stem + "_test.py"), join("tests", "test_"+stem+".py"),
			path.Join("tests", "test_"+stem+".py"), path.Join("test", "test_"+stem+".py")}, nil, false
	case ext == ".java":
		// mirror is dir with its from segment (src/main) replaced by to.
		mirror := func(from, to string) string {
			d := "/" + dir + "/"
			i := strings.Index(d, "/"+from+"/")
			if i < 0 {
				return ""
			}
			return strings.Trim(d[:i+1]+to+d[i+1+len(from):], "/")
		}
		for _, kind := range []string{"Test", "Tests", "IT"} {
			if s, ok := strings.CutSuffix(stem, kind); ok && s != "" {
				sources = []string{join(s + ".java")}
				if m := mirror("src/test", "src/main"); m != "" {
					sources = append(sources, path.Join(m, s+".java"))
				}
				return nil, sources, false
			}
		}
		tests = []string{join(stem + "Test.java"), join(stem + "Tests.java")}
		if m := mirror("src/main", "src/test"); m != "" {
			tests = append(tests, path.Join(m, stem+"Test.java"), path.Join(m, stem+"Tests.java"))
		}
		return tests, nil, false
	case ext == ".rs":
		return nil, nil, true
	}
	return nil, nil, false
}

// controlWords start statements whose block is not a scope worth
// explaining on its own.
var controlWords = map[string]bool{
	"if": true, "else": true, "for": true, "while": true, "switch": true, "case": true, "default": true,
	"do": true, "try": true, "catch": true, "finally": true, "select": true, "return": true, "go": true,
	"defer": true, "with": true, "loop": true, "match": true, "unsafe": true,
}

// braceScope finds the innermost brace-delimited block around line
// (0-based) whose header is not a control statement (if, for, …): a
// function, a method, a type, an object literal. It returns the 0-based
// inclusive lines from the block's header (with the comments and
// annotations directly above it) to its closing brace. Braces in string
// literals and comments are skipped, roughly: strings do not span lines.
func braceScope(lines []string, line int) (start, end int, ok bool) {
	type block struct{ start, end int }
	var stack, blocks []block
	stmt, parens, inComment := -1, 0, false
	for i, raw := range lines {
		code := stripCode(raw, &inComment)
		t := strings.TrimSpace(code)
		if t == "" {
			continue
		}
		if stmt < 0 {
			stmt = i
		}
		for _, c := range code {
			switch c {
			case '(', '[':
				parens++
			case ')', ']':
				parens = max(parens-1, 0)
			case '{':
				s := stmt
				if s < 0 {
					s = i
				}
				stack = append(stack, block{start: s})
				stmt = -1
			case '}':
				if n := len(stack); n > 0 {
					b := stack[n-1]
					stack = stack[:n-1]
					b.end = i
					blocks = append(blocks, b)
				}
				stmt = -1
			case ';':
				if parens == 0 {
					stmt = -1
				}
			}
		}
		if parens == 0 && !strings.ContainsRune(",(=+-*/&|.:?<>", rune(t[len(t)-1])) {
			stmt = -1
		}
	}
	best := -1
	for i, b := range blocks {
		if b.start > line || b.end < line || b.end == b.start {
			continue
		}
		if controlWords[firstWord(lines[b.start])] || strings.HasPrefix(strings.TrimSpace(lines[b.start]), "}") {
			continue
		}
		if best < 0 || b.end-b.start < blocks[best].end-blocks[best].start {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	start, end = blocks[best].start, blocks[best].end
	for start > 0 && isPreamble(lines[start-1]) {
		start--
	}
	return start, end, true
}

// stripCode returns the code of a line without comments and with the
// contents of string literals blanked; inComment carries a /* … */ comment
// across lines.
func stripCode(line string, inComment *bool) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case *inComment:
			if c == '*' && i+1 < len(line) && line[i+1] == '/' {
				*inComment = false
				i++
			}
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
				b.WriteByte(c)
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
			b.WriteByte(c)
		case c == '/' && i+1 < len(line) && line[i+1] == '/':
			return b.String()
		case c == '/' && i+1 < len(line) && line[i+1] == '*':
			*inComment = true
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isPreamble reports whether a line belongs above a declaration: a comment
// or an annotation (@Override, #[test], a decorator).
func isPreamble(line string) bool {
	t := strings.TrimSpace(line)
	for _, p := range []string{"//", "/*", "*", "#", "@"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// firstWord is the leading identifier of a line, "" when it starts with
// anything else.
func firstWord(line string) string {
	t := strings.TrimSpace(line)
	end := 0
	for end < len(t) && (t[end] == '_' || t[end] >= 'a' && t[end] <= 'z' || t[end] >= 'A' && t[end] <= 'Z' || end > 0 && t[end] >= '0' && t[end] <= '9') {
		end++
	}
	return t[:end]
}

// indentScope finds the def or class around line (0-based) of an
// indentation-structured file (Python): the nearest header above with less
// indentation than the line, down to the last line indented deeper than
// the header, with decorators and comments directly above.
func indentScope(lines []string, line int) (start, end int, ok bool) {
	if line < 0 || line >= len(lines) {
		return 0, 0, false
	}
	cur := line
	for cur >= 0 && strings.TrimSpace(lines[cur]) == "" {
		cur--
	}
	if cur < 0 {
		return 0, 0, false
	}
	isHeader := func(t string) bool {
		return strings.HasPrefix(t, "def ") || strings.HasPrefix(t, "async def ") || strings.HasPrefix(t, "class ")
	}
	header := -1
	if isHeader(strings.TrimSpace(lines[cur])) {
		header = cur
	} else {
		limit := indentOf(lines[cur])
		for k := cur - 1; k >= 0 && limit > 0; k-- {
			t := strings.TrimSpace(lines[k])
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			in := indentOf(lines[k])
			if in >= limit {
				continue
			}
			if isHeader(t) {
				header = k
				break
			}
			limit = in
		}
	}
	if header < 0 {
		return 0, 0, false
	}
	hin := indentOf(lines[header])
	end = header
	for k := header + 1; k < len(lines); k++ {
		if strings.TrimSpace(lines[k]) == "" {
			continue
		}
		if indentOf(lines[k]) <= hin {
			break
		}
		end = k
	}
	start = header
	for start > 0 && isPreamble(lines[start-1]) && indentOf(lines[start-1]) == hin {
		start--
	}
	return start, end, true
}

// indentOf is the width of a line's leading whitespace, a tab counting 4.
func indentOf(line string) int {
	n := 0
	for _, c := range line {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}
