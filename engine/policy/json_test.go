package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

var update = flag.Bool("update", false, "rewrite the golden documents in testdata")

func TestDefaultDocument(t *testing.T) {
	got, err := json.MarshalIndent(Default(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "default.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Default() marshals to\n%s\nwant (testdata/default.json)\n%s", got, want)
	}
	p, err := Parse(want)
	if err != nil {
		t.Fatalf("Parse(testdata/default.json): %v", err)
	}
	if !slices.EqualFunc(p.Rules(), Default().Rules(), ruleEqual) {
		t.Error("the golden document parses to other rules than Default()")
	}
}

func ruleEqual(a, b Rule) bool {
	return a.Tool == b.Tool && slices.Equal(a.Paths, b.Paths) && slices.Equal(a.Commands, b.Commands) &&
		a.ChangesOnly == b.ChangesOnly && a.Action == b.Action && a.Reason == b.Reason && a.Source == b.Source &&
		a.Created.Equal(b.Created)
}

func TestJSONRoundTrip(t *testing.T) {
	berlin := time.FixedZone("CEST", 2*60*60)
	p, err := New(CommandSettings{Mode: ServerRunner, Sandbox: Sandbox{Network: true}, Env: []string{"GOFLAGS", "NODE_ENV"}},
		append(defaultRules(),
			Rule{Tool: "run_command", Commands: []string{"go test *", "npm run build*"}, Action: Allow, Created: time.Date(2025, 6, 1, 9, 30, 0, 123456789, time.UTC)},
			Rule{Tool: "write_file", Paths: []string{"docs/**", "/README.md"}, Action: Allow, Source: SourceSimilar, Reason: "docs", Created: time.Date(2025, 6, 2, 10, 0, 0, 0, berlin)},
			Rule{Tool: "mcp_*", Action: Deny, Reason: "no MCP tools here"},
		)...)
	if err != nil {
		t.Fatal(err)
	}
	first, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse(first)
	if err != nil {
		t.Fatalf("Parse(Marshal(p)): %v\n%s", err, first)
	}
	second, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("marshal, parse, marshal changed the document:\n%s\n%s", first, second)
	}
	if !slices.EqualFunc(p.Rules(), q.Rules(), ruleEqual) {
		t.Errorf("rules changed:\n%+v\n%+v", p.Rules(), q.Rules())
	}
	if got := q.Commands(); got.Mode != ServerRunner || !got.Sandbox.Network || !slices.Equal(got.Env, []string{"GOFLAGS", "NODE_ENV"}) {
		t.Errorf("commands = %+v", got)
	}
	// The parsed policy decides like the original.
	req := Request{Tool: runCommand, Command: "npm run build:prod"}
	if a, b := p.Decide(req), q.Decide(req); a.Action != b.Action || a.RuleIndex != b.RuleIndex || a.Action != Allow {
		t.Errorf("decisions differ: %s/%d and %s/%d", a.Action, a.RuleIndex, b.Action, b.RuleIndex)
	}
}

