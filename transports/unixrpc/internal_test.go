package unixrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/plexus-agent/plexus/engine"
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

// TestSuggestBounded: long words and a long history cost bounded memory
// (editDistance used to allocate a len(a)×len(b) table: two 8,000-byte
// words took 512 MB).
func TestSuggestBounded(t *testing.T) {
	ok, notFound := 0, 127
	cmd := func(c string, exit int) recentCommand { e := exit; return recentCommand{Command: c, ExitCode: &e} }
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	var cmds []recentCommand
	for i := 0; i < 2000; i++ {
		cmds = append(cmds, cmd(long('a', 4000)+long('b', i%3)+" x", ok))
	}
	cmds = append(cmds, cmd(long('a', 4001)+" x", notFound))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	suggestCommand(cmds, "sh: command not found")
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("suggestCommand allocated %d MB for long words", got>>20)
	}
	// The bounds keep the rules: a typo within reach is still found.
	cmds = append(cmds[:0], cmd("frobnicate get pods", ok))
	for i := 0; i < 100; i++ {
		cmds = append(cmds, cmd(long('z', 10000), ok))
	}
	cmds = append(cmds, cmd("frobnciate get pods", notFound))
	if s, _ := suggestCommand(cmds, "frobnciate: command not found"); s.Suggestion != "" {
		t.Errorf("a command older than the last 50 was used: %+v", s)
	}
	cmds = append(cmds[len(cmds)-10:len(cmds)-1], cmd("frobnicate get pods", ok), cmd("frobnciate get pods", notFound))
	if s, _ := suggestCommand(cmds, "frobnciate: command not found"); s.Suggestion != "frobnicate get pods" {
		t.Errorf("typo correction: %+v", s)
	}
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"gti", "git", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}, {"ab", "ba", 1}, {"héllo", "hlélo", 1}} {
		if got := editDistance(tt.a, tt.b); got != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// TestListenStaleRace: while one Listen removes a stale socket, another
// starting on the same path must not have its live socket removed: the
// second waits for the first and then finds it running.
func TestListenStaleRace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "race.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // stale
	type res struct {
		ln  net.Listener
		err error
	}
	second := make(chan res, 1)
	var hooked atomic.Bool
	testHookStale = func() {
		if hooked.Swap(true) {
			return
		}
		func() {
			// Another server starts while this one is between its
			// probe and the removal.
			go func() {
				ln, err := Listen(p)
				second <- res{ln, err}
			}()
			select {
			case r := <-second:
				second <- r
			case <-time.After(300 * time.Millisecond):
			}
		}()
	}
	defer func() { testHookStale = nil }()
	first, err1 := Listen(p)
	var r res
	select {
	case r = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second Listen did not return")
	}
	for _, ln := range []net.Listener{first, r.ln} {
		if ln != nil {
			defer ln.Close()
		}
	}
	if (err1 == nil) == (r.err == nil) {
		t.Fatalf("both or neither Listen succeeded: %v, %v", err1, r.err)
	}
	if err1 != nil || !errors.Is(r.err, ErrServerRunning) {
		t.Fatalf("first: %v; second: %v (want ErrServerRunning)", err1, r.err)
	}
	// The socket at the path is the first listener's, and answers.
	go func() {
		if c, err := first.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.DialTimeout("unix", p, time.Second)
	if err != nil {
		t.Fatalf("the live socket does not answer: %v", err)
	}
	c.Close()
}

// flakyModel lists its models after a pause, failing when its context
// ends first or while fail is set.
type flakyModel struct {
	engine.Model
	fail  atomic.Bool
	calls atomic.Int32
}

func (m *flakyModel) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	m.calls.Add(1)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(20 * time.Millisecond):
	}
	if m.fail.Load() {
		return nil, errors.New("provider down")
	}
	return []engine.ModelInfo{{Name: "m1"}}, nil
}

