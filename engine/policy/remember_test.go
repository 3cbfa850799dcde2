package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestRememberedRule(t *testing.T) {
	now := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		req      Request
		action   Action
		similar  bool
		tool     string
		paths    []string
		commands []string
		source   Source
	}{
		{
			name: "exact command", req: Request{Tool: runCommand, Command: "go test ./..."}, action: Allow,
			tool: "run_command", commands: []string{"go test ./..."}, source: SourceRemembered,
		},
		{
			name: "exact command keeps wildcards literal", req: Request{Tool: runCommand, Command: "rm *.o"}, action: Allow,
			tool: "run_command", commands: []string{"rm '*.o'"}, source: SourceRemembered,
		},
		{
			name: "exact command is normalised", req: Request{Tool: runCommand, Command: `  git commit -m "fix it"  `}, action: Allow,
			tool: "run_command", commands: []string{"git commit -m 'fix it'"}, source: SourceRemembered,
		},
		{
			name: "exact chain is one whole-line glob", req: Request{Tool: runCommand, Command: "make build&&make test"}, action: Allow,
			tool: "run_command", commands: []string{"make build && make test"}, source: SourceRemembered,
		},
		{
			name: "similar: program and subcommand", req: Request{Tool: runCommand, Command: "go test -run X ./engine/..."}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"go test *"}, source: SourceSimilar,
		},
		{
			name: "similar: runner keeps the script name", req: Request{Tool: runCommand, Command: "npm run build"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"npm run build*"}, source: SourceSimilar,
		},
		{
			name: "similar: flags before the first operand stay", req: Request{Tool: runCommand, Command: "git -C sub status"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"git -C sub *"}, source: SourceSimilar,
		},
		{
			name: "similar: no operand", req: Request{Tool: runCommand, Command: "ls -la"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"ls *"}, source: SourceSimilar,
		},
		{
			name: "similar: assignments stay", req: Request{Tool: runCommand, Command: "CGO_ENABLED=0 go build -o bin/x ."}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"CGO_ENABLED=0 go build *"}, source: SourceSimilar,
		},
		{
			name: "similar: each part of a chain", req: Request{Tool: runCommand, Command: "go vet ./... && go test ./... | tee log"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"go vet *", "go test *", "tee log *"}, source: SourceSimilar,
		},
		{
			name: "similar: substitutions stay exact", req: Request{Tool: runCommand, Command: "go test $(go list ./...)"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"go test $(go list ./...)"}, source: SourceRemembered,
		},
		{
			name: "similar: a redirection the glob would not cross stays exact", req: Request{Tool: runCommand, Command: "go test ./... > out.txt"}, action: Allow, similar: true,
			tool: "run_command", commands: []string{"go test ./... > out.txt"}, source: SourceRemembered,
		},
		{
			name: "deny is never generalised", req: Request{Tool: runCommand, Command: "git push origin main"}, action: Deny, similar: true,
			tool: "run_command", commands: []string{"git push origin main"}, source: SourceRemembered,
		},
		{
			name: "exact paths", req: Request{Tool: writeFile, Paths: []string{"src/a[1].go", "README.md"}}, action: Allow,
			tool: "write_file", paths: []string{`src/a\[1].go`, "/README.md"}, source: SourceRemembered,
		},
		{
			name: "similar paths: directories", req: Request{Tool: writeFile, Paths: []string{"src/auth/login.ts", "src/auth/oauth/x.ts", "docs/a.md"}}, action: Allow, similar: true,
			tool: "write_file", paths: []string{"docs/**", "src/auth/**"}, source: SourceSimilar,
		},
		{
			name: "similar paths: a root file stays exact", req: Request{Tool: writeFile, Paths: []string{"go.mod"}}, action: Allow, similar: true,
			tool: "write_file", paths: []string{"/go.mod"}, source: SourceRemembered,
		},
		{
			name: "similar paths: deny stays exact", req: Request{Tool: writeFile, Paths: []string{"src/auth/login.ts"}}, action: Deny, similar: true,
			tool: "write_file", paths: []string{"src/auth/login.ts"}, source: SourceRemembered,
		},
		{
			name: "deleted paths", req: Request{Kind: KindPatchApply, Paths: []string{"a/x.go"}, Deletes: []string{"a/y.go"}}, action: Allow,
			tool: "patch_apply", paths: []string{"a/x.go", "a/y.go"}, source: SourceRemembered,
		},
		{
			name: "a command wins over paths", req: Request{Tool: runCommand, Command: "make", Paths: []string{"sub"}}, action: Allow,
			tool: "run_command", commands: []string{"make"}, source: SourceRemembered,
		},
		{
			name: "tool alone", req: Request{Tool: engine.ToolSpec{Name: "web_*search", NeedsApproval: true}}, action: Allow, similar: true,
			tool: `web_\*search`, source: SourceRemembered,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RememberedRule(tt.req, tt.action, tt.similar, now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Tool != tt.tool || !slices.Equal(got.Paths, tt.paths) || !slices.Equal(got.Commands, tt.commands) || got.Source != tt.source {
				t.Fatalf("got tool %q paths %q commands %q source %s\nwant tool %q paths %q commands %q source %s",
					got.Tool, got.Paths, got.Commands, got.Source, tt.tool, tt.paths, tt.commands, tt.source)
			}
			if got.Action != tt.action || !got.Created.Equal(now) || got.Reason == "" || got.ChangesOnly {
				t.Errorf("action %s created %v reason %q changes_only %v", got.Action, got.Created, got.Reason, got.ChangesOnly)
			}
			// The rule decides the request it was made from.
			p := mustNew(t, got)
			if d := p.Decide(tt.req); d.RuleIndex != 0 && d.Risk.Level != engine.RiskCritical {
				t.Errorf("the rule does not decide its own request: %s", d.Reason)
			}
		})
	}
}

