package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/internal/ollamatest"
)

// These tests run the real plexus binary as a user would: built once, its
// built-in plugins re-executed as separate processes, on real files.

var (
	plexusBin string // the binary under test
	repoRoot  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plexus-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	plexusBin = filepath.Join(dir, "plexus")
	if bin := os.Getenv(testBinEnv); bin != "" {
		plexusBin = bin // built by the parent test process
	} else if out, err := exec.Command("go", "build", "-o", plexusBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build plexus: %v\n%s", err, out)
		os.Exit(1)
	}
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	ollamatest.Main(m)
}

type result struct {
	stdout, stderr string
	code           int
}

// plexus runs the binary in dir with args and stdin, with a private plugin
// directory unless PLEXUS_PLUGIN_PATH is in env.
func plexus(t *testing.T, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	// The per-user search server that plexus search starts would outlive
	// the command; search_test.go tests it.
	full := append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir(), "PLEXUS_MODEL=", "OLLAMA_HOST=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=",
		"PLEXUS_SEARCH_SERVER=off")
	r := runIn(t, 2*time.Minute, dir, append(full, env...), stdin, plexusBin, args...)
	t.Cleanup(func() { noProcessesLeft(t, plexusBin) })
	return r
}

// runIn runs name with args in dir, with exactly the environment env and
// stdin, for at most timeout, and returns its output and exit code; a
// command that cannot be started fails t.
func runIn(t *testing.T, timeout time.Duration, dir string, env []string, stdin, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// processes lists live processes whose argv[0] is exe, with their argv.
func processes(exe string) map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if argv[0] == exe && !zombie(pid) {
			out[pid] = argv
		}
	}
	return out
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z' || b[i+2] == 'X'
}

// noProcessesLeft fails t if any process of exe is still running shortly
// after the command under test exited.
func noProcessesLeft(t *testing.T, exe string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processes(exe)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left behind: %v", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunTourOnThisRepository(t *testing.T) {
	r := plexus(t, repoRoot, "", nil, "run", "--model", "replay:examples/replay/tour.jsonl", "Give me a tour of this repository")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"Plan:\n  1. ", "✓ list_files", "✓ read_file", "✓ search_text", "— completed · ", "4 tool calls", "· symbol_search: ", "· reranking: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "✓") {
		t.Errorf("tool lines leaked into stdout:\n%s", r.stdout)
	}
	// The final message quotes figures from the real tool results.
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(readme), "\n")
	if !strings.Contains(r.stdout, strconv.Itoa(lines)) {
		t.Errorf("the answer does not quote README.md's %d lines:\n%s", lines, r.stdout)
	}
}

// ndjsonLines parses stdout lines and checks each is one JSON object.
func ndjsonLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line is not a JSON object: %q (%v)", line, err)
		}
		out = append(out, m)
	}
	return out
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return strings.Join(ks, ",")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestServeNDJSONTour(t *testing.T) {
	r := plexus(t, repoRoot, `{"id":"1","kind":"user_message","message":"Give me a tour"}`+"\n", nil,
		"serve", "--transport", "ndjson", "--model", "replay:examples/replay/tour.jsonl")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := ndjsonLines(t, r.stdout)
	ready := lines[0]
	if keys(ready) != "capabilities,timestamp,type,version" || ready["type"] != "ready" || ready["version"] != "1.0.0" {
		t.Errorf("ready = %v", ready)
	}
	wantKeys := map[string]string{
		"token":       "id,timestamp,token,type",
		"tool_use":    "data,id,timestamp,type",
		"tool_result": "data,id,timestamp,type",
		"done":        "id,timestamp,type",
	}
	uses := map[string]string{}
	var types []string
	for _, l := range lines[1:] {
		typ, _ := l["type"].(string)
		if keys(l) != wantKeys[typ] || l["id"] != "1" {
			t.Errorf("line %v: keys %s, want %s", l, keys(l), wantKeys[typ])
		}
		if _, ok := l["timestamp"].(float64); !ok {
			t.Errorf("timestamp not a number: %v", l)
		}
		data, _ := l["data"].(map[string]any)
		switch typ {
		case "tool_use":
			if keys(data) != "input,toolId,toolName" {
				t.Errorf("tool_use data keys %s", keys(data))
			}
			uses[data["toolId"].(string)] = data["toolName"].(string)
		case "tool_result":
			if keys(data) != "result,toolId,toolName" || uses[data["toolId"].(string)] != data["toolName"] {
				t.Errorf("tool_result %v does not follow its tool_use", data)
			}
			if data["toolName"] == "list_files" {
				files, _ := data["result"].(map[string]any)["files"].([]any)
				found := false
				for _, f := range files {
					found = found || f == "README.md"
				}
				if !found {
					t.Errorf("list_files result lacks README.md: %v", data["result"])
				}
			}
		}
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
	}
	if types[len(types)-1] != "done" || len(uses) != 4 {
		t.Errorf("sequence %v with %d tool calls", types, len(uses))
	}
	if !strings.Contains(strings.Join(types, " "), "token") {
		t.Errorf("no tokens: %v", types)
	}
}