// TestModelEntriesCache: a listing is not cut short by the asking
// client's context; one with a failed provider is served but listed again
// soon, in the background; a complete one is cached.
func TestModelEntriesCache(t *testing.T) {
	m := &flakyModel{}
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"p": m}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Engine: eng, Workspace: &engine.Workspace{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	has := func(es []modelEntry) bool {
		return len(es) == 1 && es[0].Name == "p:m1"
	}
	// The client disconnects while the models are listed.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	if es := s.modelEntries(ctx); !has(es) {
		t.Errorf("listing under a cancelled request: %+v", es)
	}
	if es := s.modelEntries(context.Background()); !has(es) {
		t.Errorf("next listing: %+v", es)
	}
	// A list with a failed provider is served, and listed again in the
	// background once it is modelsPartialTTL old.
	s2, _ := New(Options{Engine: eng, Workspace: &engine.Workspace{Root: t.TempDir()}})
	m.fail.Store(true)
	if es := s2.modelEntries(context.Background()); len(es) != 0 {
		t.Errorf("failed listing: %+v", es)
	}
	m.fail.Store(false)
	s2.modelsMu.Lock()
	s2.modelsAt = time.Now().Add(-modelsPartialTTL - time.Second)
	s2.modelsMu.Unlock()
	if es := s2.modelEntries(context.Background()); len(es) != 0 {
		t.Errorf("the stale list was not served at once: %+v", es)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !has(s2.modelEntries(context.Background())) {
		if time.Now().After(deadline) {
			t.Fatal("the partial list was not listed again in the background")
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := m.calls.Load()
	s2.modelEntries(context.Background())
	if m.calls.Load() != n {
		t.Error("a complete listing was not cached")
	}
}

// hungModel's ListModels ignores its context and blocks until release.
type hungModel struct {
	engine.Model
	release chan struct{}
	calls   atomic.Int32
}

func (m *hungModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	m.calls.Add(1)
	<-m.release
	return nil, errors.New("released")
}

// TestModelEntriesHungProvider: a provider that ignores its context does
// not hold the first listing (which ends at modelsTimeout with the other
// provider listed), and stale lists start one background refresh at a
// time.
func TestModelEntriesHungProvider(t *testing.T) {
	hung := &hungModel{release: make(chan struct{})}
	defer close(hung.release)
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"hung": hung, "p": &flakyModel{}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Engine: eng, Workspace: &engine.Workspace{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	// The hung provider answers only when the test ends: that the
	// listing returns at all shows it waited for its own timer, not for
	// the provider (no bound on how long that took: the machine may be
	// loaded).
	es := s.modelEntries(context.Background())
	if len(es) != 1 || es[0].Name != "p:m1" {
		t.Errorf("models %+v", es)
	}
	s.modelsMu.Lock()
	s.modelsAt = time.Now().Add(-time.Hour)
	s.modelsMu.Unlock()
	for range 20 {
		s.modelEntries(context.Background()) // served from the stale list
	}
	time.Sleep(50 * time.Millisecond)
	if n := hung.calls.Load(); n > 2 {
		t.Errorf("%d listings of the hung provider; stale lists must start one refresh at a time", n)
	}
}

// unconfiguredModel is a provider that lacks configuration.
type unconfiguredModel struct {
	engine.Model
	calls atomic.Int32
}

func (m *unconfiguredModel) ListModels(context.Context) ([]engine.ModelInfo, error) {
	m.calls.Add(1)
	return nil, &engine.ModelError{Provider: "openai", Kind: engine.ErrNotConfigured, Message: "not configured: set OPENAI_API_KEY"}
}

// TestModelEntriesNotConfigured: a provider that is not configured is left
// out of initialize's models without making the list partial, so the
// list is cached rather than asked for again within modelsPartialTTL.
func TestModelEntriesNotConfigured(t *testing.T) {
	nc := &unconfiguredModel{}
	eng, err := engine.New(engine.Options{Models: map[string]engine.Model{"openai": nc, "p": &flakyModel{}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Engine: eng, Workspace: &engine.Workspace{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if es := s.modelEntries(context.Background()); len(es) != 1 || es[0].Name != "p:m1" {
		t.Errorf("models %+v", es)
	}
	s.modelsMu.Lock()
	partial := s.modelsPartial
	s.modelsMu.Unlock()
	if partial {
		t.Error("a provider that is not configured made the list partial")
	}
}

// TestRateLimitArrivalOrder: with the clock stopped, of requests sent back
// to back the first ones (as many as the burst) are passed on and the
// later ones refused, in arrival order, the rate limit being taken as each
// line is read; a refused request never reaches the handlers.
func TestRateLimitArrivalOrder(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	w := newWire(server, 1<<20, 5, 0, slog.New(slog.DiscardHandler), nil)
	stopped := time.Now()
	w.now = func() time.Time { return stopped }
	const n = 9
	go func() {
		for i := range n {
			fmt.Fprintf(client, `{"jsonrpc":"2.0","id":%d,"method":"context.update","params":{}}`+"\n", i+1)
		}
	}()
	refused := make(chan string, n)
	go func() {
		r := bufio.NewReader(client)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error struct{ Data struct{ Reason string } }
			}
			json.Unmarshal(line, &m)
			if m.Error.Data.Reason == reasonRateLimited {
				refused <- string(m.ID)
			}
		}
	}()
	var passed []string
	for len(passed) < 5 {
		line, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ ID json.RawMessage }
		json.Unmarshal(line, &m)
		passed = append(passed, string(m.ID))
	}
	if got := strings.Join(passed, ","); got != "1,2,3,4,5" {
		t.Errorf("passed on %s, want the first five", got)
	}
	// The next Recv reads the rest and refuses each (then waits for more
	// until the client closes).
	recvDone := make(chan []byte, 1)
	go func() {
		line, _ := w.Recv()
		recvDone <- line
	}()
	var got []string
	for len(got) < n-5 {
		select {
		case id := <-refused:
			got = append(got, id)
		case line := <-recvDone:
			t.Fatalf("a request over the limit was passed on: %s", line)
		case <-time.After(time.Minute):
			t.Fatalf("refused %v, then nothing", got)
		}
	}
	if strings.Join(got, ",") != "6,7,8,9" {
		t.Errorf("refused %v, want 6,7,8,9", got)
	}
	client.Close()
	if line := <-recvDone; line != nil {
		t.Errorf("a request over the limit was passed on: %s", line)
	}
}
