package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// matchLine reports whether glob matches the command line: the whole line
// for a glob with operators, every part otherwise.
func matchLine(t *testing.T, glob, line string) bool {
	t.Helper()
	g, err := compileCommandGlob(glob)
	if err != nil {
		t.Fatalf("compile %q: %v", glob, err)
	}
	l := parseLine(line)
	if g.whole {
		return g.match(l.whole)
	}
	if len(l.parts) == 0 {
		return false
	}
	for _, e := range l.elems {
		if !g.match(e) {
			return false
		}
	}
	return true
}

func TestCommandGlobMatch(t *testing.T) {
	tests := []struct {
		glob, line string
		want       bool
	}{
		{"go test ./...", "go test ./...", true},
		{"go test ./...", "  go   test\t./...  ", true},
		{"go test ./...", "go test ./... -v", false},
		{"go test *", "go test", true},
		{"go test *", "go test -v -run 'A B' ./...", true},
		{"go test *", "go testing", false},
		{"go test *", "go vet ./...", false},
		{"go test*", "go testing", true},
		{"go * ./...", "go vet ./...", true},
		{"go * ./...", "go ./...", true},
		{"go *./...", "go ./...", true},
		{"*", "anything at all", true},
		{"ls ?", "ls a", true},
		{"ls ?", "ls ab", false},
		{"ls ?", "ls ''", false},
		{"echo 'a b'", `echo "a b"`, true},
		{"echo 'a b'", "echo a b", false},
		{`echo a\ b`, "echo 'a b'", true},
		{"rm '*.o'", "rm *.o", true},
		{"rm '*.o'", "rm main.o", false},
		{`rm \*.o`, "rm *.o", true},
		{"rm *.o", "rm main.o", true},
		{"echo $HOME", "echo $HOME", true},
		{"echo $HOME", "echo /home/me", false},
		{"npm run build*", "npm run build", true},
		{"npm run build*", "npm run build:prod -- --watch", true},
		{"npm run build*", "npm run deploy", false},
		// Operators.
		{"go test *", "go test ./... && rm -rf /", false},
		{"go test *", "go test ./... ; rm -rf /", false},
		{"go test *", "go test ./... | sh", false},
		{"go test *", "go test ./... &", true}, // & only ends the part
		{"go test *", "go test 2>&1", true},
		{"go test *", "go test$(x)", false},
		{"go test *", "go test ./... > out.txt", false},
		{"go test *", "go test ./... >> out.txt", false},
		{"go test *", "go test ./... &> out.txt", false},
		{"go test *", "go test ./... 2>&1", true},
		{"go test *", "go test ./... 2>/dev/null", true},
		{"go test *", "go test ./... < input.txt", true},
		{"go test * > out.txt", "go test ./... >out.txt", true},
		{"go test * > out.txt", "go test ./... > other.txt", false},
		{"echo *", "echo $(echo hi)", true},
		{"echo *", "echo $(rm -rf /)", false}, // see TestCommandGlobSubstitution
		{"cat *", "cat <<EOF\nhello\nEOF", true},
		// Whole-line globs.
		{"make build && make test", "make build&&make test", true},
		{"make build && make test", "make build; make test", false},
		{"make * && make test", "make build && make test", true},
		{"make * && make test", "make build && rm -rf / && make test", false},
		{"go test $(go list ./...)", "go test $(go list  ./...)", true},
		{"go test $(go list *)", "go test $(go list ./... ; rm -rf /)", false},
		// Quotes and escapes in the line.
		{"git commit -m *", `git commit -m "fix: a \"quoted\" word"`, true},
		{`printf %s\\n x`, `printf '%s\n' x`, true},
		{`printf %s\n x`, `printf '%s\n' x`, false},
	}
	for _, tt := range tests {
		t.Run(tt.glob+" ~ "+tt.line, func(t *testing.T) {
			if got := matchLine(t, tt.glob, tt.line); got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCommandGlobSubstitution checks that a * matches a substitution in
// its part, whose commands are parts of their own.
func TestCommandGlobSubstitution(t *testing.T) {
	g, err := compileCommandGlob("echo *")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"echo $(rm -rf /)", "echo `rm -rf /`", `echo "x $(rm -rf /)"`} {
		l := parseLine(line)
		if len(l.parts) != 2 || !g.match(l.elems[0]) || g.match(l.elems[1]) {
			t.Errorf("%q: %d parts; want the outer one matched and the inner one not", line, len(l.parts))
		}
	}
}

func TestCommandGlobErrors(t *testing.T) {
	tests := []struct{ glob, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"echo 'abc", "unterminated single quote"},
		{`echo "abc`, "unterminated double quote"},
		{"echo $(ls", "unclosed"},
		{"echo ls)", "unbalanced )"},
		{"echo \x00", "NUL"},
		{strings.Repeat("a", maxGlobBytes+1), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.glob, func(t *testing.T) {
			_, err := compileCommandGlob(tt.glob)
			if !errors.Is(err, errBadCommandGlob) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want an invalid command glob error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestLexParts checks how command lines split into parts, words and
// redirections.
func TestLexParts(t *testing.T) {
	tests := []struct {
		line   string
		parts  [][]string // words of each part
		parent []int
	}{
		{"ls -la", [][]string{{"ls", "-la"}}, []int{-1}},
		{"a && b || c; d & e | f |& g", [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}}, []int{-1, -1, -1, -1, -1, -1, -1}},
		{"a\nb", [][]string{{"a"}, {"b"}}, []int{-1, -1}},
		{`echo "x $(id -u) y"`, [][]string{{"echo", "x \uE000 y"}, {"id", "-u"}}, []int{-1, 0}},
		{"echo `date`", [][]string{{"echo", "\uE000"}, {"date"}}, []int{-1, 0}},
		{"diff <(sort a) <(sort b)", [][]string{{"diff", "\uE000", "\uE000"}, {"sort", "a"}, {"sort", "b"}}, []int{-1, 0, 0}},
		{"(cd sub && make)", [][]string{{"cd", "sub"}, {"make"}}, []int{-1, -1}},
		{"echo $((1+2))", [][]string{{"echo", "\uE000"}, {"1+2"}}, []int{-1, 0}},
		{`echo a\ b 'c d' "e\"f" $'g\'h'`, [][]string{{"echo", "a b", "c d", `e"f`, "g'h"}}, []int{-1}},
		{"ls # a comment; rm -rf /", [][]string{{"ls"}}, []int{-1}},
		{"echo a#b", [][]string{{"echo", "a#b"}}, []int{-1}},
		{"ls \\\n  -la", [][]string{{"ls", "-la"}}, []int{-1}},
		{"cat <<EOF | sh\nrm -rf /\nEOF\necho done", [][]string{{"cat"}, {"sh"}, {"echo", "done"}}, []int{-1, -1, -1}},
		{"echo '' \"\"", [][]string{{"echo", "", ""}}, []int{-1}},
		// Compound commands: their commands are parts, the words they
		// expand are not.
		{"if a; then b; elif c; then d; else e; fi", [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}}, []int{-1, -1, -1, -1, -1}},
		{"for f in $(ls); do rm $f; done", [][]string{{"ls"}, {"rm", "$f"}}, []int{-1, -1}},
		{"case $x in a|b) c;; *) d;; esac", [][]string{{"c"}, {"d"}}, []int{-1, -1}},
		{"f() { rm -rf /; }; time f", [][]string{{"rm", "-rf", "/"}, {"f"}}, []int{-1, -1}},
		{"{ a; b; } > out", [][]string{{"a"}, {"b"}, nil}, []int{-1, -1, -1}},
		{"[[ -f $(x) ]] && export A=1 B='c d'", [][]string{{"[[", "-f", "\uE000", "]]"}, {"x"}, {"export", "A=1", "B=c d"}}, []int{-1, 0, -1}},
		{"echo ${x:-$(id)} $HOME", [][]string{{"echo", "${x:-\uE000}", "$HOME"}, {"id"}}, []int{-1, 0}},
		// Substitutions in an expanded here-document body.
		{"cat <<EOF\n$(rm -rf /)\nEOF", [][]string{{"cat"}, {"rm", "-rf", "/"}}, []int{-1, 0}},
		{"cat <<'EOF'\n$(rm -rf /)\nEOF", [][]string{{"cat"}}, []int{-1}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			parts := parseLine(tt.line).parts
			var words [][]string
			var parents []int
			for _, p := range parts {
				words = append(words, p.words)
				parents = append(parents, p.parent)
			}
			if !slices.EqualFunc(words, tt.parts, slices.Equal) || !slices.Equal(parents, tt.parent) {
				t.Errorf("parts %q parents %v, want %q %v", words, parents, tt.parts, tt.parent)
			}
		})
	}
}

func TestLexRedirections(t *testing.T) {
	parts := parseLine("cmd <in 2>>err.log 3>&1 >&- >/dev/null <<<'here' <<-EOF\n\tbody\n\tEOF").parts
	if len(parts) != 1 {
		t.Fatalf("%d parts", len(parts))
	}
	type r struct {
		op     string
		class  opClass
		target string
	}
	var got []r
	for _, x := range parts[0].redirs {
		got = append(got, r{x.op, x.class, x.target})
	}
	want := []r{
		{"<", opRedirIn, "in"}, {"2>>", opRedirOut, "err.log"}, {"3>&1", opRedirDup, ""}, {">&-", opRedirDup, ""},
		{">", opRedirOut, "/dev/null"}, {"<<<", opRedirIn, "here"}, {"<<-", opHeredoc, "\tbody\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("redirections\n%+v\nwant\n%+v", got, want)
	}
	if !slices.Equal(parts[0].words, []string{"cmd"}) {
		t.Errorf("words %q", parts[0].words)
	}
}

// TestRenderRoundTrip checks that rendered tokens read back the same.
func TestRenderRoundTrip(t *testing.T) {
	for _, line := range []string{
		"go test ./... 2>&1 | tee out.txt",
		`echo "a $(rm -rf /) b" > /dev/null`,
		"cat <<EOF > f\nhello\nEOF\necho done",
		`x=$'a\'b' echo ${HOME} '*' "?" \#`,
		"a && (b; c) || d &",
		"echo '' \"\" 2 >x 2>y",
		"diff <(sort a) >(cat) `date`",
		"#!/bin/sh\nset -e\nfor f in *.go; do gofmt -l $f; done",
		"if a; then b; elif c; then d; else e; fi > out",
		"while read x; do echo $x; done < in.txt; until false; do :; done",
		"for ((i=0; i<3; i++)); do echo $((i*2)); done; select x in a b; do :; done",
		"case $x in (a|b) c;; *) d;& e) f;;& esac",
		"f() { rm -rf /; }; function g { a; }; time -p f; ! g",
		"[[ -f x && $(y) == \"a b\" ]] && ((i++)) || let a=1+2 \"b = 3\"",
		"export A=1 B='x y' C; declare -a arr=(1 2 $(x)) b[1]=2; x= y= z",
		"echo ${x:-$(rm)} ${#y} ${a[@]} $1 @(a|b) {a,b} ~/x let if '{' '[['",
		"echo `echo \\`date\\``; exec 3>&1 4<&0 5>&- 6>&2- >&file &>>all",
		"x=$'a\\x01b\\u00e9' echo $'\\t' 'it'\\''s'",
		"cat <<A | ( cat <<B\nb\nB\n)\na\nA",
		"case x in a) cat <<EOF;; b) c;; esac\nbody\nEOF",
		"cat <<EOF && echo $(date)\n$(whoami) ${HOME}\nEOF\necho done",
		"cat <<\"E F\" &\nx\nE F\nif cat <<EOF\nx\nEOF\nthen y; fi",
		"a=$(cat <<-EOF\n\tx\n\tEOF\n)",
	} {
		toks := parseLine(line).toks
		g, ok := renderTokens(toks)
		back, err := parsePattern(g)
		if !ok || err != nil || !slices.Equal(back, toks) {
			t.Errorf("%q rendered as %q (ok %v) reads back differently (err %v)", line, g, ok, err)
		}
	}
}