// TestParseMinimal checks defaults for left-out and null fields.
func TestParseMinimal(t *testing.T) {
	for _, doc := range []string{
		`{"version": 1}`,
		`{"version": 1, "commands": null, "rules": null}`,
		`{"version": 1.0, "commands": {"mode": null, "sandbox": null, "env": null}, "rules": []}`,
		` {"rules": [], "version": 1} `,
	} {
		p, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("Parse(%s): %v", doc, err)
			continue
		}
		if c := p.Commands(); c.Mode != LocalTerminal || c.Sandbox.Network || len(c.Env) != 0 || len(p.Rules()) != 0 {
			t.Errorf("Parse(%s) = %+v %+v", doc, c, p.Rules())
		}
	}
	p, err := Parse([]byte(`{"version":1,"rules":[{"tool":"x","action":"deny","reason":null,"source":null,"created_at":null,"paths":null,"changes_only":null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Rules()[0]; r.Source != SourceUser || !r.Created.IsZero() || r.Reason != "" {
		t.Errorf("rule %+v, want source user and no time", r)
	}
}

func TestParseErrors(t *testing.T) {
	rule := func(s string) string { return `{"version": 1, "rules": [{"tool": "a", "action": "allow"}, ` + s + `]}` }
	tests := []struct {
		name string
		doc  string
		want []string // each error, in order
	}{
		{"not JSON", `{"version": 1,}`, []string{"policy: invalid JSON"}},
		{"not an object", `[1]`, []string{"policy: must be an object, not an array"}},
		{"empty", ``, []string{"policy: invalid JSON"}},
		{"no version", `{}`, []string{"version: is required: 1"}},
		{"future version", `{"version": 2}`, []string{"version: unsupported version 2; this engine reads version 1"}},
		{"version not a number", `{"version": "1"}`, []string{"version: must be a whole number, not a string"}},
		{"version not whole", `{"version": 1.5}`, []string{"version: must be a whole number"}},
		{"unknown field", `{"version": 1, "rulez": []}`, []string{"rulez: unknown field"}},
		{"repeated field", `{"version": 1, "version": 1}`, []string{"version: appears twice"}},
		{"field names are case-sensitive", `{"Version": 1}`, []string{"Version: unknown field"}},
		{"bad mode", `{"version": 1, "commands": {"mode": "ssh"}}`, []string{`commands.mode: must be "local_terminal" or "server_runner", not "ssh"`}},
		{"unknown commands field", `{"version": 1, "commands": {"timeout": 3}}`, []string{"commands.timeout: unknown field"}},
		{"unknown sandbox field", `{"version": 1, "commands": {"sandbox": {"net": true}}}`, []string{"commands.sandbox.net: unknown field"}},
		{"network not a boolean", `{"version": 1, "commands": {"sandbox": {"network": "yes"}}}`, []string{"commands.sandbox.network: must be true or false, not a string"}},
		{"bad env name", `{"version": 1, "commands": {"env": ["OK", "NOT-OK", "1X"]}}`, []string{"commands.env[1]: \"NOT-OK\" is not an environment variable name", "commands.env[2]"}},
		{"repeated env name", `{"version": 1, "commands": {"env": ["A", "A"]}}`, []string{`commands.env[1]: "A" repeats env[0]`}},
		{"env not strings", `{"version": 1, "commands": {"env": [1]}}`, []string{"commands.env[0]: must be a string, not a number"}},
		{"rules not an array", `{"version": 1, "rules": {}}`, []string{"rules: must be an array, not an object"}},
		{"rule not an object", rule(`"allow"`), []string{"rules[1]: must be an object, not a string"}},
		{"no tool", rule(`{"action": "allow"}`), []string{"rules[1].tool: is required"}},
		{"bad tool glob", rule(`{"tool": "[x", "action": "allow"}`), []string{"rules[1].tool: invalid glob"}},
		{"no action", rule(`{"tool": "x"}`), []string{"rules[1].action: is required"}},
		{"bad action", rule(`{"tool": "x", "action": "permit"}`), []string{`rules[1].action: must be "allow", "ask" or "deny", not "permit"`}},
		{"bad source", rule(`{"tool": "x", "action": "allow", "source": "admin"}`), []string{`rules[1].source: must be "user", "remembered", "similar" or "default", not "admin"`}},
		{"bad path glob", rule(`{"tool": "x", "action": "allow", "paths": ["src/**", "a[b"]}`), []string{"rules[1].paths[1]: invalid glob"}},
		{"empty path glob", rule(`{"tool": "x", "action": "allow", "paths": [""]}`), []string{"rules[1].paths[0]: invalid glob: it is empty"}},
		{"repeated path glob", rule(`{"tool": "x", "action": "allow", "paths": ["./a/b", "a/b"]}`), []string{`rules[1].paths[1]: "a/b" repeats paths[0]`}},
		{"null path glob", rule(`{"tool": "x", "action": "allow", "paths": [null]}`), []string{"rules[1].paths[0]: must be a string, not null"}},
		{"bad command glob", rule(`{"tool": "x", "action": "allow", "commands": ["echo 'x"]}`), []string{"rules[1].commands[0]: invalid command glob: unterminated single quote"}},
		{"empty command glob", rule(`{"tool": "x", "action": "allow", "commands": [" "]}`), []string{"rules[1].commands[0]: invalid command glob: it is empty"}},
		{"repeated command glob", rule(`{"tool": "x", "action": "allow", "commands": ["go  test", "'go' test"]}`), []string{"rules[1].commands[1]"}},
		{"paths and commands", rule(`{"tool": "x", "action": "allow", "paths": ["a"], "commands": ["b"]}`), []string{"rules[1]: has both paths and commands"}},
		{"bad time", rule(`{"tool": "x", "action": "allow", "created_at": "yesterday"}`), []string{"rules[1].created_at: must be an RFC 3339 time"}},
		{"changes_only not a boolean", rule(`{"tool": "x", "action": "allow", "changes_only": 1}`), []string{"rules[1].changes_only: must be true or false, not a number"}},
		{"unknown rule field", rule(`{"tool": "x", "action": "allow", "id": 7}`), []string{"rules[1].id: unknown field"}},
		{"duplicate rule", rule(`{"tool": "a", "action": "deny"}`), []string{"rules[1]: duplicates rules[0]"}},
		{
			"problems in reading and in checking",
			`{"version": 1, "commands": {"mode": "x", "shell": "sh"}, "rules": [7, {"tool": "", "action": "allow", "extra": 1}]}`,
			[]string{"commands.shell: unknown field", "rules[0]: must be an object, not a number", "rules[1].extra: unknown field", "commands.mode:", "rules[1].tool: is required"},
		},
		{
			"several problems",
			`{"version": 1, "commands": {"mode": "x"}, "rules": [{"tool": "", "action": "nope", "paths": ["[", "ok"]}]}`,
			[]string{"commands.mode:", "rules[0].tool: is required", "rules[0].action: must be", "rules[0].paths[0]: invalid glob"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", p.Rules())
			}
			if p != nil {
				t.Error("a policy came with the error")
			}
			if !errors.Is(err, ErrInvalidPolicy) || !errors.Is(err, engine.ErrInvalidRequest) {
				t.Errorf("err %v does not match ErrInvalidPolicy and engine.ErrInvalidRequest", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err %v has no *ValidationError", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) && !strings.Contains(lines[i], w) {
					t.Errorf("error %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
			if !strings.HasPrefix(lines[0], ve.Path) {
				t.Errorf("first error %q does not start with its path %q", lines[0], ve.Path)
			}
		})
	}
}

// TestParseManyProblems checks that a long list of problems is cut short.
func TestParseManyProblems(t *testing.T) {
	var rules []string
	for range 30 {
		rules = append(rules, `{"tool": "x", "action": "maybe"}`)
	}
	_, err := Parse([]byte(`{"version": 1, "rules": [` + strings.Join(rules, ",") + `]}`))
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxReported+1 || lines[maxReported] != "policy: and 10 more problems" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestUnmarshalJSON(t *testing.T) {
	var holder struct {
		Workspace string  `json:"workspace"`
		Policy    *Policy `json:"policy"`
	}
	doc := `{"workspace": "ws1", "policy": {"version": 1, "rules": [{"tool": "read_file", "paths": ["big/**"], "action": "ask"}]}}`
	if err := json.Unmarshal([]byte(doc), &holder); err != nil {
		t.Fatal(err)
	}
	if d := holder.Policy.Decide(Request{Tool: readFile, Paths: []string{"big/a.sql"}}); d.Action != Ask {
		t.Errorf("Decide = %s, want ask", d.Action)
	}
	p := Default()
	err := json.Unmarshal([]byte(`{"version": 1, "rules": [{"tool": "x", "action": "sometimes"}]}`), p)
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("err = %v", err)
	}
	if !slices.EqualFunc(p.Rules(), Default().Rules(), ruleEqual) {
		t.Error("a failed UnmarshalJSON changed the policy")
	}
}

func TestNewAndAddErrors(t *testing.T) {
	_, err := New(CommandSettings{Mode: "remote", Env: []string{"A B"}},
		Rule{Tool: "x", Action: Allow},
		Rule{Tool: "x", Action: Deny},
		Rule{Tool: "y", Action: Allow, Source: "robot"},
	)
	for _, want := range []string{`commands.mode: must be`, `commands.env[0]: "A B" is not`, "rules[1]: duplicates rules[0]", `rules[2].source: must be`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: err = %v, want it to mention %q", err, want)
		}
	}
	var p Policy
	err = p.Add(Rule{Tool: "x", Action: Allow, Commands: []string{"a && ("}})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Path != "rule.commands[0]" {
		t.Errorf("Add: err = %v, want one at rule.commands[0]", err)
	}
	if len(p.Rules()) != 0 {
		t.Error("Add kept an invalid rule")
	}
}
