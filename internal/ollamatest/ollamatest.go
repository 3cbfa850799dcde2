// Package ollamatest runs a real Ollama server for tests, offline, with tiny
// generated models, so that code talking to Ollama is tested against the
// real thing instead of a mock.
//
// Start runs one server for one test and stops it when the test ends.
// Shared runs one server for the whole test binary; it needs TestMain to
// call Main, which stops the server when the tests are done:
//
//	func TestMain(m *testing.M) { ollamatest.Main(m) }
//
//	func TestChat(t *testing.T) {
//		srv := ollamatest.Shared(t)
//		// talk to srv.URL, using srv.ToolsModel, srv.ChatModel, srv.EmbedModel
//	}
//
// The ollama binary is looked up on PATH, then in $(go env GOBIN) and
// $(go env GOPATH)/bin. When it is missing the test is skipped with a
// message naming the install command (InstallCommand), unless the
// environment variable PLEXUS_REQUIRE_OLLAMA is 1 (CI sets it), in which
// case the test fails.
//
// The server runs as `ollama serve` on a free 127.0.0.1 port with a
// temporary HOME and OLLAMA_MODELS and no OLLAMA_* settings of the caller,
// in its own process group. Stopping it sends SIGTERM, waits for it to
// exit, then checks that no runner process of its group outlived it (any
// that did is killed and reported as an error). If the test binary dies
// first, Linux sends the server SIGTERM (parent-death signal), so a killed
// `go test` leaves nothing behind either.
//
// The models are random llama-architecture GGUF files of about 0.35 MB,
// written by this package with github.com/ollama/ollama/fs/ggml from a
// fixed seed, so every run sees the same weights (the two chat models share
// them). Hidden dimension 0 is a constant channel that acts as a per-token
// logit bias, and a chain of token-specific dimensions makes greedy
// decoding write Reply and stop (done_reason "stop"). Under a JSON-schema
// `format` the same biases close strings and objects, so constrained
// replies are short valid JSON; with tools and a format of the shape
// ToolCallFormat returns, Ollama parses the reply into real tool_calls.
//
// The vocabulary has one token per printable ASCII character and one for
// the space; anything else is one byte token per UTF-8 byte. No two tokens
// merge, so the prompt_eval_count of two prompts differs exactly by the
// difference of their lengths in bytes, which lets a test check what
// reached the prompt. Loading a model takes about 0.25 s and 40 MB.
//
// The models are verified with Ollama 0.6.5 (VerifiedVersion); with another
// server version Start and Shared log a note, since other versions may
// report capabilities and errors differently.
package ollamatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

// InstallCommand installs the Ollama server these tests are verified with
// (about 2.5 minutes to build; needs a C compiler).
const InstallCommand = `CGO_ENABLED=1 go install -ldflags "-X github.com/ollama/ollama/version.Version=0.6.5" github.com/ollama/ollama@v0.6.5`

// VerifiedVersion is the Ollama version the generated models, and the tests
// built on them, are verified with.
const VerifiedVersion = "0.6.5"

// EnvRequire names the environment variable that, when "1", turns a missing
// ollama binary from a skipped test into a failed one.
const EnvRequire = "PLEXUS_REQUIRE_OLLAMA"

// Names of the models every Server has, as /api/tags lists them.
const (
	// ToolsModel is a chat model whose template uses {{ .Tools }}, so
	// Ollama reports the "completion" and "tools" capabilities and accepts
	// tools in /api/chat. Its template renders tool calls as
	// {"name": ..., "arguments": {...}}, which is what lets Ollama parse
	// them out of a reply.
	ToolsModel = "plexus-tools:latest"
	// ChatModel has the same weights (in a separate blob) and a template
	// without tools: it reports only "completion", and /api/chat with
	// tools fails with HTTP 400 `... does not support tools`.
	ChatModel = "plexus-chat:latest"
	// EmbedModel declares mean pooling, so Ollama reports only the
	// "embedding" capability; /api/embed returns EmbeddingLength floats per
	// input and /api/chat fails with HTTP 400 `... does not support chat`.
	// (Ollama 0.6.5 embeds with any model, ToolsModel and ChatModel
	// included.)
	EmbedModel = "plexus-embed:latest"
)

