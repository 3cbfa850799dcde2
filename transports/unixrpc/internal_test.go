package unixrpc

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestSuggestCommand(t *testing.T) {
	ok, fail, notFound := 0, 1, 127
	cmd := func(c string, exit int) recentCommand { e := exit; return recentCommand{Command: c, ExitCode: &e} }
	tests := []struct {
		name   string
		cmds   []recentCommand
		output string
		want   string // "" for none
		source string
	}{
		{"cargo hint", []recentCommand{cmd("cargo tset", fail)}, "error: no such command: `tset`\n\n\tDid you mean `test`?\n", "cargo test", sourceOutput},
		{"git hint", []recentCommand{cmd("git sttaus -s", fail)}, "git: 'sttaus' is not a git command. See 'git --help'.\n\nThe most similar command is\n\tstatus\n", "git status -s", sourceOutput},
		{"history", []recentCommand{cmd("cargo test -- --nocapture", ok), cmd("cargo build", ok), cmd("cargo test", fail)}, "panicked", "cargo test -- --nocapture", sourceHistory},
		{"history needs success", []recentCommand{cmd("cargo test -- --nocapture", fail), cmd("cargo test", fail)}, "", "cargo test -- --nocapture", sourceRules},
		{"typo from history", []recentCommand{cmd("kubectl get pods", ok), cmd("kubeclt get pods", notFound)}, "bash: kubeclt: command not found", "kubectl get pods", sourceTypo},
		{"typo of a common tool", []recentCommand{cmd("gti status", notFound)}, "gti: command not found", "git status", sourceTypo},
		{"go test", []recentCommand{cmd("go test ./parser", fail)}, "FAIL", "go test -v ./parser", sourceRules},
		{"pytest", []recentCommand{cmd("pytest tests", fail)}, "", "pytest tests -vv -s", sourceRules},
		{"npm test", []recentCommand{cmd("npm test", fail)}, "", "npm test -- --verbose", sourceRules},
		{"success suggests nothing", []recentCommand{cmd("cargo test", ok)}, "", "", ""},
		{"unknown exit", []recentCommand{{Command: "cargo test"}}, "", "", ""},
		{"nothing known", []recentCommand{cmd("frobnicate", fail)}, "it broke", "", ""},
		{"no commands", nil, "x", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := suggestCommand(tt.cmds, tt.output)
			if tt.want == "" {
				if ok {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if !ok || got.Suggestion != tt.want || got.Source != tt.source || got.Confidence <= 0 || got.Confidence > 1 || got.Context == "" {
				t.Fatalf("got %+v (%v), want %q from %s", got, ok, tt.want, tt.source)
			}
		})
	}
}

func TestFenceScanner(t *testing.T) {
	var f fenceScanner
	text := "Intro\n```go\nfunc A() {}\n```\nmid ~~~ not a fence\n~~~~diff\n-a\n+b\n~~~~\n```sh\necho unterminated"
	var got []fenced
	// Fed in awkward pieces, as tokens come.
	for i := 0; i < len(text); i += 3 {
		got = append(got, f.feed(text[i:min(i+3, len(text))])...)
	}
	got = append(got, f.flush()...)
	want := []fenced{
		{lang: "go", content: "func A() {}\n"},
		{lang: "diff", content: "-a\n+b\n"},
		{lang: "sh", content: "echo unterminated\n", unterminated: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestNegotiate(t *testing.T) {
	for _, tt := range []struct{ in, want string }{{"1.0.0", "1.0.0"}, {"1.2.3", "1.0.0"}, {"1", "1.0.0"}, {"1.0", "1.0.0"}, {"2.0.0", ""}, {"1.x", ""}, {"-1.0.0", ""}, {"1.0.0.0", ""}, {"", ""}} {
		got, err := negotiate(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("negotiate(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestLineLimiter(t *testing.T) {
	read := func(input string, max int) ([]string, error) {
		r := bufio.NewReader(&lineLimiter{r: iotest.OneByteReader(strings.NewReader(input)), max: max})
		var lines []string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return lines, err
			}
			lines = append(lines, l)
		}
	}
	lines, err := read("abc\nabcde\nx\n", 5)
	if err != io.EOF || len(lines) != 3 {
		t.Errorf("lines at the limit: %q %v", lines, err)
	}
	lines, err = read("abc\nabcdef\nx\n", 5)
	if !errors.Is(err, errTooLarge) || len(lines) != 1 {
		t.Errorf("a line over the limit: %q %v", lines, err)
	}
	// Big reads too.
	r := bufio.NewReader(&lineLimiter{r: strings.NewReader("ok\n" + strings.Repeat("z", 100) + "\n"), max: 50})
	if l, _ := r.ReadString('\n'); l != "ok\n" {
		t.Errorf("first line %q", l)
	}
	if _, err := r.ReadString('\n'); !errors.Is(err, errTooLarge) {
		t.Errorf("second line: %v", err)
	}
}

func TestBucket(t *testing.T) {
	b := bucket{rate: 100, burst: 100}
	now := time.Now()
	for i := 0; i < 100; i++ {
		if ok, _ := b.take(now); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	ok, retry := b.take(now)
	if ok || retry <= 0 || retry > 10*time.Millisecond {
		t.Fatalf("101st: %v %v", ok, retry)
	}
	if ok, _ := b.take(now.Add(20 * time.Millisecond)); !ok {
		t.Fatal("no refill")
	}
}
