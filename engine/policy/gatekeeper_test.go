package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/policy"
	"github.com/plexus-agent/plexus/engine/store"
)

// openStore opens a real state database in dir; it is closed at the end
// of the test.
func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(dir, "plexus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var shellSpec = engine.ToolSpec{Name: "run_command", Risk: engine.RiskHigh, NeedsApproval: true, Kind: engine.ToolKindCommand}

func command(line string) engine.ActionRequest {
	return engine.ActionRequest{Kind: engine.ActionCommand, Tool: "run_command", Spec: shellSpec, Command: line}
}

func TestGatekeeperDefaultPolicy(t *testing.T) {
	ctx := t.Context()
	g := policy.NewGatekeeper(openStore(t, t.TempDir()))
	doc, err := g.Policy(ctx, "ws_a")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(doc)
	if err != nil {
		t.Fatalf("the default document does not parse: %v\n%s", err, doc)
	}
	if got, want := len(p.Rules()), len(policy.Default().Rules()); got != want {
		t.Errorf("default document has %d rules, want %d", got, want)
	}
	cs, err := g.CommandSettings(ctx, "ws_a")
	if err != nil || cs.Mode != engine.CommandModeLocal || cs.AllowNetwork {
		t.Errorf("CommandSettings = %+v, %v; want local_terminal without network", cs, err)
	}
	tests := []struct {
		req  engine.ActionRequest
		want string
	}{
		{engine.ActionRequest{Kind: engine.ActionPatchApply, Tool: "apply_patch", Paths: []string{".git/config"}}, engine.VerdictDeny},
		{engine.ActionRequest{Kind: engine.ActionPatchApply, Tool: "apply_patch", Paths: []string{"main.go"}}, engine.VerdictAsk},
		{engine.ActionRequest{Kind: engine.ActionToolCall, Tool: "read_file", Spec: engine.ToolSpec{Name: "read_file", ReadOnly: true}, Paths: []string{"main.go"}}, engine.VerdictAllow},
		{engine.ActionRequest{Kind: engine.ActionToolCall, Tool: "read_file", Spec: engine.ToolSpec{Name: "read_file", ReadOnly: true}, Paths: []string{"config/.env"}}, engine.VerdictAsk},
		{command("go test ./..."), engine.VerdictAsk},
		{engine.ActionRequest{Kind: "format_disk"}, engine.VerdictDeny},
	}
	for _, tt := range tests {
		v, err := g.Decide(ctx, "ws_a", tt.req)
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != tt.want || v.Reason == "" || v.Risk.Level == "" {
			t.Errorf("Decide(%+v) = %+v; want %s with a reason and a risk level", tt.req, v, tt.want)
		}
	}
}

func TestGatekeeperSetPolicy(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	g := policy.NewGatekeeper(openStore(t, dir))
	good := `{"version": 1,
		"commands": {"mode": "server_runner", "sandbox": {"network": true}, "env": ["GOFLAGS"]},
		"rules": [
			{"tool": "run_command", "commands": ["go test *"], "action": "allow"},
			{"tool": "run_command", "commands": ["rm -rf *"], "action": "deny", "reason": "no recursive deletes"},
			{"tool": "*", "commands": ["*"], "action": "allow"}
		]}`
	if err := g.SetPolicy(ctx, "ws_a", json.RawMessage(good)); err != nil {
		t.Fatal(err)
	}
	// A bad document is refused with the field named, and changes nothing.
	bad := `{"version": 1, "rules": [{"tool": "run_command", "commands": ["go test *"], "action": "perhaps"}]}`
	err := g.SetPolicy(ctx, "ws_a", json.RawMessage(bad))
	if !errors.Is(err, engine.ErrInvalidRequest) || !strings.Contains(err.Error(), "rules[0].action") {
		t.Errorf("SetPolicy(bad) = %v; want ErrInvalidRequest naming rules[0].action", err)
	}

	// A second Gatekeeper on the same database (a restarted engine) reads
	// what the first stored.
	g2 := policy.NewGatekeeper(openStore(t, dir))
	cs, err := g2.CommandSettings(ctx, "ws_a")
	if err != nil || cs.Mode != engine.CommandModeServer || !cs.AllowNetwork || len(cs.Env) != 1 || cs.Env[0] != "GOFLAGS" {
		t.Errorf("CommandSettings after restart = %+v, %v", cs, err)
	}
	for line, want := range map[string]string{
		"go test ./...":             engine.VerdictAllow,
		"ls -la":                    engine.VerdictAllow,
		"cd build && rm -rf out":    engine.VerdictDeny, // deny wins over the allow-everything rule
		"go test ./... ; rm -rf /x": engine.VerdictDeny,
	} {
		v, err := g2.Decide(ctx, "ws_a", command(line))
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != want {
			t.Errorf("Decide(%q) = %s (%s); want %s", line, v.Action, v.Reason, want)
		}
		if want == engine.VerdictDeny && !strings.Contains(v.Reason, "no recursive deletes") {
			t.Errorf("Decide(%q) reason %q does not quote the rule's reason", line, v.Reason)
		}
	}
	// Another workspace still has the default policy.
	if v, _ := g2.Decide(ctx, "ws_b", command("go test ./...")); v.Action != engine.VerdictAsk {
		t.Errorf("other workspace: %+v; want the default ask", v)
	}
}

func TestGatekeeperRememberPersists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	g := policy.NewGatekeeper(openStore(t, dir))
	if err := g.Remember(ctx, "ws_a", command("go test ./engine/..."), true, true); err != nil {
		t.Fatal(err)
	}
	if err := g.Remember(ctx, "ws_a", command("git push origin main"), false, false); err != nil {
		t.Fatal(err)
	}
	g2 := policy.NewGatekeeper(openStore(t, dir))
	for line, want := range map[string]string{
		"go test ./engine/...":    engine.VerdictAllow, // remembered
		"go test -run X ./cmd/":   engine.VerdictAllow, // similar
		"go vet ./...":            engine.VerdictAsk,   // not similar
		"git push origin main":    engine.VerdictDeny,  // remembered denial
		"git push origin feature": engine.VerdictAsk,   // a denial is remembered exactly
	} {
		v, err := g2.Decide(ctx, "ws_a", command(line))
		if err != nil {
			t.Fatal(err)
		}
		if v.Action != want {
			t.Errorf("after restart, Decide(%q) = %s (%s); want %s", line, v.Action, v.Reason, want)
		}
	}
	doc, err := g2.Policy(ctx, "ws_a")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"source":"similar"`, `"source":"remembered"`, `"action":"deny"`} {
		if !strings.Contains(strings.ReplaceAll(string(doc), " ", ""), s) {
			t.Errorf("stored policy lacks %s:\n%s", s, doc)
		}
	}
}
