package syntax

import (
	"bytes"
	"strings"
)

// Lang names a file's language. Analyze extracts symbols and references
// for the languages Supported reports; the others are indexed as text.
type Lang string

// Languages with symbol support.
const (
	LangGo         Lang = "go"
	LangPython     Lang = "python"
	LangJavaScript Lang = "javascript" // includes JSX
	LangTypeScript Lang = "typescript"
	LangTSX        Lang = "tsx"
	LangRust       Lang = "rust"
	LangJava       Lang = "java"
	LangC          Lang = "c"
	LangCPP        Lang = "cpp"
)

// Languages indexed as text: chunks only, no symbols or references.
const (
	LangMarkdown   Lang = "markdown" // chunks also break before '#' headings
	LangShell      Lang = "shell"
	LangAssembly   Lang = "assembly"
	LangMakefile   Lang = "makefile"
	LangDockerfile Lang = "dockerfile"
	LangYAML       Lang = "yaml"
	LangJSON       Lang = "json"
	LangTOML       Lang = "toml"
	LangXML        Lang = "xml"
	LangHTML       Lang = "html"
	LangCSS        Lang = "css"
	LangSQL        Lang = "sql"
	LangProtobuf   Lang = "protobuf"
	LangText       Lang = "text" // anything Detect does not recognise
)

// Supported reports whether Analyze extracts symbols and references for
// lang (Go, Python, JavaScript, TypeScript, TSX, Rust, Java, C, C++).
func Supported(lang Lang) bool {
	switch lang {
	case LangGo, LangPython, LangJavaScript, LangTypeScript, LangTSX,
		LangRust, LangJava, LangC, LangCPP:
		return true
	}
	return false
}

// extLangs maps a lower-case file extension (with its dot) to a language.
var extLangs = map[string]Lang{
	".go":   LangGo,
	".py":   LangPython,
	".pyi":  LangPython,
	".pyw":  LangPython,
	".js":   LangJavaScript,
	".mjs":  LangJavaScript,
	".cjs":  LangJavaScript,
	".jsx":  LangJavaScript,
	".ts":   LangTypeScript,
	".mts":  LangTypeScript,
	".cts":  LangTypeScript,
	".tsx":  LangTSX,
	".rs":   LangRust,
	".java": LangJava,
	".c":    LangC,
	// ".h" is decided by content in Detect.
	".cc":         LangCPP,
	".cpp":        LangCPP,
	".cxx":        LangCPP,
	".c++":        LangCPP,
	".hh":         LangCPP,
	".hpp":        LangCPP,
	".hxx":        LangCPP,
	".h++":        LangCPP,
	".ipp":        LangCPP,
	".tpp":        LangCPP,
	".inl":        LangCPP,
	".md":         LangMarkdown,
	".markdown":   LangMarkdown,
	".sh":         LangShell,
	".bash":       LangShell,
	".zsh":        LangShell,
	".ksh":        LangShell,
	".rc":         LangShell,
	".s":          LangAssembly,
	".asm":        LangAssembly,
	".mk":         LangMakefile,
	".dockerfile": LangDockerfile,
	".yaml":       LangYAML,
	".yml":        LangYAML,
	".json":       LangJSON,
	".jsonc":      LangJSON,
	".toml":       LangTOML,
	".xml":        LangXML,
	".html":       LangHTML,
	".htm":        LangHTML,
	".css":        LangCSS,
	".scss":       LangCSS,
	".less":       LangCSS,
	".sql":        LangSQL,
	".proto":      LangProtobuf,
	".txt":        LangText,
	".rst":        LangText,
}

// nameLangs maps a lower-case base name to a language.
var nameLangs = map[string]Lang{
	"makefile":      LangMakefile,
	"gnumakefile":   LangMakefile,
	"bsdmakefile":   LangMakefile,
	"dockerfile":    LangDockerfile,
	"containerfile": LangDockerfile,
	".bashrc":       LangShell,
	".bash_profile": LangShell,
	".bash_aliases": LangShell,
	".zshrc":        LangShell,
	".zprofile":     LangShell,
	".profile":      LangShell,
}

