package acp

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/plexus-agent/plexus/engine"
)

// Session modes: how the session's changes are approved.
const (
	// ModeAsk asks before every change the workspace policy does not
	// decide (the default).
	ModeAsk = "ask"
	// ModeAcceptEdits applies proposed edits without asking; commands and
	// other changes still ask.
	ModeAcceptEdits = "accept_edits"
	// ModeReadOnly reads and searches only: every change is refused,
	// whatever the policy allows (engine.TurnOptions.ReadOnly).
	ModeReadOnly = "read_only"
)

// Config option ids.
const (
	configMode  = "mode"
	configModel = "model"
)

var modes = []sdk.SessionMode{
	{Id: ModeAsk, Name: "Ask", Description: sdk.Ptr("Ask before changing files or running commands, unless the workspace policy decides")},
	{Id: ModeAcceptEdits, Name: "Accept edits", Description: sdk.Ptr("Apply proposed edits without asking; still ask before commands")},
	{Id: ModeReadOnly, Name: "Read only", Description: sdk.Ptr("Read and search only: every change and command is refused")},
}

// session is one engine session open on a connection.
type session struct {
	c     *conn
	id    string
	eng   *engine.Session
	root  string
	tools Toolset // the client's MCP servers; nil for none

	mu      sync.Mutex
	mode    string
	running *runningPrompt
	title   string
	updated time.Time
	// turn is the mapper of the running turn (nil between turns); the
	// host reads it to find the tool call a request is about.
	turn *mapper
	// mapMu serialises the mapper and the notifications it produces.
	mapMu sync.Mutex
}

// runningPrompt is a session/prompt being answered.
type runningPrompt struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newSession(c *conn, es *engine.Session, tools Toolset) *session {
	return &session{c: c, id: es.ID(), eng: es, root: es.Workspace().Root, tools: tools, mode: ModeAsk}
}

func (s *session) modeState() *sdk.SessionModeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(s.mode), AvailableModes: modes}
}

func (s *session) setMode(id string) error {
	for _, m := range modes {
		if string(m.Id) == id {
			s.mu.Lock()
			s.mode = id
			s.mu.Unlock()
			return nil
		}
	}
	return invalidParams("unknown mode %q; the modes are %s, %s and %s", id, ModeAsk, ModeAcceptEdits, ModeReadOnly)
}

func (s *session) currentMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// model is the model the session's turns use.
func (s *session) model() engine.ModelRef {
	if m := s.eng.Model(); !m.IsZero() {
		return m
	}
	return s.c.s.opts.Engine.CurrentModel()
}

// setModel switches the session's model after checking it
// (engine.Session.SetModel).
func (s *session) setModel(ctx context.Context, value string) error {
	ref, err := engine.ParseModelRef(value)
	if err != nil {
		return invalidParams("%v", err)
	}
	if err := s.eng.SetModel(ctx, ref); err != nil {
		return invalidParams("model %s: %v", value, err)
	}
	return nil
}

// configOptions are the session's mode and model selectors. The models
// are those the loaded providers list that can chat and call tools (or
// do not say), plus the current one.
func (s *session) configOptions(ctx context.Context) []sdk.SessionConfigOption {
	mode := s.currentMode()
	modeOpts := sdk.SessionConfigSelectOptionsUngrouped{}
	for _, m := range modes {
		modeOpts = append(modeOpts, sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(m.Id), Name: m.Name, Description: m.Description})
	}
	current := s.model().String()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	seen := map[string]bool{}
	modelOpts := sdk.SessionConfigSelectOptionsUngrouped{}
	for _, pm := range s.c.s.opts.Engine.AllModels(lctx) {
		if pm.Err != nil {
			continue
		}
		for _, mi := range pm.Models {
			if len(mi.Capabilities) > 0 && !(mi.HasCapability(engine.CapabilityCompletion) &&
				(mi.HasCapability(engine.CapabilityTools) || mi.HasCapability(engine.CapabilityConstrainedTools))) {
				continue
			}
			ref := engine.ModelRef{Provider: pm.Provider, Name: mi.Name}.String()
			if seen[ref] {
				continue
			}
			seen[ref] = true
			modelOpts = append(modelOpts, sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(ref), Name: ref})
		}
	}
	if current != ":" && !seen[current] {
		modelOpts = append(modelOpts, sdk.SessionConfigSelectOption{Value: sdk.SessionConfigValueId(current), Name: current})
	}
	sort.Slice(modelOpts, func(i, j int) bool { return modelOpts[i].Value < modelOpts[j].Value })
	out := []sdk.SessionConfigOption{{Select: &sdk.SessionConfigOptionSelect{
		Id: configMode, Name: "Mode", Category: sdk.Ptr(sdk.SessionConfigOptionCategoryMode), Type: "select",
		Description:  sdk.Ptr("How changes are approved"),
		CurrentValue: sdk.SessionConfigValueId(mode), Options: sdk.SessionConfigSelectOptions{Ungrouped: &modeOpts},
	}}}
	if len(modelOpts) > 0 {
		out = append(out, sdk.SessionConfigOption{Select: &sdk.SessionConfigOptionSelect{
			Id: configModel, Name: "Model", Category: sdk.Ptr(sdk.SessionConfigOptionCategoryModel), Type: "select",
			Description:  sdk.Ptr("The model of this session's turns (PROVIDER:MODEL)"),
			CurrentValue: sdk.SessionConfigValueId(current), Options: sdk.SessionConfigSelectOptions{Ungrouped: &modelOpts},
		}})
	}
	return out
}