// Server is a running `ollama serve`. Its fields are read-only.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT, with no
	// trailing slash.
	URL string
	// Version is the version the server reports on /api/version ("0.6.5";
	// "0.0.0" for a build without the -ldflags of InstallCommand).
	Version string
	// ToolsModel, ChatModel and EmbedModel are the constants of the same
	// names, here for convenience.
	ToolsModel, ChatModel, EmbedModel string
	// LogFile is the path of the server's combined stdout and stderr. It
	// is removed with the server's directory when the server stops.
	LogFile string

	dir      string
	proc     *process
	stopOnce sync.Once
	stopErr  error
}

// Start runs a new server for tb and stops it in tb's cleanup, failing tb if
// it does not stop cleanly. It skips tb (or fails it, see EnvRequire) when
// the ollama binary is missing and fails tb when the server does not start.
// Starting takes about 0.2 s; stopping takes 1 to 3 s once models were
// loaded, so prefer Shared where tests can share a server.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findOllama()
	if err != nil {
		skipOrFail(tb, err)
	}
	dir, err := os.MkdirTemp("", "ollamatest-")
	if err != nil {
		tb.Fatalf("ollamatest: %v", err)
	}
	s, err := start(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatalf("ollamatest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("ollamatest: %v", err)
		}
	})
	s.noteVersion(tb)
	return s
}

// noteVersion logs that the server is not the verified version.
func (s *Server) noteVersion(tb testing.TB) {
	tb.Helper()
	if s.Version != VerifiedVersion {
		tb.Logf("ollamatest: the server is Ollama %q; these models and tests are verified with %s (install it with %s)", s.Version, VerifiedVersion, InstallCommand)
	}
}

var shared struct {
	mu     sync.Mutex
	inMain bool
	srv    *Server
	err    error // the first start's error, reported to every caller
	skip   error // the ollama binary is missing
}

// Shared returns the test binary's shared server, starting it on first use.
// TestMain must run the tests through Main, which stops the server; Shared
// fails tb otherwise. Missing binary and start failures are reported to
// every caller, as Start does; a failed start is not retried. Tests that
// share the server must not depend on which models are loaded.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		tb.Fatal("ollamatest: Shared needs TestMain to run the tests with ollamatest.Main(m), which stops the shared server; or use ollamatest.Start")
	}
	if shared.srv == nil && shared.err == nil && shared.skip == nil {
		bin, err := findOllama()
		if err != nil {
			shared.skip = err
		} else {
			dir, err := os.MkdirTemp("", "ollamatest-")
			if err == nil {
				shared.srv, err = start(bin, dir)
				if err != nil {
					os.RemoveAll(dir)
				} else {
					shared.srv.noteVersion(tb)
				}
			}
			shared.err = err
		}
	}
	if shared.skip != nil {
		skipOrFail(tb, shared.skip)
	}
	if shared.err != nil {
		tb.Fatalf("ollamatest: shared server: %v", shared.err)
	}
	return shared.srv
}

// Main runs m's tests, stops the shared server if Shared started one, and
// exits with the tests' status (1 if they passed but the server did not
// stop cleanly). Call it from TestMain.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.srv = nil
	shared.mu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "ollamatest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Stop stops the server: SIGTERM, a wait of up to 30 s for it to exit, then
// up to 10 s for its runner processes to exit. Processes still alive after
// that are killed and reported in the error, as is a server that had to be
// killed. Stop removes the server's directory (models, HOME, log). Calls
// after the first return the first one's result; Start and Main call it for
// you.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		err := s.proc.stop(30*time.Second, 10*time.Second)
		if err != nil {
			err = fmt.Errorf("stop ollama serve (%s): %w\n%s", s.URL, err, tail(s.LogFile))
		}
		if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
			err = rmErr
		}
		s.stopErr = err
	})
	return s.stopErr
}

