// Package syntax turns one source file's bytes into what the workspace code
// index stores about it: definitions (symbols), identifier references, and
// chunks — line ranges cut along definitions for ranking and embedding.
//
// The package is pure: it reads nothing but its arguments, keeps no state
// that callers can observe, and every function is safe for concurrent use.
//
// Go is analysed with go/parser and go/ast. Python, JavaScript (with JSX),
// TypeScript, TSX, Rust, Java, C and C++ are analysed with tree-sitter
// grammars and one query per language (queries.go), compiled on first use
// and shared; parsers and query cursors are pooled and every tree is
// freed. Every other language is indexed as text: chunks only, cut at
// blank-line-separated paragraphs.
//
// Symbols are the definitions visible outside a function: package- or
// module-level functions, types, constants and variables, and the members
// of classes, structs, interfaces, traits, enums, impls and namespaces.
// Definitions inside a function body or an anonymous function or class are
// not symbols. A reference is any identifier occurrence that is not the name
// of a symbol: uses, but also parameters and local variables.
//
// Lines are 1-based and counted by '\n' bytes; columns are 1-based byte
// offsets within a line. A line is blank when it holds only spaces, tabs,
// '\r', '\f' or '\v'. The chunking rules are described in chunk.go.
package syntax