// availableCommands is the available_commands_update of the slash
// commands the engine knows (engine.TurnContext.Command).
func availableCommands() sdk.SessionUpdate {
	hint := func(h string) *sdk.AvailableCommandInput {
		return &sdk.AvailableCommandInput{Unstructured: &sdk.UnstructuredCommandInput{Hint: h}}
	}
	return sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: []sdk.AvailableCommand{
		{Name: "fix", Description: "Fix a problem: gathers the diagnostics and the failing output first", Input: hint("what is wrong")},
		{Name: "test", Description: "Write or run tests for the code in question", Input: hint("what to test")},
		{Name: "explain", Description: "Explain code without changing it", Input: hint("what to explain")},
		{Name: "refactor", Description: "Restructure code without changing its behaviour", Input: hint("what to refactor")},
	}}}
}

// titleAndUpdated are session/list's title (the first prompt's first
// line) and last activity, known for sessions that ran a prompt here.
func (s *session) titleAndUpdated() (*string, *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var title, updated *string
	if s.title != "" {
		title = sdk.Ptr(s.title)
	}
	if !s.updated.IsZero() {
		updated = sdk.Ptr(s.updated.UTC().Format(time.RFC3339))
	}
	return title, updated
}

// prompt runs one turn of the session for a session/prompt. A prompt that
// arrives while another runs cancels it (the SDK does, as ACP clients
// expect) and waits for it to end.
func (s *session) prompt(ctx context.Context, blocks []sdk.ContentBlock) (sdk.PromptResponse, error) {
	in, err := turnInput(s.root, blocks)
	if err != nil {
		return sdk.PromptResponse{}, invalidParams("%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rp := &runningPrompt{cancel: cancel, done: make(chan struct{})}
	defer close(rp.done)
	s.mu.Lock()
	prev := s.running
	s.running = rp
	if s.title == "" {
		s.title = truncate(strings.SplitN(strings.TrimSpace(in.Message), "\n", 2)[0], 80)
	}
	mode := s.mode
	s.mu.Unlock()
	if prev != nil {
		prev.cancel()
		<-prev.done
	}
	defer func() {
		s.mu.Lock()
		if s.running == rp {
			s.running = nil
		}
		s.updated = time.Now()
		s.mu.Unlock()
	}()

	specs, _ := s.c.s.opts.Engine.Tools(ctx)
	h := newHost(s, mode)
	if err := h.loadClientTools(ctx); err != nil {
		s.c.notify(s.id, sdk.UpdateAgentThoughtText("Warning: the session's MCP servers: "+err.Error()+"\n"))
	}
	specs = append(specs, h.ClientTools()...)
	m := newMapper(s.root, specs)
	s.mapMu.Lock()
	s.turn = m
	s.mapMu.Unlock()
	var final *engine.FinalEvent
	res, err := s.eng.Run(ctx, in, engine.TurnOptions{
		Host:       h.engineHost(),
		ApproveAll: s.c.s.opts.ApproveAll,
		ReadOnly:   mode == ModeReadOnly,
		OnEvent: func(ev engine.Event) {
			if f, ok := ev.Data.(*engine.FinalEvent); ok {
				final = f
			}
			s.emit(m, ev)
		},
	})
	s.mapMu.Lock()
	s.turn = nil
	s.mapMu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		}
		return sdk.PromptResponse{}, engineError(err)
	}
	if final != nil {
		s.reportUsage(ctx, final.Metadata)
	}
	switch res.Status {
	case engine.TurnCompleted:
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	case engine.TurnCancelled:
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}
	if m.stepLimit {
		return sdk.PromptResponse{StopReason: sdk.StopReasonMaxTurnRequests}, nil
	}
	return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: "the turn failed: " + res.Error,
		Data: map[string]any{"status": string(res.Status), "turn_id": res.TurnID}}
}

// emit maps one event and sends its updates, in order.
func (s *session) emit(m *mapper, ev engine.Event) {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	for _, u := range m.updates(ev) {
		s.c.notify(s.id, u)
	}
}

// withTurn runs f with the running turn's mapper (nil between turns),
// holding the mapper's lock, and sends the updates f returns.
func (s *session) withTurn(f func(m *mapper) []sdk.SessionUpdate) {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	for _, u := range f(s.turn) {
		s.c.notify(s.id, u)
	}
}

// reportUsage sends usage_update after a turn whose provider reported
// tokens, when the model's context window is known: used is the turn's
// prompt and completion tokens (the engine sums them over the turn's
// model calls), size the window the provider lists.
func (s *session) reportUsage(ctx context.Context, md engine.TurnMetadata) {
	if md.TokensUsed <= 0 {
		return
	}
	ref, err := engine.ParseModelRef(md.Model)
	if err != nil {
		return
	}
	size := s.c.s.contextWindow(context.WithoutCancel(ctx), ref)
	if size <= 0 {
		return
	}
	s.c.notify(s.id, sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{Used: int(md.TokensUsed), Size: int(size)}})
}

// cancelPrompt cancels the running prompt, if any.
func (s *session) cancelPrompt() {
	s.mu.Lock()
	rp := s.running
	s.mu.Unlock()
	if rp != nil {
		rp.cancel()
	}
}

// close cancels the running prompt, waits up to grace for it to answer,
// and stops the session's MCP servers.
func (s *session) close(grace time.Duration) {
	s.mu.Lock()
	rp := s.running
	s.mu.Unlock()
	if rp != nil {
		rp.cancel()
		select {
		case <-rp.done:
		case <-time.After(grace):
			s.c.s.log.Warn("a cancelled prompt did not end in time", "session", s.id, "grace", grace)
		}
	}
	if s.tools != nil {
		if err := s.tools.Close(); err != nil {
			s.c.s.log.Warn("stopping the session's MCP servers failed", "session", s.id, "error", err)
		}
	}
}
