package syntax

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Kind is what a symbol defines.
type Kind string

// Symbol kinds. A language uses the subset it has; the notes say which
// constructs map where.
const (
	KindFunction    Kind = "function"    // free function; JS/TS const bound to a function
	KindMethod      Kind = "method"      // function in a class, struct, interface, trait or impl; Go method and interface method
	KindConstructor Kind = "constructor" // Java/C++ constructor, JS/TS constructor(), Python __init__
	KindClass       Kind = "class"       // class; Java record
	KindStruct      Kind = "struct"      // Go/Rust/C/C++ struct; C/C++/Rust union
	KindInterface   Kind = "interface"   // Go/Java/TS interface; Java @interface
	KindTrait       Kind = "trait"       // Rust trait
	KindEnum        Kind = "enum"        // enum type
	KindType        Kind = "type"        // other named type: Go defined type or alias, typedef, type alias, associated type
	KindConst       Kind = "const"       // constant (Go const, JS/TS const, Rust const, Python UPPER_CASE module variable)
	KindVar         Kind = "var"         // package- or module-level variable (Rust static, C global)
	KindField       Kind = "field"       // struct or class field, interface property, Java record component
	KindEnumMember  Kind = "enum_member" // enum constant or variant
	KindModule      Kind = "module"      // Rust mod, C++ namespace, TS namespace or declared module
	KindMacro       Kind = "macro"       // C/C++ #define, Rust macro_rules!
)

// allKinds lists every Kind.
var allKinds = []Kind{
	KindFunction, KindMethod, KindConstructor, KindClass, KindStruct,
	KindInterface, KindTrait, KindEnum, KindType, KindConst, KindVar,
	KindField, KindEnumMember, KindModule, KindMacro,
}

// Symbol is one definition.
type Symbol struct {
	Name string
	Kind Kind
	// Container is the name of the enclosing class, struct, interface,
	// trait, enum, impl type, module or namespace; "" at top level. For a
	// Go method it is the receiver's base type name ("List" for
	// "func (l *List[T]) Push"); for a C++ member defined out of line
	// ("void Box::run()") it is the qualifying scope.
	Container string
	// Line and EndLine are the 1-based inclusive line range of the whole
	// definition, including its doc comment, decorators, attributes and
	// export/template wrapper.
	Line, EndLine int
	// NameLine and Column locate the name: its 1-based line (after Line
	// when a doc comment or decorator comes first) and 1-based byte column.
	NameLine, Column int
}

// Ref is every occurrence of one identifier name that is not the name of
// a Symbol in the same file. Lines are 1-based, ascending, deduplicated.
type Ref struct {
	Name  string
	Lines []int32
}

// Chunk is a range of lines cut for ranking and embedding.
type Chunk struct {
	// StartLine and EndLine are 1-based, inclusive, and both non-blank.
	StartLine, EndLine int
	// Kind and Name describe the symbol the chunk was cut for, Name
	// qualified with its container ("Reader.Read"). A chunk of code
	// between symbols, which may hold definitions shorter than
	// MinChunkLines, takes the first such definition; Kind and Name are ""
	// when it holds none (package clause, imports, top-level statements,
	// text files).
	Kind Kind
	Name string
	// Part is 0 when the symbol fits one chunk and 1, 2, ... for the
	// chunks of a symbol longer than MaxChunkLines. The parts of a long
	// symbol that has nested symbols (a class and its methods) are the
	// pieces outside those nested symbols' own chunks; a module or
	// namespace is always cut that way.
	Part int
}

// Analysis is what Analyze finds in one file.
type Analysis struct {
	Lang Lang
	// Symbols are the definitions, in source order (by Line, then by
	// the name's position). Definitions local to a function body are not
	// symbols.
	Symbols []Symbol
	// Refs are sorted by Name.
	Refs []Ref
	// Chunks are in order, do not overlap, and cover every non-blank line
	// of the file exactly once. None is longer than MaxChunkLines.
	Chunks []Chunk
	// Fallback is nil, or why a file of a Supported language was
	// indexed as text: ErrParseBudget. Symbols and Refs are then empty
	// and Chunks are cut at paragraphs.
	Fallback error
}

// Options tune Analyze. The zero value means the defaults.
type Options struct {
	// MaxChunkLines caps a chunk's length in lines (default 120). A
	// longer symbol is split into parts, preferably at blank lines.
	MaxChunkLines int
	// MinChunkLines (default 5): definitions shorter than this are not
	// chunked on their own but kept with the code around them, and a
	// piece of code between symbols (or of a long symbol around its
	// nested symbols) shorter than this joins a neighbouring chunk when
	// the result fits MaxChunkLines. 1 disables both. Values above
	// MaxChunkLines count as MaxChunkLines.
	MinChunkLines int
}

// Default option values.
const (
	DefaultMaxChunkLines = 120
	DefaultMinChunkLines = 5
)

// ErrTooLarge is returned for a file of 2 GiB or more.
var ErrTooLarge = errors.New("syntax: file too large")

// ErrParseBudget is the Analysis.Fallback cause when tree-sitter gave up
// on a file whose parse exceeded its work budget (pathological input).
var ErrParseBudget = errors.New("syntax: parse exceeded its work budget")

func (o Options) normalized() Options {
	if o.MaxChunkLines <= 0 {
		o.MaxChunkLines = DefaultMaxChunkLines
	}
	if o.MinChunkLines <= 0 {
		o.MinChunkLines = DefaultMinChunkLines
	}
	if o.MinChunkLines > o.MaxChunkLines {
		o.MinChunkLines = o.MaxChunkLines
	}
	return o
}

// Analyze parses src as lang and returns its symbols, references and
// chunks. For a language Supported does not report it returns chunks only,
// cut at blank-line-separated paragraphs. Source that does not parse
// yields what can be recovered: tree-sitter recovers from errors; for Go,
// the declarations that end before go/parser's first error are kept, and
// the rest is chunked by blank lines and scanned for references. Input on
// which tree-sitter's error recovery blows up is cut off by a work budget
// proportional to its size and indexed as text (Analysis.Fallback).
// Analyze never panics on arbitrary bytes. It returns ErrTooLarge for src
// of 2 GiB or more, and an error naming the language when a tree-sitter
// grammar or query cannot be loaded (a build problem). It is safe for
// concurrent use.
func Analyze(lang Lang, src []byte, opts Options) (*Analysis, error) {
	if len(src) >= math.MaxInt32 {
		return nil, ErrTooLarge
	}
	opts = opts.normalized()
	lines := newLineIndex(src)
	a := &Analysis{Lang: lang}
	switch {
	case lang == LangGo:
		analyzeGo(a, src, lines)
	case Supported(lang):
		switch err := analyzeTreeSitter(a, lang, src, lines); {
		case errors.Is(err, ErrParseBudget):
			a.Symbols, a.Refs, a.Fallback = nil, nil, err
		case err != nil:
			return nil, fmt.Errorf("syntax: analyze %s: %w", lang, err)
		}
	}
	a.Chunks = chunkFile(lines, src, a.Symbols, lang, opts)
	return a, nil
}

// sortSymbols orders symbols by Line, then by the name's position,
// keeping the order of equal ones.
func sortSymbols(syms []Symbol) {
	slices.SortStableFunc(syms, func(a, b Symbol) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.NameLine, b.NameLine); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
}
