// Package syntax turns one source file's bytes into what the workspace code
// index stores about it: definitions (symbols), identifier references, and
// chunks — line ranges cut along definitions for ranking and embedding.
//
// The package is pure: it reads nothing but its arguments, keeps no state
// that callers can observe, and every function is safe for concurrent use.
//
// Go is analysed with go/parser and go/ast. Python, JavaScript, TypeScript,
// TSX, Rust, Java, C and C++ are analysed with tree-sitter grammars and a
// query per language (see queries.go). Every other language is indexed as
// text: chunks only, cut at blank-line-separated paragraphs.
//
// Lines are 1-based and counted by '\n' bytes; columns are 1-based byte
// offsets within a line. A line is blank when it holds only spaces, tabs,
// '\r', '\f' or '\v'.
package syntax
