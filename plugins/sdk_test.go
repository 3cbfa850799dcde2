package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/plugintest"
)

type greetIn struct {
	Name  string `json:"name" jsonschema:"who to greet"`
	Times int    `json:"times,omitempty"`
	File  string `json:"file,omitempty"`
}

type greetOut struct {
	Text  string `json:"text"`
	Bytes int    `json:"file_bytes,omitempty"`
}

func (o greetOut) Summary() string { return "greeted: " + o.Text }

type greet struct{}

// kept is a Call a tool kept past its Invoke.
var kept *plugins.Call

func (greet) Describe() plugins.ToolInfo {
	return plugins.ToolInfo{Name: "greet", Description: "Greet someone."}
}

func (greet) Invoke(ctx context.Context, call *plugins.Call, in greetIn) (greetOut, error) {
	switch in.Name {
	case "panic":
		panic("boom")
	case "tool-error":
		return greetOut{}, engine.ToolErrorf(engine.ToolCodeNotFound, "no such person")
	case "plain-error":
		return greetOut{}, errors.New("disk on fire")
	case "keep":
		kept = call
		return greetOut{Text: "kept"}, nil
	case "wait":
		<-ctx.Done()
		return greetOut{}, ctx.Err()
	case "approve":
		dec, err := call.Host().RequestApproval(ctx, engine.ActionApproval{Action: "greet loudly"})
		if err != nil {
			return greetOut{}, err
		}
		return greetOut{Text: "approved=" + fmt.Sprint(dec.Approved)}, nil
	}
	call.Progress("greeting", 50)
	call.Output("stdout", "hello\n")
	out := greetOut{Text: strings.Repeat("hello "+in.Name+" ", max(in.Times, 1))}
	if in.File != "" {
		data, err := call.ReadFile(in.File)
		if err != nil {
			return greetOut{}, err
		}
		out.Bytes = len(data)
	}
	return out, nil
}

type noSchema struct{}

func (noSchema) Describe() plugins.ToolInfo {
	return plugins.ToolInfo{Name: "chan", Description: "input cannot be JSON"}
}
func (noSchema) Invoke(context.Context, *plugins.Call, chan int) (string, error) { return "", nil }

type named struct{ info plugins.ToolInfo }

func (n named) Describe() plugins.ToolInfo { return n.info }
func (named) Invoke(context.Context, *plugins.Call, struct{}) (string, error) {
	return "ok", nil
}