// TestRememberedRuleScope checks what remembered and similar rules cover
// beyond the request they came from.
func TestRememberedRuleScope(t *testing.T) {
	tests := []struct {
		name    string
		from    Request
		similar bool
		other   Request
		want    Action
	}{
		{"exact command: the same", Request{Tool: runCommand, Command: "go test ./..."}, false, Request{Tool: runCommand, Command: "go test ./..."}, Allow},
		{"exact command: another", Request{Tool: runCommand, Command: "go test ./..."}, false, Request{Tool: runCommand, Command: "go test -v ./..."}, Ask},
		{"similar command: a sibling", Request{Tool: runCommand, Command: "go test ./..."}, true, Request{Tool: runCommand, Command: "go test -v ./pkg"}, Allow},
		{"similar command: another program", Request{Tool: runCommand, Command: "go test ./..."}, true, Request{Tool: runCommand, Command: "gofmt -l ."}, Ask},
		{"similar runner: a variant", Request{Tool: runCommand, Command: "npm run build"}, true, Request{Tool: runCommand, Command: "npm run build:prod"}, Allow},
		{"similar runner: another script", Request{Tool: runCommand, Command: "npm run build"}, true, Request{Tool: runCommand, Command: "npm run deploy"}, Ask},
		{"exact path: the same", Request{Tool: writeFile, Paths: []string{"README.md"}}, false, Request{Tool: writeFile, Paths: []string{"README.md"}}, Allow},
		{"exact root path: not elsewhere", Request{Tool: writeFile, Paths: []string{"README.md"}}, false, Request{Tool: writeFile, Paths: []string{"docs/README.md"}}, Ask},
		{"similar path: a sibling", Request{Tool: writeFile, Paths: []string{"src/auth/login.ts"}}, true, Request{Tool: writeFile, Paths: []string{"src/auth/token.ts"}}, Allow},
		{"similar path: a cousin", Request{Tool: writeFile, Paths: []string{"src/auth/login.ts"}}, true, Request{Tool: writeFile, Paths: []string{"src/db/conn.ts"}}, Ask},
		{"similar path: another tool", Request{Tool: writeFile, Paths: []string{"src/auth/login.ts"}}, true, Request{Tool: engine.ToolSpec{Name: "delete_file", NeedsApproval: true}, Paths: []string{"src/auth/token.ts"}}, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Policy
			if _, err := p.Remember(tt.from, Allow, tt.similar); err != nil {
				t.Fatal(err)
			}
			if got := p.Decide(tt.other); got.Action != tt.want {
				t.Errorf("Decide = %s, want %s: %s", got.Action, tt.want, got.Reason)
			}
		})
	}
}