// interpreterLangs maps a shebang interpreter's base name, without a
// trailing version ("python3.12" -> "python"), to a language.
var interpreterLangs = map[string]Lang{
	"python":  LangPython,
	"pypy":    LangPython,
	"node":    LangJavaScript,
	"nodejs":  LangJavaScript,
	"deno":    LangTypeScript,
	"ts-node": LangTypeScript,
	"tsx":     LangTypeScript,
	"bun":     LangTypeScript,
	"sh":      LangShell,
	"bash":    LangShell,
	"zsh":     LangShell,
	"ksh":     LangShell,
	"dash":    LangShell,
	"ash":     LangShell,
	"rc":      LangShell,
}

// Detect guesses the language of the file at path (slash- or
// backslash-separated; only its base name is used) whose first bytes are
// head (may be nil or short; Detect reads at most 4 KiB of it). The extension and
// well-known names (Makefile, Dockerfile, .bashrc) decide first; ".h" is C++
// when head shows C++ (namespace, class, template, access specifiers, std::)
// and C otherwise; a path that says nothing falls back to head's shebang line
// ("#!/usr/bin/env python3"). Detect returns LangText when nothing matches.
func Detect(path string, head []byte) Lang {
	base := path
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	name := strings.ToLower(base)
	if l, ok := nameLangs[name]; ok {
		return l
	}
	if strings.HasPrefix(name, "dockerfile.") || strings.HasPrefix(name, "containerfile.") {
		return LangDockerfile
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		ext := name[i:]
		if ext == ".h" {
			if looksCPP(head) {
				return LangCPP
			}
			return LangC
		}
		if l, ok := extLangs[ext]; ok {
			return l
		}
	}
	if l, ok := shebangLang(head); ok {
		return l
	}
	return LangText
}

// cppMarkers are byte strings that, in a ".h" file's head, mean C++.
var cppMarkers = [][]byte{
	[]byte("namespace "),
	[]byte("template<"),
	[]byte("template <"),
	[]byte("class "),
	[]byte("public:"),
	[]byte("private:"),
	[]byte("protected:"),
	[]byte("std::"),
	[]byte("constexpr "),
	[]byte("nullptr"),
	[]byte("static_assert("),
	[]byte(`extern "C++"`),
}

// looksCPP reports whether a ".h" file's head shows C++: one of
// cppMarkers, or an #include of a standard header without an extension
// ("#include <vector>"; C's system headers all end in ".h").
func looksCPP(head []byte) bool {
	if len(head) > maxSniff {
		head = head[:maxSniff]
	}
	for _, m := range cppMarkers {
		if bytes.Contains(head, m) {
			return true
		}
	}
	for rest := head; ; {
		i := bytes.Index(rest, []byte("#include <"))
		if i < 0 {
			return false
		}
		rest = rest[i+len("#include <"):]
		j := bytes.IndexAny(rest, ">\n")
		if j > 0 && rest[j] == '>' && bytes.IndexByte(rest[:j], '.') < 0 {
			return true
		}
	}
}

// maxSniff caps how much of head Detect reads.
const maxSniff = 4096

// shebangLang reads a "#!" first line: "#!/bin/sh", "#!/usr/bin/env -S
// python3 -u".
func shebangLang(head []byte) (Lang, bool) {
	if !bytes.HasPrefix(head, []byte("#!")) {
		return "", false
	}
	line := head[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return "", false
	}
	prog := fields[0]
	if i := strings.LastIndexByte(prog, '/'); i >= 0 {
		prog = prog[i+1:]
	}
	if prog == "env" {
		prog = ""
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
				continue // env's options and VAR=value assignments
			}
			prog = f
			if i := strings.LastIndexByte(prog, '/'); i >= 0 {
				prog = prog[i+1:]
			}
			break
		}
	}
	// Drop a version suffix: python3, python3.12, pypy3.
	prog = strings.TrimRight(prog, "0123456789.")
	l, ok := interpreterLangs[prog]
	return l, ok
}
