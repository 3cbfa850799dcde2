package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxSteps           = 24
	DefaultToolTimeout        = 11 * time.Minute
	DefaultMaxToolResultBytes = 64 << 10
	DefaultMaxAttachmentBytes = 256 << 10
)

// Options configure an Engine. The zero value of every field means its
// default.
type Options struct {
	// Models maps provider names ("ollama", "openai", "replay") to
	// providers.
	Models map[string]Model
	// Tools are the tools turns may call; nil means none but update_plan.
	Tools Toolset
	// Searcher is the workspace index that tools search through host
	// callbacks; nil makes those searches fail with ErrUnsupported.
	Searcher Searcher
	// Retriever gathers code context before the model's first call; nil
	// skips the retrieval stage.
	Retriever Retriever
	// Patcher turns edit tools' proposals into patches and applies them;
	// Patches stores them for undo. Without a Patcher, edits are reported
	// to the model as not applied.
	Patcher Patcher
	Patches PatchStore
	// Sessions keeps sessions, their history and their events across
	// restarts; nil keeps them in memory only (lost on exit, and Events
	// fails with ErrUnsupported).
	Sessions SessionStore
	// Workspaces keeps the registered workspaces across restarts; nil
	// keeps them in memory.
	Workspaces WorkspaceStore
	// Gatekeeper is the per-workspace policy; nil means the built-in
	// default (read-only tools run, the rest asks).
	Gatekeeper Gatekeeper
	// Recorder receives a receipt for every approval, denial, patch apply
	// and undo, and command; nil records nothing.
	Recorder Recorder
	// RetrievalTokens is the token budget of retrieved context (default a
	// quarter of Chat.NumCtx, or 2048 when that is unset: a quarter of
	// 8192, the smallest context the Ollama provider sizes a prompt to).
	RetrievalTokens int
	// Model is the current model at start; it can be changed with
	// SetCurrentModel.
	Model ModelRef
	// Logger receives engine logs; nil discards them.
	Logger *slog.Logger
	// MaxSteps caps model calls per turn (default DefaultMaxSteps).
	MaxSteps int
	// ToolTimeout is the deadline of one tool call whose ToolSpec has no
	// Timeout of its own (default DefaultToolTimeout, 11 minutes: above
	// run_command's own 600 s maximum, so the tool's limit, which returns
	// partial output, acts first). Tools enforce their own, shorter
	// limits. Running tool-call events carry the time left (Remaining).
	ToolTimeout time.Duration
	// MaxToolResultBytes caps the tool result text handed to the model
	// (default DefaultMaxToolResultBytes); longer results are cut and
	// marked truncated.
	MaxToolResultBytes int
	// MaxAttachmentBytes caps each attachment read into a turn (default
	// DefaultMaxAttachmentBytes).
	MaxAttachmentBytes int
	// Chat holds default model options for every call.
	Chat ChatOptions
	// SystemPrompt replaces the built-in system prompt when non-empty. It
	// may use {{workspace}}, replaced by the workspace root.
	SystemPrompt string
}

// Engine owns workspaces, sessions and the current model. It is safe for
// concurrent use.
type Engine struct {
	opts    Options
	log     *slog.Logger
	started time.Time

	mu         sync.Mutex
	current    ModelRef
	workspaces map[string]*Workspace // by ID
	sessions   map[string]*Session   // by ID
}

// New returns an Engine. It fails when Options.Model names a provider that
// is not in Options.Models.
func New(opts Options) (*Engine, error) {
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.ToolTimeout <= 0 {
		opts.ToolTimeout = DefaultToolTimeout
	}
	if opts.MaxToolResultBytes <= 0 {
		opts.MaxToolResultBytes = DefaultMaxToolResultBytes
	}
	if opts.RetrievalTokens <= 0 {
		opts.RetrievalTokens = 2048
		if opts.Chat.NumCtx > 0 {
			opts.RetrievalTokens = opts.Chat.NumCtx / 4
		}
	}
	if opts.MaxAttachmentBytes <= 0 {
		opts.MaxAttachmentBytes = DefaultMaxAttachmentBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !opts.Model.IsZero() {
		if _, ok := opts.Models[opts.Model.Provider]; !ok {
			return nil, unknownProvider(opts.Model.Provider, opts.Models)
		}
	}
	return &Engine{
		opts:       opts,
		log:        log,
		started:    time.Now(),
		current:    opts.Model,
		workspaces: map[string]*Workspace{},
		sessions:   map[string]*Session{},
	}, nil
}

func unknownProvider(name string, models map[string]Model) error {
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Errorf("%w %q (loaded providers: %v)", ErrUnknownProvider, name, names)
}

// Started is when the engine was created.
func (e *Engine) Started() time.Time { return e.started }

// Workspace is a directory the engine works in. Root is absolute with
// symlinks resolved; ID is derived from Root and stable across restarts.
type Workspace struct {
	ID   string `json:"workspace_id"`
	Root string `json:"root"`
}

// OpenWorkspace registers (or returns the already registered) workspace at
// dir. dir must be an existing directory.
func (e *Engine) OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	id := WorkspaceID(root)
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws, ok := e.workspaces[id]; ok {
		return ws, nil
	}
	ws := &Workspace{ID: id, Root: root}
	e.workspaces[id] = ws
	return ws, nil
}