// ndjsonSession drives `plexus serve --transport ndjson` interactively.
type ndjsonSession struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	lines  chan map[string]any
	stderr *bytes.Buffer
}

func startNDJSON(t *testing.T, dir string, args ...string) *ndjsonSession {
	t.Helper()
	cmd := exec.Command(plexusBin, append([]string{"serve", "--transport", "ndjson"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+t.TempDir(), "PLEXUS_DATA_DIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &ndjsonSession{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 1000), stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"type": "NOT JSON", "line": sc.Text()}
			}
			s.lines <- m
		}
		close(s.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return s
}

func (s *ndjsonSession) send(line string) {
	if _, err := s.stdin.Write([]byte(line + "\n")); err != nil {
		s.t.Fatal(err)
	}
}

// until reads lines until one satisfies stop, returning all read.
func (s *ndjsonSession) until(stop func(map[string]any) bool) []map[string]any {
	s.t.Helper()
	var got []map[string]any
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout closed after %v\nstderr:\n%s", got, s.stderr)
			}
			got = append(got, l)
			if stop(l) {
				return got
			}
		case <-timeout:
			s.t.Fatalf("timed out; read %v\nstderr:\n%s", got, s.stderr)
		}
	}
}

func isType(typ string) func(map[string]any) bool {
	return func(l map[string]any) bool { return l["type"] == typ }
}

func terminal(l map[string]any) bool { return l["type"] == "done" || l["type"] == "error" }