// Client returns an Ollama API client for the server.
func (s *Server) Client() *api.Client {
	u, _ := url.Parse(s.URL)
	return api.NewClient(u, &http.Client{})
}

// ToolCallFormat returns the JSON Schema to send as `format` together with
// tools so that any model, these tiny ones included, replies with a call of
// one of the named tools whose arguments match argumentsSchema (an object
// schema; nil means any object):
//
//	{"type": "object", "required": ["name", "arguments"], "properties": {
//	  "name": {"enum": names}, "arguments": argumentsSchema}}
//
// Ollama parses such a reply into tool_calls when the model's template
// renders tool calls as {"name": ..., "arguments": ...}, as ToolsModel's
// does.
func ToolCallFormat(argumentsSchema json.RawMessage, names ...string) json.RawMessage {
	if len(argumentsSchema) == 0 {
		argumentsSchema = json.RawMessage(`{"type":"object"}`)
	}
	b, err := json.Marshal(map[string]any{
		"type":     "object",
		"required": []string{"name", "arguments"},
		"properties": map[string]any{
			"name":      map[string]any{"enum": names},
			"arguments": argumentsSchema,
		},
	})
	if err != nil {
		panic(fmt.Sprintf("ollamatest.ToolCallFormat: arguments schema is not JSON: %v", err))
	}
	return b
}

// errMissing reports that no ollama binary was found.
type errMissing struct{ looked []string }

func (e *errMissing) Error() string {
	return fmt.Sprintf("no ollama binary on PATH or in %s; install the Ollama server these tests use with\n\t%s\n(about 2.5 minutes), or set %s=1 to make its absence a failure",
		strings.Join(e.looked, ", "), InstallCommand, EnvRequire)
}

func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("ollamatest: %v (%s=1 requires it)", err, EnvRequire)
	}
	tb.Skipf("ollamatest: %v", err)
}

// findOllama returns the path of the ollama binary: on PATH, else in
// $(go env GOBIN), else in each $(go env GOPATH)/bin. Without a go command
// it uses $GOBIN, $GOPATH and $HOME/go instead.
func findOllama() (string, error) {
	if err := platformError(); err != nil {
		return "", err
	}
	if p, err := exec.LookPath("ollama"); err == nil {
		return p, nil
	}
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) == 2 {
			if lines[0] != "" {
				dirs = append(dirs, lines[0])
			}
			for _, p := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
	}
	if dirs == nil {
		if gobin := os.Getenv("GOBIN"); gobin != "" {
			dirs = append(dirs, gobin)
		}
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			if home, err := os.UserHomeDir(); err == nil {
				gopath = filepath.Join(home, "go")
			}
		}
		for _, p := range filepath.SplitList(gopath) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "ollama")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &errMissing{looked: dirs}
}