// WorkspaceID derives a workspace's id from its absolute, symlink-free
// root: "ws_" and the first 12 hex digits of the root's SHA-256. The same
// directory gets the same id in every process and after restarts.
func WorkspaceID(root string) string {
	sum := sha256.Sum256([]byte(root))
	return "ws_" + hex.EncodeToString(sum[:6])
}

// NewSession starts a session in ws. An empty id gets a fresh one ("ses_"
// and 16 hex digits); a taken id (in memory or in the session store) is
// an ErrInvalidRequest. With Options.Sessions the session is stored
// before NewSession returns; a store failure is returned and no session
// is started.
func (e *Engine) NewSession(ws *Workspace, id string) (*Session, error) {
	if ws == nil {
		return nil, fmt.Errorf("%w: new session needs a workspace", ErrInvalidRequest)
	}
	if id == "" {
		id = newID("ses")
	}
	taken := fmt.Errorf("%w: session %s exists", ErrInvalidRequest, id)
	s := newSession(e, ws, id, time.Now())
	if st := e.opts.Sessions; st != nil {
		// The store is not called under e.mu; it refuses a stored id, and
		// the map is checked again below.
		e.mu.Lock()
		_, inMemory := e.sessions[id]
		e.mu.Unlock()
		if inMemory {
			return nil, taken
		}
		ctx, cancel := storeContext(context.Background())
		defer cancel()
		if err := st.CreateSession(ctx, s.record()); err != nil {
			return nil, fmt.Errorf("new session %s: %w", id, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sessions[id]; ok {
		return nil, taken
	}
	e.sessions[id] = s
	return s, nil
}

// Session returns the session with id. One that is not in memory is
// loaded from Options.Sessions, with its history; its event numbers go on
// from the last stored one. Errors: ErrNotFound; the store's error.
func (e *Engine) Session(id string) (*Session, error) {
	e.mu.Lock()
	s, ok := e.sessions[id]
	e.mu.Unlock()
	if ok {
		return s, nil
	}
	return e.loadSession(id)
}

// CloseSession forgets the session with id and its history, waiting for
// its running turn, if any, to end (cancel it first to not wait long);
// ctx bounds the wait. A stored session stays stored (DeleteSession
// removes it) and Session loads it again. Front-ends that run one turn per
// session (the task front-end) call it so that sessions do not accumulate.
// Errors: ErrNotFound when no session with id is in memory, ctx.Err() when
// ctx ends first.
func (e *Engine) CloseSession(ctx context.Context, id string) error {
	e.mu.Lock()
	s, ok := e.sessions[id]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	select {
	case s.turnLock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.forget(s)
	<-s.turnLock
	return nil
}

// CurrentModel is the model turns use unless their input names another.
func (e *Engine) CurrentModel() ModelRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// SetCurrentModel switches the current model, which sessions without a
// model of their own use, after checking it with CheckModel(ctx, ref,
// ForChat), whose errors it returns.
func (e *Engine) SetCurrentModel(ctx context.Context, ref ModelRef) error {
	if _, err := e.CheckModel(ctx, ref, ForChat); err != nil {
		return err
	}
	e.mu.Lock()
	e.current = ref
	e.mu.Unlock()
	return nil
}

// Providers lists the loaded provider names, sorted.
func (e *Engine) Providers() []string {
	names := make([]string, 0, len(e.opts.Models))
	for n := range e.opts.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ListModels lists the models of one provider.
func (e *Engine) ListModels(ctx context.Context, provider string) ([]ModelInfo, error) {
	m, err := e.provider(provider)
	if err != nil {
		return nil, err
	}
	return m.ListModels(ctx)
}

func (e *Engine) provider(name string) (Model, error) {
	m, ok := e.opts.Models[name]
	if !ok {
		return nil, unknownProvider(name, e.opts.Models)
	}
	return m, nil
}

// Tools lists the tools a turn offers the model: the Toolset's tools plus
// the engine's own update_plan.
func (e *Engine) Tools(ctx context.Context) ([]ToolSpec, error) {
	specs := []ToolSpec{planToolSpec}
	if e.opts.Tools == nil {
		return specs, nil
	}
	more, err := e.opts.Tools.Tools(ctx)
	for _, s := range more {
		if s.Name == planToolSpec.Name {
			e.log.Warn("a tool plugin provides update_plan; the engine's own is used", "tool", s.Name)
			continue
		}
		specs = append(specs, s)
	}
	return specs, err
}

// newID returns prefix_ and 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(errors.New("crypto/rand failed: " + err.Error()))
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}
