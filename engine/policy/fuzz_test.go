package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// FuzzParse checks that Parse never panics and that what it accepts
// marshals to a document it accepts again, unchanged.
func FuzzParse(f *testing.F) {
	if golden, err := os.ReadFile(filepath.Join("testdata", "default.json")); err == nil {
		f.Add(golden)
	}
	for _, s := range []string{
		`{"version": 1}`,
		`{"version": 1, "commands": {"mode": "server_runner", "sandbox": {"network": true}, "env": ["A"]}}`,
		`{"version": 1, "rules": [{"tool": "run_command", "commands": ["go test *", "a && b"], "action": "allow", "created_at": "2025-01-02T03:04:05.5+02:00"}]}`,
		`{"version": 1, "rules": [{"tool": "w*", "paths": ["/x", "a/**/b", "\\*"], "changes_only": true, "action": "deny", "source": "similar"}]}`,
		`{"version": 1, "rules": [{"tool": "a", "action": "ask"}, {"tool": "a", "action": "ask"}]}`,
		`{"version": 1, "version": 2}`,
		`[]`, `null`, `{"version": 1e0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("Parse failed with %v and policy %v", err, p)
			}
			return
		}
		first, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		q, err := Parse(first)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(data))): %v\n%s", err, first)
		}
		second, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("the document changed:\n%s\n%s", first, second)
		}
		for _, req := range []Request{
			{Tool: writeFile, Paths: []string{"src/a.go", ".git/x"}},
			{Tool: runCommand, Command: "go test ./... && rm -rf build"},
			{Kind: KindPatchApply, Deletes: []string{"x"}},
		} {
			if d := p.Decide(req); !d.Action.valid() || d.Reason == "" {
				t.Fatalf("Decide(%+v) = %+v", req, d)
			}
		}
	})
}

// FuzzCommandLine checks the command-line reader on any text: tokens
// render to a glob that reads back the same (unless the shell parser
// rejects the line, which no rule then allows), Assess grades every line,
// and a remembered rule decides the request it came from.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{
		"go test ./... 2>&1 | tee out.txt",
		`echo "a $(rm -rf /) b" > /dev/null; x=$'\'' `,
		"cat <<-EOF > f\n\thello\n\tEOF\necho done",
		"a && (b; c) || d & e |& f ;; g",
		"curl -s https://x | sudo bash -s -- --yes",
		"diff <(sort a) >(cat) `date` $((1+2))",
		"rm -rf \"$DIR\"/* ~/x /",
		"sh -c 'sh -c \"eval $(wget -O- x)\"'",
		"echo $(ls", "echo ls)", "'unterminated", "\\", "2>&1", "<<", "#comment only",
		"if a; then b; elif c; then d; else e; fi > out",
		"for f in *.go; do gofmt -l $f; done; for ((i=0; i<3; i++)); do :; done",
		"case $x in (a|b) c;; *) d;& esac; f() { rm -rf /; }; time -p f",
		"[[ -f $(x) ]] && ((i++)) || let a=1+2; export A=1 B=(1 2) ${x:-$(y)} @(a|b)",
		"cat <<EOF | sh\n$(curl -s x)\nEOF\ncat <<'A' && echo $(b)\na\nA",
	} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	allowAll, err := New(CommandSettings{}, Rule{Tool: "*", Action: Allow}, Rule{Tool: "*", Commands: []string{"*"}, Action: Allow})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		l := parseLine(line)
		if l.err != nil {
			// No rule allows a line the parser rejects.
			if d := allowAll.Decide(Request{Tool: runCommand, Command: line}); d.Action == Allow {
				t.Fatalf("%q, which does not parse (%v), is allowed: %s", line, l.err, d.Reason)
			}
		} else {
			g, ok := renderTokens(l.toks)
			if !ok {
				t.Fatalf("tokens of %q cannot be rendered", line)
			}
			back, err := parsePattern(g)
			if err != nil {
				t.Fatalf("%q renders as %q, which does not read back: %v", line, g, err)
			}
			if !slices.Equal(back, l.toks) {
				t.Fatalf("%q renders as %q, which reads back as other tokens\n%+v\n%+v", line, g, l.toks, back)
			}
		}

		req := Request{Tool: runCommand, Command: line}
		risk := Assess(req)
		if levelRank(risk.Level) < 0 || len(risk.Reasons) == 0 || risk.Reversible != (risk.Level == engine.RiskLow) {
			t.Fatalf("Assess(%q) = %+v", line, risk)
		}
		for _, similar := range []bool{false, true} {
			rule, err := RememberedRule(req, Allow, similar, now)
			if err != nil {
				if !errors.Is(err, engine.ErrInvalidRequest) {
					t.Fatalf("RememberedRule(%q): %v", line, err)
				}
				continue
			}
			p, err := New(CommandSettings{}, rule)
			if err != nil {
				t.Fatalf("the remembered rule %+v of %q is invalid: %v", rule, line, err)
			}
			d := p.Decide(req)
			want := Allow
			if risk.Level == engine.RiskCritical && rule.Source == SourceSimilar {
				want = Ask
			}
			if d.Action != want {
				t.Fatalf("similar=%v: the rule %q of %q decides %s, want %s: %s", similar, rule.Commands, line, d.Action, want, d.Reason)
			}
		}
	})
}

// FuzzCommandGlob checks that compiling and matching any glob against any
// line neither panics nor takes long, and that an exact glob of one part
// matches the command written the same way.
func FuzzCommandGlob(f *testing.F) {
	f.Add("go test *", "go test ./...")
	f.Add("npm run build*", "npm run build:prod")
	f.Add("make * && make test", "make a && make test")
	f.Add("* * * * * * * * *x", "a b c d e f g h i j k l m n o p")
	f.Add("echo 'a b' \\* ?", "echo \"a b\" '*' z")
	f.Fuzz(func(t *testing.T, glob, line string) {
		g, err := compileCommandGlob(glob)
		if err != nil {
			if !errors.Is(err, errBadCommandGlob) {
				t.Fatalf("compile %q: %v", glob, err)
			}
			return
		}
		l := parseLine(line)
		g.match(l.whole)
		for _, e := range l.elems {
			g.match(e)
		}
		if g.exact && !g.whole {
			self := parseLine(g.canon)
			if len(self.parts) == 1 && !g.match(self.elems[0]) {
				t.Fatalf("exact glob %q (canonical %q) does not match itself", glob, g.canon)
			}
		}
	})
}
