package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/models/replay"
)

// capsModel is a scriptModel that lists models with capabilities.
type capsModel struct {
	*scriptModel
	infos []engine.ModelInfo
	err   error
}

func (m *capsModel) ListModels(context.Context) ([]engine.ModelInfo, error) { return m.infos, m.err }

func newCapsModel(steps ...step) *capsModel {
	return &capsModel{scriptModel: &scriptModel{steps: steps}, infos: []engine.ModelInfo{
		{Name: "coder", Capabilities: []string{"completion", "tools"}},
		{Name: "small", Capabilities: []string{"completion", "constrained_tools"}},
		{Name: "chat-only", Capabilities: []string{"completion"}},
		{Name: "embedder", Capabilities: []string{"embedding"}},
		{Name: "silent"}, // a provider that reports no capabilities
	}}
}

func TestCheckModelCapabilities(t *testing.T) {
	f := newFixture(t, engine.Options{})
	_ = f
	caps := newCapsModel()
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"local": caps}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		model string
		need  []string
		kind  error
		msg   string
	}{
		{"coder", engine.ForChat, nil, ""},
		{"small", engine.ForChat, nil, ""},
		{"silent", engine.ForChat, nil, ""},
		{"silent", engine.ForEmbedding, nil, ""},
		{"embedder", engine.ForEmbedding, nil, ""},
		{"chat-only", engine.ForChat, engine.ErrUnsupported, `model local:chat-only cannot call tools, which every turn offers: it lists completion; choose a model with the "tools" capability`},
		{"embedder", engine.ForChat, engine.ErrUnsupported, "model local:embedder cannot chat: it lists embedding"},
		{"coder", engine.ForEmbedding, engine.ErrUnsupported, "cannot embed text for vector search"},
		{"missing", engine.ForChat, engine.ErrModelNotFound, `model "missing" is not among the 5 models`},
	}
	for _, c := range cases {
		_, err := eng.CheckModel(ctx, engine.ModelRef{Provider: "local", Name: c.model}, c.need)
		if c.kind == nil {
			if err != nil {
				t.Errorf("%s %v: %v", c.model, c.need, err)
			}
			continue
		}
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %v: got %v, want %v containing %q", c.model, c.need, err, c.kind, c.msg)
		}
	}
	if _, err := eng.CheckModel(ctx, engine.ModelRef{Provider: "cloud", Name: "x"}, engine.ForChat); !errors.Is(err, engine.ErrUnknownProvider) {
		t.Errorf("unknown provider: %v", err)
	}
	if err := eng.SetCurrentModel(ctx, engine.ModelRef{Provider: "local", Name: "embedder"}); !errors.Is(err, engine.ErrUnsupported) || !eng.CurrentModel().IsZero() {
		t.Errorf("SetCurrentModel to an embedding model: %v (current %v)", err, eng.CurrentModel())
	}
}

func TestAllModels(t *testing.T) {
	down := newCapsModel()
	down.err = &engine.ModelError{Provider: "down", Kind: engine.ErrModelUnavailable, Message: "no server"}
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"local": newCapsModel(), "down": down}})
	if err != nil {
		t.Fatal(err)
	}
	all := eng.AllModels(context.Background())
	if len(all) != 2 || all[0].Provider != "down" || !errors.Is(all[0].Err, engine.ErrModelUnavailable) ||
		all[1].Provider != "local" || all[1].Err != nil || len(all[1].Models) != 5 {
		t.Errorf("AllModels = %+v", all)
	}
}

