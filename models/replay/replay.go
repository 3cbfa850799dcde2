// Package replay is a deterministic model provider that plays recorded
// model responses from a script, for demos, tests and reproducing a
// session without a model server.
//
// The model name is the path of a JSONL script (relative paths resolve
// against the working directory; a plugin process inherits the engine's),
// so "replay:examples/replay/tour.jsonl" plays that file. Each non-blank
// line is one model response, that is one Chat call:
//
//	{"text": "...",
//	 "tool_calls": [{"name": "list_files", "arguments": {"path": "."}, "id": "optional"}],
//	 "usage": {"prompt_tokens": 120, "completion_tokens": 30},
//	 "done_reason": "stop",
//	 "delay_ms": 20,
//	 "error": {"kind": "unavailable", "message": "..."}}
//
// Every field is optional, but a line must give text, tool_calls or error
// (see Step for each field's rules). Unknown fields are errors. The whole
// script is validated when it is loaded, and errors name the file and line
// (tour.jsonl:3: ...). The file is re-read when it changes.
//
// Step selection is stateless: a call whose conversation holds N assistant
// messages plays line N+1 (the N-th step, counting from 0). A multi-turn
// session therefore walks through the script, and a restarted plugin
// process resumes where the conversation is. A call past the last step
// fails with an error naming the script and its length. An error step
// produces no assistant message, so every call that reaches it fails the
// same way: put it last.
//
// A reply streams its text in small word-sized pieces (each with the
// whitespace before it), pausing delay_ms before each piece, then its tool
// calls, then usage, then the done reason ("tool_calls" when there are
// calls, else "stop", unless done_reason says otherwise). A step without
// usage reports an estimate of about 4 characters per token: the prompt is
// all message contents and tool call arguments of the request, the
// completion the reply's text and tool calls.
//
// A text containing "{{" is a Go text/template that can cite the tool
// results of the current turn (see TemplateData), so a recorded final
// message reports real figures from real tools:
//
//	{"text": "README.md has {{ get (.Result \"read_file\") \"total_lines\" }} lines."}
//
// Embed returns deterministic hashed bag-of-words vectors of EmbedDimension
// floats, scaled to unit length, for any model name. They carry no meaning
// beyond word overlap: texts sharing words are close, synonyms are not.
//
// ListModels lists the scripts in use (the "scripts" setting, which the
// host fills with the replay models it was told to use) and the *.jsonl
// files of the directory given by the "dir" setting (default: the
// PLEXUS_REPLAY_DIR environment variable), named so that each name is a
// usable model name, with capabilities completion, tools and embedding.
// With neither, the provider is not configured (engine.ErrNotConfigured).
//
// Recorder wraps a live provider and writes each response it gives as a
// script line, so scripts can be recorded from a real model.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// ProviderName is the provider name the replay provider's errors carry.
const ProviderName = "replay"

// EnvDir names the environment variable that gives the default script
// directory for ListModels.
const EnvDir = "PLEXUS_REPLAY_DIR"

// Provider plays replay scripts. It implements engine.Model and
// plugins.Configurer and is safe for concurrent use.
type Provider struct {
	mu      sync.Mutex
	dir     string
	scripts []string                // the scripts in use, as named
	cache   map[string]cachedScript // by absolute path
}

type cachedScript struct {
	modTime time.Time
	size    int64
	script  *Script
}

var (
	_ engine.Model       = (*Provider)(nil)
	_ plugins.Configurer = (*Provider)(nil)
)

// New returns a Provider whose script directory is $PLEXUS_REPLAY_DIR
// (none when unset).
func New() *Provider {
	return &Provider{dir: os.Getenv(EnvDir), cache: map[string]cachedScript{}}
}

// Serve serves a new Provider as a model plugin; call it from main.
func Serve() { plugins.ServeModel(New()) }