func TestSDKToolsetErrors(t *testing.T) {
	cases := []struct {
		name  string
		tools []*plugins.ToolHandler
		want  string
	}{
		{"none", nil, "no tools"},
		{"bad name", []*plugins.ToolHandler{plugins.NewTool(named{plugins.ToolInfo{Name: "has space", Description: "d"}})}, "1 to 64"},
		{"no description", []*plugins.ToolHandler{plugins.NewTool(named{plugins.ToolInfo{Name: "x"}})}, "description is empty"},
		{"bad risk", []*plugins.ToolHandler{plugins.NewTool(named{plugins.ToolInfo{Name: "x", Description: "d", Risk: "extreme"}})}, `risk "extreme" is not low`},
		{"input not an object", []*plugins.ToolHandler{plugins.NewTool(noSchema{})}, "infer the input schema"},
		{"schema override not an object", []*plugins.ToolHandler{plugins.NewTool(named{plugins.ToolInfo{Name: "x", Description: "d", InputSchema: json.RawMessage(`{"type":"string"}`)}})}, "must describe an object"},
		{"duplicate", []*plugins.ToolHandler{plugins.NewTool(greet{}), plugins.NewTool(greet{})}, `two tools are named "greet"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := plugins.NewToolset(c.tools...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// approver is a ToolHost that approves and records what it was asked.
type approver struct {
	engine.ToolHost
	asked []string
}

func (a *approver) RequestApproval(_ context.Context, req engine.ActionApproval) (engine.ApprovalDecision, error) {
	a.asked = append(a.asked, req.Action)
	return engine.ApprovalDecision{Approved: true}, nil
}

func TestSDKToolOverGRPC(t *testing.T) {
	impl, err := plugins.NewToolset(plugins.NewTool(greet{}), plugins.NewTool(named{plugins.ToolInfo{Name: "risky", Description: "d", NeedsApproval: true, Risk: engine.RiskHigh}}))
	if err != nil {
		t.Fatal(err)
	}
	ts := plugintest.StartTool(t, impl)
	specs, err := ts.Tools(t.Context())
	if err != nil || len(specs) != 2 {
		t.Fatalf("Tools: %+v %v", specs, err)
	}
	if s := specs[0]; s.Name != "greet" || s.Risk != engine.RiskMedium || s.ReadOnly || s.NeedsApproval {
		t.Errorf("greet spec %+v", s)
	}
	if !strings.Contains(string(specs[0].InputSchema), `"required":["name"]`) || !strings.Contains(string(specs[0].InputSchema), `"description":"who to greet"`) {
		t.Errorf("inferred schema %s", specs[0].InputSchema)
	}
	if s := specs[1]; s.Risk != engine.RiskHigh || !s.NeedsApproval {
		t.Errorf("risky spec %+v", s)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(ctx context.Context, args string, host engine.ToolHost, overlay map[string]engine.OverlayFile) (engine.ToolResult, []engine.ToolUpdate, error) {
		var updates []engine.ToolUpdate
		res, err := ts.Invoke(ctx, engine.InvokeRequest{CallID: "c", Tool: "greet", Args: json.RawMessage(args), WorkspaceRoot: dir, Host: host, Overlay: overlay},
			func(u engine.ToolUpdate) { updates = append(updates, u) })
		return res, updates, err
	}

	res, updates, err := call(t.Context(), `{"name":"ada","times":2,"file":"f.txt"}`, nil, nil)
	if err != nil || string(res.Content) != `{"text":"hello ada hello ada ","file_bytes":5}` || res.Summary != "greeted: hello ada hello ada " {
		t.Errorf("result %s %q %v", res.Content, res.Summary, err)
	}
	if len(updates) != 2 || updates[0].Progress == nil || *updates[0].Progress.Percentage != 50 || updates[1].Output.Text != "hello\n" {
		t.Errorf("updates %+v", updates)
	}
	res, _, err = call(t.Context(), `{"name":"ada","file":"f.txt"}`, nil, map[string]engine.OverlayFile{"f.txt": {Content: []byte("12")}})
	if err != nil || !strings.Contains(string(res.Content), `"file_bytes":2`) {
		t.Errorf("overlay: %s %v", res.Content, err)
	}
	host := &approver{}
	res, _, err = call(t.Context(), `{"name":"approve"}`, host, nil)
	if err != nil || string(res.Content) != `{"text":"approved=true"}` || len(host.asked) != 1 {
		t.Errorf("host callback: %s %v %v", res.Content, host.asked, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		args string
		code engine.ToolErrorCode
		msg  string
	}{
		{t.Context(), `{}`, engine.ToolCodeInvalidInput, "name"},
		{t.Context(), `{"name":"x","extra":1}`, engine.ToolCodeInvalidInput, "extra"},
		{t.Context(), `{"name":5}`, engine.ToolCodeInvalidInput, "greet"},
		{t.Context(), `not json`, engine.ToolCodeInvalidInput, "not JSON"},
		{t.Context(), `{"name":"panic"}`, engine.ToolCodeFailed, "panicked: boom"},
		{t.Context(), `{"name":"tool-error"}`, engine.ToolCodeNotFound, "no such person"},
		{t.Context(), `{"name":"plain-error"}`, engine.ToolCodeFailed, "disk on fire"},
		{t.Context(), `{"name":"x","file":"../etc/passwd"}`, engine.ToolCodePermissionDenied, ""},
		{t.Context(), `{"name":"x","file":"nope.txt"}`, engine.ToolCodeNotFound, "nope.txt"},
	} {
		_, _, err := call(c.ctx, c.args, nil, nil)
		var te *engine.ToolError
		if !errors.As(err, &te) || te.Code != c.code || !strings.Contains(te.Message, c.msg) {
			t.Errorf("%s: got %v, want %s containing %q", c.args, err, c.code, c.msg)
		}
	}
	if _, _, err := call(ctx, `{"name":"wait"}`, nil, nil); err == nil {
		t.Error("a cancelled call succeeded")
	}
	// Symlinks: a pending edit is found through a link to its directory,
	// and an absolute link that stays inside is followed.
	os.Mkdir(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "a.go"), []byte("disk"), 0o644)
	os.Symlink("src", filepath.Join(dir, "lnk"))
	os.Symlink(filepath.Join(dir, "src", "a.go"), filepath.Join(dir, "abs.go"))
	res, _, err = call(t.Context(), `{"name":"x","file":"lnk/a.go"}`, nil, map[string]engine.OverlayFile{"src/a.go": {Content: []byte("pending!")}})
	if err != nil || !strings.Contains(string(res.Content), `"file_bytes":8`) {
		t.Errorf("overlay through a symlink: %s %v", res.Content, err)
	}
	res, _, err = call(t.Context(), `{"name":"x","file":"abs.go"}`, nil, nil)
	if err != nil || !strings.Contains(string(res.Content), `"file_bytes":4`) {
		t.Errorf("absolute symlink inside the workspace: %s %v", res.Content, err)
	}
	_, _, err = call(t.Context(), `{"name":"x","file":"a\u0000b"}`, nil, nil)
	if te := new(engine.ToolError); !errors.As(err, &te) || te.Code != engine.ToolCodeInvalidInput {
		t.Errorf("NUL in a path: %v", err)
	}
	// A Call kept past its Invoke refuses to open the workspace again.
	if _, _, err := call(t.Context(), `{"name":"keep"}`, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Root(); err == nil || !strings.Contains(err.Error(), "must not be used after Invoke returns") {
		t.Errorf("Root after Invoke: %v", err)
	}
	if _, err := kept.ReadFile("f.txt"); err == nil {
		t.Error("ReadFile after Invoke succeeded")
	}
	kept.Progress("late", 1) // dropped, not a crash

	// The plugin survived the panic.
	if _, _, err := call(t.Context(), `{"name":"still here"}`, nil, nil); err != nil {
		t.Errorf("after the panic: %v", err)
	}
}
