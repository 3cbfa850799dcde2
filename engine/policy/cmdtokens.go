package policy

import "strings"

// A command line (or a command glob) is read into tokens, the unit command
// globs match, and parts, the simple commands Decide and Assess judge. The
// flattener (shellstmts.go, shellwords.go, shellredirs.go) derives both
// from the tree mvdan.cc/sh/v3/syntax parses.

// tokKind is what a token is.
type tokKind uint8

const (
	tkWord  tokKind = iota // literal text of a word (or of a piece of one)
	tkSep                  // the boundary between two words
	tkOp                   // an operator; token.class says which
	tkStar                 // glob: an unquoted *
	tkQuest                // glob: an unquoted ?
	tkSub                  // a part's tokens only: one substitution, whose commands are parts of their own
)

// opClass classifies operators.
type opClass uint8

const (
	opNone        opClass = iota
	opControl             // ; & && || | |& ( )
	opSubOpen             // $( <( >( $((
	opSubClose            // ) or )) that closes a substitution
	opRedirOut            // > >> >| &> &>> <> >&word: writes a file
	opRedirIn             // < <<< <&word: reads a file or a string
	opRedirDup            // N>&M, N<&M, >&-: duplicates or closes a descriptor
	opHeredoc             // << <<-, the delimiter as written in aux
	opHeredocBody         // the body of a here-document (text), its delimiter in aux
	opKeyword             // a reserved word (if then … fi, for NAME, { }, !, time, NAME()), the | ) ;; ;& ;;& of case items
	opRaw                 // arithmetic, as printed by the parser's printer
)

// token is one lexical unit. Adjacent tokens with no tkSep or control
// operator between them belong to the same word.
type token struct {
	kind  tokKind
	class opClass
	text  string
	aux   string // opHeredoc, opHeredocBody: the delimiter; tkSub: the closing text
	// benign marks an output redirection to /dev/null and the like,
	// which a command glob's * may cross.
	benign bool
}

// endsWord reports whether a tkSep may follow the last of toks: it ends a
// word.
func endsWord(toks []token) bool {
	if len(toks) == 0 {
		return false
	}
	switch t := toks[len(toks)-1]; t.kind {
	case tkWord, tkStar, tkQuest, tkSub:
		return true
	case tkOp:
		return t.class == opSubClose
	}
	return false
}

// quietTarget reports whether writing to name discards or shows the
// output rather than changing a file.
func quietTarget(name string) bool {
	switch name {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(name, "/dev/fd/")
}

// subMark stands for a substitution inside a word of a part.
const subMark = '\uE000'

// part is one simple command of a command line: the commands joined by
// ; && || | & and newlines, those inside compound commands, and those
// inside substitutions are separate parts.
type part struct {
	// toks are the part's own tokens; each substitution in it is one
	// tkSub token, its commands are parts of their own.
	toks []token
	// parent is the index of the part whose substitution holds this one,
	// -1 at the top level.
	parent int
	// pipe identifies the pipeline the part belongs to.
	pipe int
	// arith: the part is arithmetic ($((…)) or ((…))), not a
	// command.
	arith bool

	words  []string // arguments, quotes removed, substitutions as subMark
	redirs []redirect
}

// redirect is one redirection of a part.
type redirect struct {
	op     string
	class  opClass
	target string // the file, the here-string, or the here-document body
}