// TestRememberReplacesDuplicate checks that remembering the same choice
// again replaces the rule rather than adding one.
func TestRememberReplacesDuplicate(t *testing.T) {
	p := Default()
	req := Request{Tool: runCommand, Command: "make deploy"}
	first, err := p.Remember(req, Allow, false)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.Rules())
	if _, err := p.Remember(Request{Tool: runCommand, Command: "make   deploy"}, Deny, false); err != nil {
		t.Fatal(err)
	}
	rules := p.Rules()
	if len(rules) != n {
		t.Fatalf("%d rules after remembering the same command again, want %d", len(rules), n)
	}
	if got := rules[n-1]; got.Action != Deny || !slices.Equal(got.Commands, first.Commands) {
		t.Errorf("rule %+v, want the command denied", got)
	}
	if d := p.Decide(req); d.Action != Deny {
		t.Errorf("Decide = %s, want deny", d.Action)
	}
	// A different rule is added.
	if _, err := p.Remember(req, Allow, true); err != nil {
		t.Fatal(err)
	}
	if got := len(p.Rules()); got != n+1 {
		t.Errorf("%d rules after a similar rule, want %d", got, n+1)
	}
	// Add replaces a duplicate in place too, whatever the action.
	if err := p.Add(Rule{Tool: "*", Paths: []string{"**/.git/**"}, ChangesOnly: true, Action: Ask}); err != nil {
		t.Fatal(err)
	}
	if got := p.Rules()[0]; got.Action != Ask || got.Source != SourceUser {
		t.Errorf("rules[0] = %+v, want the user's ask", got)
	}
}

func TestRememberErrors(t *testing.T) {
	tests := []struct {
		name   string
		req    Request
		action Action
	}{
		{"bad action", Request{Tool: runCommand, Command: "ls"}, "always"},
		{"path outside", Request{Tool: writeFile, Paths: []string{"/etc/passwd"}}, Allow},
		{"unknown kind", Request{Kind: "x"}, Allow},
		{"unbalanced command", Request{Tool: runCommand, Command: "echo $(ls"}, Allow},
		{"command longer than a glob may be", Request{Tool: runCommand, Command: "echo " + strings.Repeat("x ", maxGlobBytes)}, Allow},
		{"too many paths", Request{Tool: writeFile, Paths: manyPaths(maxPatterns + 1)}, Allow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Policy
			_, err := p.Remember(tt.req, tt.action, false)
			if !errors.Is(err, engine.ErrInvalidRequest) {
				t.Fatalf("err = %v, want one matching engine.ErrInvalidRequest", err)
			}
			if len(p.Rules()) != 0 {
				t.Error("a rule was added")
			}
		})
	}
}

func manyPaths(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("d%d/f.go", i)
	}
	return out
}

// TestRememberSimilarWithinLimits checks that "similar" of more paths
// than a rule may hold still works when their directories are few.
func TestRememberSimilarWithinLimits(t *testing.T) {
	paths := make([]string, maxPatterns+10)
	for i := range paths {
		paths[i] = fmt.Sprintf("src/f%d.go", i)
	}
	r, err := RememberedRule(Request{Tool: writeFile, Paths: paths}, Allow, true, time.Now())
	if err != nil || !slices.Equal(r.Paths, []string{"src/**"}) {
		t.Errorf("rule %q, err %v; want src/**", r.Paths, err)
	}
}