// shellPluginPid finds the shell tool plugin started by parent.
func shellPluginPid(t *testing.T, parent int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for pid, argv := range processes(plexusBin) {
			if strings.Join(argv[1:], " ") == "plugin serve tool shell" && ppid(pid) == parent {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no shell plugin process found")
	return 0
}

func ppid(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

// TestKillToolPluginDuringCall kills the shell plugin while run_command
// runs: that call's tool_result carries the crash, and the next call in the
// same session succeeds on the restarted plugin. Nothing is left running.
func TestKillToolPluginDuringCall(t *testing.T) {
	ws := t.TempDir()
	s := startNDJSON(t, ws, "--approve-all", "--model", "replay:"+filepath.Join(repoRoot, "cmd/plexus/testdata/kill.jsonl"))
	s.until(isType("ready"))
	s.send(`{"id":"a","kind":"user_message","message":"run the long command","metadata":{"conversationId":"c1"}}`)
	s.until(func(l map[string]any) bool {
		d, _ := l["data"].(map[string]any)
		return l["type"] == "tool_use" && d["toolId"] == "call_long"
	})
	victim := shellPluginPid(t, s.cmd.Process.Pid)
	time.Sleep(200 * time.Millisecond) // let sleep start inside the plugin
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := s.until(terminal)
	var crash map[string]any
	for _, l := range got {
		if d, _ := l["data"].(map[string]any); l["type"] == "tool_result" && d["toolId"] == "call_long" {
			crash, _ = d["result"].(map[string]any)
		}
	}
	if crash == nil || crash["code"] != "plugin_crashed" || !strings.Contains(crash["error"].(string), `tool plugin "shell" exited during run_command`) {
		t.Fatalf("crash result = %v (lines %v)", crash, got)
	}
	if last := got[len(got)-1]; last["type"] != "done" || last["id"] != "a" {
		t.Fatalf("first request ended with %v", last)
	}

	s.send(`{"id":"b","kind":"user_message","message":"try again","metadata":{"conversationId":"c1"}}`)
	got = s.until(terminal)
	var again map[string]any
	for _, l := range got {
		if d, _ := l["data"].(map[string]any); l["type"] == "tool_result" && d["toolId"] == "call_again" {
			again, _ = d["result"].(map[string]any)
		}
	}
	if again == nil || again["exit_code"] != float64(0) || again["stdout"] != "recovered\n" {
		t.Fatalf("call after the crash: %v (lines %v)", again, got)
	}
	if got[len(got)-1]["type"] != "done" {
		t.Fatalf("second request ended with %v", got[len(got)-1])
	}
	if pid := shellPluginPid(t, s.cmd.Process.Pid); pid == victim {
		t.Error("the shell plugin was not restarted")
	}
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v\n%s", err, s.stderr)
	}
	noProcessesLeft(t, plexusBin)
	// The killed call's command (its exact arguments, so other tests'
	// sleeps do not count).
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processes("sleep")
		for pid, argv := range left {
			if strings.Join(argv, " ") != "sleep 29.25" {
				delete(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed call's command is still running: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeStopsOnSIGTERM: a running turn ends with one error line and the
// server exits 0, leaving no plugin process behind.
func TestServeStopsOnSIGTERM(t *testing.T) {
	s := startNDJSON(t, t.TempDir(), "--model", "replay:"+filepath.Join(repoRoot, "cmd/plexus/testdata/slow.jsonl"))
	s.until(isType("ready"))
	s.send(`{"id":"slow","kind":"user_message","message":"count slowly"}`)
	s.until(isType("token"))
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := s.until(terminal)
	if l := got[len(got)-1]; l["type"] != "error" || l["id"] != "slow" {
		t.Errorf("last line %v", l)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, s.stderr)
	}
	noProcessesLeft(t, plexusBin)
}

// TestPathEscapesRefused sends read_file and write_file at paths outside
// the workspace (through .. and through a symlink) across the plugin
// boundary: all four are refused and nothing is written outside.
func TestPathEscapesRefused(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	r := plexus(t, ws, `{"id":"1","kind":"user_message","message":"escape"}`+"\n", nil,
		"serve", "--transport", "ndjson", "--approve-all", "--model", "replay:"+filepath.Join(repoRoot, "cmd/plexus/testdata/escape.jsonl"))
	refused := 0
	for _, l := range ndjsonLines(t, r.stdout) {
		if l["type"] != "tool_result" {
			continue
		}
		res, _ := l["data"].(map[string]any)["result"].(map[string]any)
		if res["code"] == "permission_denied" && strings.Contains(res["error"].(string), "workspace") {
			refused++
		} else {
			t.Errorf("not refused: %v", l)
		}
		if strings.Contains(fmt.Sprint(res), "top secret") {
			t.Errorf("secret leaked: %v", res)
		}
	}
	if refused != 4 {
		t.Errorf("%d of 4 escapes refused\n%s", refused, r.stdout)
	}
	for _, f := range []string{"planted.txt"} {
		if _, err := os.Stat(filepath.Join(outside, f)); err == nil {
			t.Errorf("%s was written outside the workspace", f)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model", []string{"run", "hello"}, 2, "no model chosen: pass --model PROVIDER:MODEL"},
		{"bad model", []string{"run", "--model", "ollama", "hello"}, 2, "is not PROVIDER:MODEL"},
		{"unknown provider", []string{"run", "--model", "nope:x", "hello"}, 2, `unknown model provider "nope"`},
		{"no message", []string{"run", "--model", "replay:x.jsonl"}, 2, "no message"},
		{"bad workspace", []string{"run", "-w", "/does/not/exist", "--model", "replay:x.jsonl", "hi"}, 2, "--workspace"},
		{"no transport", []string{"serve", "--model", "replay:x.jsonl"}, 2, "--transport is required"},
		{"unknown transport", []string{"serve", "--transport", "carrier-pigeon", "--model", "replay:x.jsonl"}, 2, `transport "carrier-pigeon" is not available`},
		{"missing script", []string{"run", "--model", "replay:missing.jsonl", "hi"}, 1, "missing.jsonl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := plexus(t, t.TempDir(), "", nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", r.code, tc.code, r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q", r.stdout)
			}
		})
	}
}

func TestOllamaUnreachable(t *testing.T) {
	r := plexus(t, t.TempDir(), "", nil, "run", "--ollama-host", "http://127.0.0.1:9", "--model", "ollama:qwen2.5-coder:7b", "hi")
	want := []string{"no Ollama server is reachable at http://127.0.0.1:9", `start one with "ollama serve"`, "--ollama-host / OLLAMA_HOST"}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if r.code != 1 {
		t.Errorf("exit %d", r.code)
	}
	r = plexus(t, t.TempDir(), "", nil, "models", "--ollama-host", "http://127.0.0.1:9", "ollama")
	if r.code != 1 || !strings.Contains(r.stderr, "no Ollama server is reachable") {
		t.Errorf("models: exit %d\n%s", r.code, r.stderr)
	}
}

// TestThirdPartyPlugin installs the example plugin from its package
// directory as a user would, lists it, has a turn call it, and then
// changes one byte of the installed binary: the next launch fails with a
// checksum error.
func TestThirdPartyPlugin(t *testing.T) {
	dir := t.TempDir()
	env := []string{"PLEXUS_PLUGIN_PATH=" + dir}
	r := plexus(t, repoRoot, "", env, "plugins", "install", "./examples/plexus-tool-loc")
	bin := filepath.Join(dir, "plexus-tool-loc")
	if r.code != 0 || !strings.Contains(r.stdout, `installed tool plugin "loc": `+bin) || !strings.Contains(r.stdout, "tools     count_lines_of_code") {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "plexus-plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var lf struct {
		Version int
		Plugins []struct {
			Kind, Name, File, Version, SHA256, Source string
			ProtocolVersions                          []int `json:"protocol_versions"`
		}
	}
	if err := json.Unmarshal(lock, &lf); err != nil || lf.Version != 1 || len(lf.Plugins) != 1 {
		t.Fatalf("lock file %s: %v", lock, err)
	}
	e := lf.Plugins[0]
	if e.Kind != "tool" || e.Name != "loc" || e.File != "plexus-tool-loc" || e.Version != "(devel)" || len(e.SHA256) != 64 ||
		e.Source != filepath.Join(repoRoot, "examples/plexus-tool-loc") || len(e.ProtocolVersions) != 1 || e.ProtocolVersions[0] != 1 {
		t.Errorf("lock entry %+v", e)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins")
	if r.code != 0 {
		t.Fatalf("plugins: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"tool   fs", "read_file, list_files, write_file, edit_file, delete_file", "tool   search", "search_symbols, search_text, vector_search", "run_command (approval)",
		"model  ollama", "tool   loc     (devel)    ok (" + e.SHA256[:8] + ")  " + bin + "  count_lines_of_code"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plugins output lacks %q:\n%s", want, r.stdout)
		}
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\n// main does nothing.\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "tool.py"), []byte("# a tool\nprint(1)\n"), 0o644)
	script := "replay:" + filepath.Join(repoRoot, "cmd/plexus/testdata/loc.jsonl")
	r = plexus(t, ws, "", env, "run", "--model", script, "count")
	if r.code != 0 || !strings.Contains(r.stdout, "The workspace has 3 lines of code.") || !strings.Contains(r.stderr, "✓ count_lines_of_code — 3 lines of code in 2 files, 2 languages (Go 2, Python 1)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	noProcessesLeft(t, bin)
	r = plexus(t, ws, "", env, "plugins", "check", bin)
	if r.code != 0 || !strings.Contains(r.stdout, "ok    handshake\n") || !strings.Contains(r.stdout, "ok    stop\n") || !strings.Contains(r.stdout, "tool  count_lines_of_code (risk low") {
		t.Errorf("plugins check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, ws, "", env, "plugins", "check", "/bin/true")
	if r.code != 1 || !strings.Contains(r.stdout, "FAIL  handshake: the plugin did not complete the handshake") {
		t.Errorf("plugins check of a non-plugin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, ws, "", env, "plugins", "verify")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ok  tool/loc  "+bin+"  (devel)") {
		t.Errorf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r = plexus(t, ws, "", env, "run", "--model", script, "count")
	for _, want := range []string{bin + " is not the binary that was installed: its SHA-256 is ", "but " + filepath.Join(dir, "plexus-plugins.lock") + " records " + e.SHA256, "plexus plugins install"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run after a changed byte: stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "✓ count_lines_of_code") {
		t.Errorf("the changed binary ran:\n%s", r.stderr)
	}
	r = plexus(t, ws, "", env, "plugins")
	if r.code != 1 || !strings.Contains(r.stdout, "MISMATCH") {
		t.Errorf("plugins after a changed byte: exit %d\n%s", r.code, r.stdout)
	}
	r = plexus(t, ws, "", env, "plugins", "verify")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "MODIFIED  tool/loc  "+bin) || !strings.Contains(r.stderr, "1 of 1 plugins failed verification") {
		t.Errorf("verify after a changed byte: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPluginsInstallFromPath installs a built binary by path under another
// name, refuses an unlocked binary dropped into the directory, and removes
// a plugin.
func TestPluginsInstallFromPath(t *testing.T) {
	src := filepath.Join(t.TempDir(), "wc")
	build := exec.Command("go", "build", "-o", src, "./examples/plexus-tool-loc")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build example plugin: %v\n%s", err, out)
	}
	dir := t.TempDir()
	env := []string{"PLEXUS_PLUGIN_PATH=" + dir}
	r := plexus(t, t.TempDir(), "", env, "plugins", "install", src)
	if r.code != 1 || !strings.Contains(r.stderr, `cannot tell the plugin's kind and name from "wc"`) {
		t.Errorf("install without a plugin name: exit %d\n%s", r.code, r.stderr)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins", "install", "--name", "plexus-tool-wc", src)
	if r.code != 0 || !strings.Contains(r.stdout, `installed tool plugin "wc"`) {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins", "install", "--name", "plexus-model-wc", src)
	if r.code != 1 || !strings.Contains(r.stderr, "is not a model plugin") {
		t.Errorf("install as the wrong kind: exit %d\n%s", r.code, r.stderr)
	}
	// A binary copied in by hand is not launched.
	b, _ := os.ReadFile(src)
	stray := filepath.Join(dir, "plexus-tool-stray")
	os.WriteFile(stray, b, 0o755)
	r = plexus(t, t.TempDir(), "", env, "plugins")
	if r.code != 1 || !strings.Contains(r.stdout, "not locked") || !strings.Contains(r.stdout, stray+" is not in "+filepath.Join(dir, "plexus-plugins.lock")) ||
		!strings.Contains(r.stdout, "install it with `plexus plugins install "+stray+"`") {
		t.Errorf("unlocked plugin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "ok          tool/wc") || !strings.Contains(r.stdout, "NOT-LOCKED  tool/stray") {
		t.Errorf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Installing the file where it lies adopts it.
	r = plexus(t, t.TempDir(), "", env, "plugins", "install", stray)
	if r.code != 0 {
		t.Errorf("adopt: exit %d\n%s", r.code, r.stderr)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins", "remove", "tool/wc")
	if r.code != 0 || !strings.Contains(r.stdout, `removed tool plugin "wc"`) {
		t.Errorf("remove: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, t.TempDir(), "", env, "plugins", "verify")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "ok  tool/stray") {
		t.Errorf("verify after remove and adopt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestBuiltinPluginUnderDebugger serves a built-in plugin in debug mode,
// hands its line to plexus, and checks plexus attaches to it and leaves it
// running.
func TestBuiltinPluginUnderDebugger(t *testing.T) {
	cmd := exec.Command(plexusBin, "plugin", "serve", "tool", "fs", "--debug")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `PLEXUS_REATTACH_PLUGINS='{"tool/fs":{"protocol":"grpc","protocol_version":1,"pid":`+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("debug line %q: %v\n%s", line, err, stderr.String())
	}
	value := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "PLEXUS_REATTACH_PLUGINS='"), "'")
	r := plexus(t, t.TempDir(), "", []string{"PLEXUS_REATTACH_PLUGINS=" + value}, "plugins")
	if r.code != 0 || !strings.Contains(r.stdout, "debug attach") || !strings.Contains(r.stdout, "read_file, list_files") {
		t.Errorf("plugins with the debug line: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if zombie(cmd.Process.Pid) {
		t.Error("plexus stopped the debugged plugin")
	}
	r = plexus(t, t.TempDir(), "", []string{"PLEXUS_REATTACH_PLUGINS={bad"}, "plugins")
	if r.code != 2 || !strings.Contains(r.stderr, "PLEXUS_REATTACH_PLUGINS is not a JSON object") {
		t.Errorf("bad PLEXUS_REATTACH_PLUGINS: exit %d\n%s", r.code, r.stderr)
	}
}

func TestModelsListsReplayScripts(t *testing.T) {
	r := plexus(t, repoRoot, "", []string{"PLEXUS_REPLAY_DIR=examples/replay"}, "models", "replay")
	if r.code != 0 || !strings.Contains(r.stdout, "replay:examples/replay/tour.jsonl") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestLiveOllama runs a turn and lists models against a real Ollama
// server (a tiny generated model, so the words are noise but the turn is
// real end to end).
func TestLiveOllama(t *testing.T) {
	srv := ollamatest.Shared(t)
	r := plexus(t, repoRoot, "", nil, "models", "--ollama-host", srv.URL, "ollama")
	if r.code != 0 || !strings.Contains(r.stdout, "ollama:"+srv.ToolsModel) || !strings.Contains(r.stdout, "tools") {
		t.Fatalf("models: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, repoRoot, "", nil, "run", "--ollama-host", srv.URL, "--model", "ollama:"+srv.ToolsModel, "Say hello")
	if r.code != 0 || !strings.Contains(r.stderr, "— completed") || !strings.Contains(r.stderr, "ollama:"+srv.ToolsModel) {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.TrimSpace(r.stdout) == "" {
		t.Error("no answer streamed")
	}
	// Record the live turn, then replay it offline: the same answer.
	rec := filepath.Join(t.TempDir(), "live.jsonl")
	live := plexus(t, repoRoot, "", nil, "run", "--ollama-host", srv.URL, "--model", "ollama:"+srv.ToolsModel, "--record", rec, "Say hello")
	replayed := plexus(t, repoRoot, "", nil, "run", "--model", "replay:"+rec, "Say hello")
	if live.code != 0 || replayed.code != 0 || live.stdout != replayed.stdout || strings.TrimSpace(live.stdout) == "" {
		t.Errorf("recorded %q (exit %d), replayed %q (exit %d)\n%s", live.stdout, live.code, replayed.stdout, replayed.code, replayed.stderr)
	}
	r = plexus(t, repoRoot, "", nil, "run", "--ollama-host", srv.URL, "--model", "ollama:no-such-model", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, `model "no-such-model" not found`) {
		t.Errorf("unknown model: exit %d\n%s", r.code, r.stderr)
	}
}

// TestIndexAndSearch runs plexus index and plexus search on a small
// repository as a user would: symbols, text, vectors (embedded by the
// replay model) and hybrid retrieval, then the status.
func TestIndexAndSearch(t *testing.T) {
	ws := t.TempDir()
	for name, content := range map[string]string{
		"shop/cart.go":   "package shop\n\n// Cart holds items.\ntype Cart struct{ Items []string }\n\n// AddItem appends an item to the cart.\nfunc (c *Cart) AddItem(name string) { c.Items = append(c.Items, name) }\n",
		"shop/prices.py": "def apply_discount(price, percent):\n    return price * (100 - percent) / 100\n",
		"README.md":      "# Shop\n\nAdd items with AddItem.\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755)
		os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644)
	}
	data := t.TempDir()
	env := []string{"PLEXUS_DATA_DIR=" + data}
	embed := "replay:" + filepath.Join(repoRoot, "examples/replay/tour.jsonl") // replay embeds any text
	r := plexus(t, ws, "", env, "index", "--embed-model", embed)
	if r.code != 0 || !strings.Contains(r.stdout, "indexed 3 files (3 read, 3 changed, 3 analysed, 0 left out)") || !strings.Contains(r.stdout, "embedded ") {
		t.Fatalf("index: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, ws, "", env, "index", "--no-embed")
	if !strings.Contains(r.stdout, "indexed 3 files (0 read, 0 changed, 0 analysed") {
		t.Errorf("second index re-read files:\n%s", r.stdout)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"search", "--kind", "symbol", "additem"}, "shop/cart.go:6"},
		{[]string{"search", "--kind", "text", "apply_discount"}, "shop/prices.py:1:5: def apply_discount(price, percent):"},
		{[]string{"search", "--kind", "text", "--regex", "-i", `^def \w+`}, "shop/prices.py:1:1:"},
		{[]string{"search", "--kind", "vector", "--embed-model", embed, "discount percent price"}, "shop/prices.py:1-2"},
		{[]string{"search", "--embed-model", embed, "how do I add an item to the Cart"}, "shop/cart.go"},
	}
	for _, c := range cases {
		r := plexus(t, ws, "", env, c.args...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("%v: exit %d, want %q in\n%s%s", c.args, r.code, c.want, r.stdout, r.stderr)
		}
	}
	r = plexus(t, ws, "", env, "search", "--kind", "text", "no such text anywhere")
	if r.code != 1 || !strings.Contains(r.stderr, "no results") {
		t.Errorf("no hits: exit %d %s", r.code, r.stderr)
	}
	r = plexus(t, ws, "", env, "index", "--status", "--embed-model", embed)
	var st struct {
		Files, Symbols, Chunks int
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Files != 3 || st.Symbols == 0 || st.Chunks == 0 {
		t.Errorf("status %+v %v\n%s", st, err, r.stdout)
	}
}