// TestSessionModelSwitch switches one session to another provider's model
// between turns: its next turn goes there, another session keeps the
// engine's model, and a turn's own Model still wins.
func TestSessionModelSwitch(t *testing.T) {
	f := newFixture(t, engine.Options{}, step{text: "from script"}, step{text: "from script again"})
	local := newCapsModel(step{text: "from local"})
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"script": f.model, "local": local}, Model: engine.ModelRef{Provider: "script", Name: "m1"}, Tools: f.tools})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := eng.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := eng.NewSession(ws, "")
	b, _ := eng.NewSession(ws, "")
	ctx := context.Background()
	if err := a.SetModel(ctx, engine.ModelRef{Provider: "local", Name: "chat-only"}); !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("switch to a model without tools: %v", err)
	}
	if got := a.Model(); got != (engine.ModelRef{Provider: "script", Name: "m1"}) {
		t.Errorf("a failed switch changed the model to %v", got)
	}
	if err := a.SetModel(ctx, engine.ModelRef{Provider: "local", Name: "coder"}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, engine.TurnInput{Message: "hi"}, engine.TurnOptions{})
	if err != nil || res.Message != "from local" || local.requests()[0].Model != "coder" {
		t.Errorf("session a's turn: %+v %v", res, err)
	}
	res, err = b.Run(ctx, engine.TurnInput{Message: "hi"}, engine.TurnOptions{})
	if err != nil || res.Message != "from script" {
		t.Errorf("session b's turn: %+v %v", res, err)
	}
	res, err = a.Run(ctx, engine.TurnInput{Message: "hi", Model: engine.ModelRef{Provider: "script", Name: "m1"}}, engine.TurnOptions{})
	if err != nil || res.Message != "from script again" {
		t.Errorf("turn override: %+v %v", res, err)
	}
	if err := a.SetModel(ctx, engine.ModelRef{}); err != nil || a.Model() != eng.CurrentModel() {
		t.Errorf("reset: %v, model %v", err, a.Model())
	}
}

// TestSessionModelSurvivesRestart stores the choice in SQLite.
func TestSessionModelSurvivesRestart(t *testing.T) {
	r := newPersistentRig(t, `{"text":"ok"}`)
	open := func() *engine.Engine {
		st, err := store.Open(context.Background(), r.db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		eng, err := engine.New(engine.Options{
			Models:   map[string]engine.Model{"replay": replay.New(), "local": newCapsModel()},
			Model:    engine.ModelRef{Provider: "replay", Name: r.script},
			Sessions: st,
		})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	ws, err := eng.OpenWorkspace(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := eng.NewSession(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ModelRef{Provider: "local", Name: "small"}
	if err := s.SetModel(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	again, err := open().Session(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Model(); got != want {
		t.Errorf("after a restart the session's model is %v, want %v", got, want)
	}
	if err := again.SetModel(context.Background(), engine.ModelRef{}); err != nil {
		t.Fatal(err)
	}
	third, _ := open().Session(s.ID())
	if got := third.Model(); got.Provider != "replay" {
		t.Errorf("after a reset and a restart the session's model is %v", got)
	}
}

// TestAllModelsNotConfigured: every named provider is listed, in the order named (name
// order by default); an unknown name and a provider that is not
// configured are reported without hiding the others, and a provider that
// lists nothing has an empty, non-nil list.
func TestAllModelsNotConfigured(t *testing.T) {
	notConfigured := &capsModel{scriptModel: &scriptModel{}, err: &engine.ModelError{Provider: "cloud", Kind: engine.ErrNotConfigured, Message: "not configured: set KEY"}}
	empty := &capsModel{scriptModel: &scriptModel{}}
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"local": newCapsModel(), "cloud": notConfigured, "empty": empty}})
	if err != nil {
		t.Fatal(err)
	}
	got := eng.AllModels(context.Background())
	var names []string
	for _, pm := range got {
		names = append(names, pm.Provider)
	}
	if strings.Join(names, " ") != "cloud empty local" {
		t.Fatalf("providers %v", names)
	}
	if !got[0].NotConfigured() || got[0].Models != nil {
		t.Errorf("cloud: %+v, want not configured", got[0])
	}
	if got[1].Err != nil || got[1].Models == nil || got[1].NotConfigured() {
		t.Errorf("empty: %+v, want an empty list", got[1])
	}
	if got[2].Err != nil || len(got[2].Models) != 5 {
		t.Errorf("local: %+v", got[2])
	}
	got = eng.AllModels(context.Background(), "local", "nobody")
	if len(got) != 2 || got[0].Provider != "local" || !errors.Is(got[1].Err, engine.ErrUnknownProvider) || got[1].NotConfigured() {
		t.Errorf("named: %+v", got)
	}
	if _, err := eng.CheckModel(context.Background(), engine.ModelRef{Provider: "cloud", Name: "gpt"}, engine.ForChat); !errors.Is(err, engine.ErrNotConfigured) {
		t.Errorf("CheckModel of a provider not configured: %v", err)
	}
	info, err := eng.DescribeModel(context.Background(), engine.ModelRef{Provider: "local", Name: "chat-only"})
	if err != nil || strings.Join(info.Capabilities, ",") != "completion" {
		t.Errorf("DescribeModel = %+v, %v (no capability check)", info, err)
	}
}