// start runs `ollama serve` with its state in dir and creates the models.
// On error nothing is left running.
func start(bin, dir string) (*Server, error) {
	s := &Server{
		dir: dir, LogFile: filepath.Join(dir, "server.log"),
		ToolsModel: ToolsModel, ChatModel: ChatModel, EmbedModel: EmbedModel,
	}
	home, models := filepath.Join(dir, "home"), filepath.Join(dir, "models")
	for _, d := range []string{home, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// A free port can be taken between our probe and the server's bind;
	// try a few.
	var err error
	for range 3 {
		var port int
		port, err = freePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		s.URL = "http://" + addr
		env := append(environWithoutOllama(), "HOME="+home, "OLLAMA_HOST="+addr, "OLLAMA_MODELS="+models)
		s.proc, err = startProcess(bin, []string{"serve"}, env, s.LogFile)
		if err != nil {
			return nil, err
		}
		if err = s.waitReady(30 * time.Second); err == nil {
			break
		}
		stopErr := s.proc.stop(10*time.Second, 10*time.Second)
		err = errors.Join(err, stopErr)
		if !strings.Contains(tail(s.LogFile), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("start %s serve: %w\n%s", bin, err, tail(s.LogFile))
	}
	if err := s.createModels(); err != nil {
		stopErr := s.proc.stop(30*time.Second, 10*time.Second)
		return nil, fmt.Errorf("create models on %s: %w\n%s", s.URL, errors.Join(err, stopErr), tail(s.LogFile))
	}
	return s, nil
}

// waitReady polls /api/version until the server answers, it exits, or
// timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := s.Client()
	for {
		v, err := client.Version(ctx)
		if err == nil {
			s.Version = v
			return nil
		}
		select {
		case <-s.proc.done:
			return fmt.Errorf("ollama serve exited before it was ready: %v", s.proc.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("ollama serve was not ready after %v: %v", timeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The model templates. Messages render as "<|role|>\ncontent\n"; the reply
// starts after "<|assistant|>\n". toolsTemplate also lists the tools as
// JSON and renders an assistant's tool calls as one JSON object per line,
// the shape Ollama's tool call parser learns from the template.
const (
	toolsTemplate = `{{- if .Tools }}<|tools|>
{{ .Tools }}
{{ end }}
{{- range .Messages }}<|{{ .Role }}|>
{{ if .ToolCalls }}{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{ end }}{{ else }}{{ .Content }}
{{ end }}
{{- end }}<|assistant|>
`
	chatTemplate = `{{- range .Messages }}<|{{ .Role }}|>
{{ .Content }}
{{ end }}<|assistant|>
`
	// defaultNumPredict caps replies of callers that set no num_predict.
	defaultNumPredict = 128
)

// createModels writes the two GGUF files, uploads them as blobs and creates
// the three models.
func (s *Server) createModels() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := s.Client()
	upload := func(name string, spec modelSpec) (string, error) {
		path := filepath.Join(s.dir, name)
		if err := writeModel(path, spec); err != nil {
			return "", err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if err := client.CreateBlob(ctx, digest, bytes.NewReader(data)); err != nil {
			return "", fmt.Errorf("upload %s: %w", name, err)
		}
		return digest, nil
	}
	// Three blobs: Ollama keys loaded runners by blob, and /api/ps would
	// name a runner shared by two models after the first one that used it.
	tools, err := upload("tools.gguf", modelSpec{name: "plexus-tools"})
	if err != nil {
		return err
	}
	chat, err := upload("chat.gguf", modelSpec{name: "plexus-chat"})
	if err != nil {
		return err
	}
	embed, err := upload("embed.gguf", modelSpec{name: "plexus-embed", embedding: true})
	if err != nil {
		return err
	}
	stream := false
	// One thread: the models are tiny, and on a busy machine ggml's
	// spinning worker threads make a second thread cost more than it gives.
	params := map[string]any{"num_predict": defaultNumPredict, "num_thread": 1}
	for _, req := range []*api.CreateRequest{
		{Model: ToolsModel, Files: map[string]string{"model.gguf": tools}, Template: toolsTemplate, Parameters: params},
		{Model: ChatModel, Files: map[string]string{"model.gguf": chat}, Template: chatTemplate, Parameters: params},
		{Model: EmbedModel, Files: map[string]string{"model.gguf": embed}, Parameters: map[string]any{"num_thread": 1}},
	} {
		req.Stream = &stream
		if err := client.Create(ctx, req, func(api.ProgressResponse) error { return nil }); err != nil {
			return fmt.Errorf("create %s: %w", req.Model, err)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// environWithoutOllama is the test process's environment without OLLAMA_*
// variables, so a developer's Ollama settings cannot leak into the server.
func environWithoutOllama() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OLLAMA_") {
			env = append(env, kv)
		}
	}
	return env
}

// tail returns the last lines of the server log, for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "last lines of the server log:\n\t" + strings.Join(lines, "\n\t")
}