// Configure applies the host's settings:
//
//	dir      the directory whose *.jsonl scripts ListModels lists; an
//	         empty value means none
//	scripts  the scripts in use (the names after "replay:" of the models
//	         the host uses), one per line, which ListModels lists by these
//	         names whatever directory they are in
//
// Unknown keys are an error.
func (p *Provider) Configure(_ context.Context, settings map[string]string) error {
	for k := range settings {
		if k != "dir" && k != "scripts" {
			return fmt.Errorf("replay: unknown setting %q; the replay provider's settings are dir (the directory of *.jsonl scripts that ListModels lists) and scripts (the scripts in use, one per line)", k)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if dir, ok := settings["dir"]; ok {
		p.dir = dir
	}
	if list, ok := settings["scripts"]; ok {
		p.scripts = nil
		for _, s := range strings.Split(list, "\n") {
			if s = strings.TrimSpace(s); s != "" {
				p.scripts = append(p.scripts, s)
			}
		}
	}
	return nil
}

// capabilities are every replay model's: it plays chat replies with tool
// calls, and embeds any text (see Embed).
var capabilities = []string{engine.CapabilityCompletion, engine.CapabilityTools, engine.CapabilityEmbedding}

// ListModels lists the scripts in use and the *.jsonl files of the script
// directory, sorted by name, each with capabilities completion, tools and
// embedding: a script in use by the name it was given (if it is a regular
// file), a file of the directory by the directory joined with its name
// (so a relative directory gives names relative to the working
// directory). The files are not validated here. Errors: with no scripts
// in use and no directory, engine.ErrNotConfigured, saying what to set; a
// directory that cannot be read, engine.ErrModelUnavailable.
func (p *Provider) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	dir, scripts := p.dir, slices.Clone(p.scripts)
	p.mu.Unlock()
	if dir == "" && len(scripts) == 0 {
		return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrNotConfigured, Message: fmt.Sprintf(
			"not configured: set %s to a directory of *.jsonl scripts to list them (any script can be used directly as replay:PATH)", EnvDir)}
	}
	out := []engine.ModelInfo{}
	seen := map[string]bool{}
	add := func(name string) {
		info, err := os.Stat(name) // follows symlinks
		if err != nil || !info.Mode().IsRegular() || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, engine.ModelInfo{Name: name, Capabilities: slices.Clone(capabilities), SizeBytes: info.Size()})
	}
	for _, s := range scripts {
		add(s)
	}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrModelUnavailable,
				Message: fmt.Sprintf("cannot list scripts in %s: %v; set the dir setting (or %s) to a directory of *.jsonl scripts", dir, unwrapPath(err), EnvDir)}
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".jsonl") {
				add(filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Chat plays the step of script req.Model selected by the number of
// assistant messages in req.Messages. Errors are *engine.ModelError:
// kind engine.ErrModelNotFound when the script does not exist,
// engine.ErrInvalidRequest when it is invalid, used up, or its text
// template fails, and the scripted kind for an error step. ctx ending
// stops the stream and returns ctx.Err().
func (p *Provider) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	script, err := p.load(req.Model)
	if err != nil {
		return err
	}
	idx := 0
	for _, m := range req.Messages {
		if m.Role == engine.RoleAssistant {
			idx++
		}
	}
	if idx >= len(script.Steps) {
		return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest, Message: fmt.Sprintf(
			"script %s has %d responses and this conversation already holds %d assistant messages, so it asks for response %d; start a new session or add lines to the script",
			script.Path, len(script.Steps), idx, idx+1)}
	}
	st := &script.Steps[idx]
	delay := time.Duration(st.DelayMS) * time.Millisecond

	if st.Error != nil {
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		return &engine.ModelError{Provider: ProviderName, Kind: st.Error.sentinel(), Message: st.Error.Message}
	}

	text, err := st.render(newTemplateData(req.Messages, idx))
	if err != nil {
		return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest,
			Message: fmt.Sprintf("%s:%d: text template: %v", script.Path, st.Line, err)}
	}
	calls := make([]engine.ToolCall, len(st.ToolCalls))
	for i, c := range st.ToolCalls {
		calls[i] = engine.ToolCall{ID: c.ID, Name: c.Name, Args: c.args()}
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%d_%d", idx+1, i+1)
		}
	}

	for _, piece := range splitPieces(text) {
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := onChunk(engine.ChatChunk{Text: piece}); err != nil {
			return err
		}
	}
	for i := range calls {
		if err := onChunk(engine.ChatChunk{ToolCall: &calls[i]}); err != nil {
			return err
		}
	}
	usage := estimateUsage(req.Messages, text, calls)
	if st.Usage != nil {
		usage = *st.Usage
	}
	if err := onChunk(engine.ChatChunk{Usage: &usage}); err != nil {
		return err
	}
	done := st.DoneReason
	if done == "" {
		done = defaultDoneReason(len(calls))
	}
	return onChunk(engine.ChatChunk{DoneReason: done})
}

func defaultDoneReason(calls int) string {
	if calls > 0 {
		return "tool_calls"
	}
	return "stop"
}

// Embed returns one EmbedDimension-long hashed bag-of-words vector per
// input, in input order, for any req.Model; see the package doc.
// PromptTokens is estimated at 4 characters per token.
func (p *Provider) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	if err := ctx.Err(); err != nil {
		return engine.EmbedResponse{}, err
	}
	out := engine.EmbedResponse{Vectors: make([][]float32, len(req.Inputs))}
	chars := 0
	for i, in := range req.Inputs {
		out.Vectors[i] = embedText(in)
		chars += len(in)
	}
	out.PromptTokens = estimateTokens(chars)
	return out, nil
}

// load returns the validated script at path, from the cache while the
// file's size and modification time are unchanged.
func (p *Provider) load(path string) (*Script, error) {
	if strings.TrimSpace(path) == "" {
		return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest,
			Message: "no script given: the replay model name is the path of a JSONL script, for example replay:examples/replay/tour.jsonl"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest, Message: fmt.Sprintf("script %s: %v", path, err)}
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, notFound(path, abs, err)
	}
	if info.IsDir() {
		return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrModelNotFound,
			Message: fmt.Sprintf("script %s is a directory; name a .jsonl file in it (the replay model name is the path of a JSONL script)", path)}
	}
	p.mu.Lock()
	c, ok := p.cache[abs]
	p.mu.Unlock()
	if ok && c.size == info.Size() && c.modTime.Equal(info.ModTime()) && c.script.Path == path {
		return c.script, nil
	}
	s, err := LoadScript(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notFound(path, abs, err)
		}
		return nil, &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest, Message: err.Error()}
	}
	p.mu.Lock()
	p.cache[abs] = cachedScript{modTime: info.ModTime(), size: info.Size(), script: s}
	p.mu.Unlock()
	return s, nil
}

func notFound(path, abs string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrInvalidRequest,
			Message: fmt.Sprintf("cannot read script %s: %v", path, unwrapPath(err))}
	}
	msg := fmt.Sprintf("script %s not found", path)
	if abs != path {
		msg += fmt.Sprintf(" (looked for %s)", abs)
	}
	msg += "; the replay model name is the path of a JSONL script, relative to the engine's working directory, for example replay:examples/replay/tour.jsonl"
	return &engine.ModelError{Provider: ProviderName, Kind: engine.ErrModelNotFound, Message: msg}
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
