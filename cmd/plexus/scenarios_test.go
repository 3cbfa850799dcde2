package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The scenario suite: one table of scenarios, run through every front-end
// (ndjson, lsp-stdio, unix, http, task, acp) that can express each, each
// against the real plexus binary with the replay model, the real plugin
// processes and a fresh workspace. A driver per front-end speaks its
// protocol (scenario_drivers_test.go); a new front-end adds a driver.
// TestScenarios logs the table of which scenario ran where, and writes it
// to $PLEXUS_SCENARIO_TABLE when that is set (.ci/run prints it).

// Capabilities a scenario may need of a front-end's protocol.
const (
	capStream    = "stream"    // the answer streams in pieces
	capTools     = "tools"     // tool calls are reported with their outcome
	capApprove   = "approve"   // the client is asked, and can allow
	capCancel    = "cancel"    // the client can cancel a running turn
	capMalformed = "malformed" // bad input is answered with an error
	capResume    = "resume"    // a session outlives the server process
)

// scenarioWorkspace is the workspace of every scenario: a Go module whose
// Add subtracts.
var scenarioWorkspace = map[string]string{
	"go.mod":  "module example.com/calc\n\ngo 1.22\n",
	"calc.go": "// Package calc does arithmetic.\npackage calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
}

const countToForty = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five twenty-six twenty-seven twenty-eight twenty-nine thirty thirty-one thirty-two thirty-three thirty-four thirty-five thirty-six thirty-seven thirty-eight thirty-nine forty"

// scenario is one row of the table.
type scenario struct {
	name  string
	needs []string
	// script is the replay script, one model response per line.
	script []string
	run    func(t *testing.T, c scenarioClient, ws string)
}

// turnOpts say how a driver plays a turn.
type turnOpts struct {
	// approve answers every approval request (allow or reject).
	approve bool
	// cancel cancels the turn once some of its text has streamed.
	cancel bool
}

// turnResult is a turn as a driver saw it, in the suite's words.
type turnResult struct {
	// status is completed, cancelled or error.
	status string
	// text is the assistant's answer as streamed (or as the final answer
	// when the protocol does not stream); pieces counts the pieces.
	text   string
	pieces int
	// tools maps each tool called to its last status: completed, failed
	// or "" when the protocol does not say.
	tools map[string]string
	// asked counts the approval requests the client answered.
	asked int
}

// scenarioClient is a driver's connection to a running plexus.
type scenarioClient interface {
	// turn sends prompt and plays the turn to its end.
	turn(t *testing.T, prompt string, o turnOpts) turnResult
	// malformed sends input the protocol does not allow and returns the
	// error the server answered with ("" when none came).
	malformed(t *testing.T) string
	// restart stops plexus and starts it again on the same data
	// directory, and returns a client of the same conversation.
	restart(t *testing.T) scenarioClient
}

// frontEnd is a driver.
type frontEnd struct {
	name string
	caps []string
	// start starts plexus serving this front-end in ws with the replay
	// script and returns a client with a session open.
	start func(t *testing.T, p *plexusProc) scenarioClient
}

var scenarios = []scenario{
	{
		name:   "plain turn, streamed text",
		script: []string{`{"text": "The scenario suite says hello in nine words today."}`},
		run: func(t *testing.T, c scenarioClient, ws string) {
			r := c.turn(t, "Say hello", turnOpts{})
			if r.status != "completed" || r.text != "The scenario suite says hello in nine words today." {
				t.Errorf("turn %+v", r)
			}
		},
	},
	{
		name:   "streamed in pieces",
		needs:  []string{capStream},
		script: []string{`{"text": "The scenario suite says hello in nine words today."}`},
		run: func(t *testing.T, c scenarioClient, ws string) {
			if r := c.turn(t, "Say hello", turnOpts{}); r.pieces < 2 {
				t.Errorf("the answer came in %d pieces: %+v", r.pieces, r)
			}
		},
	},
	{
		name:  "tool calls",
		needs: []string{capTools},
		script: []string{
			`{"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.go"}}, {"name": "list_files", "arguments": {"path": "."}}]}`,
			`{"text": "calc.go has {{ get (.Result \"read_file\") \"total_lines\" }} lines among {{ count (get (.Result \"list_files\") \"files\") }} files."}`,
		},
		run: func(t *testing.T, c scenarioClient, ws string) {
			r := c.turn(t, "How long is calc.go?", turnOpts{})
			if r.status != "completed" || !strings.HasSuffix(r.text, "calc.go has 7 lines among 2 files.") {
				t.Errorf("turn %+v", r)
			}
			if _, named := r.tools["read_file"]; !named {
				// The protocol reports calls by id (unix): two, completed.
				if len(r.tools) != 2 {
					t.Errorf("tool calls %v", r.tools)
				}
				for id, st := range r.tools {
					if st != "completed" {
						t.Errorf("tool call %s: %q", id, st)
					}
				}
				return
			}
			for _, tool := range []string{"read_file", "list_files"} {
				if st, ok := r.tools[tool]; !ok || (st != "completed" && st != "") {
					t.Errorf("tool %s: %q in %v", tool, st, r.tools)
				}
			}
		},
	},
	{
		name:   "approval allowed",
		needs:  []string{capApprove},
		script: editScriptLines,
		run: func(t *testing.T, c scenarioClient, ws string) {
			r := c.turn(t, "Fix Add", turnOpts{approve: true})
			if r.status != "completed" || r.asked == 0 || !strings.HasSuffix(r.text, "patch: applied") {
				t.Errorf("turn %+v", r)
			}
			if got := readWS(t, ws, "calc.go"); !strings.Contains(got, "return a + b") {
				t.Errorf("calc.go was not changed:\n%s", got)
			}
		},
	},
	{
		name:   "approval denied",
		needs:  []string{capApprove},
		script: editScriptLines,
		run: func(t *testing.T, c scenarioClient, ws string) {
			r := c.turn(t, "Fix Add", turnOpts{approve: false})
			if r.status != "completed" || r.asked == 0 || !strings.HasSuffix(r.text, "patch: rejected") {
				t.Errorf("turn %+v", r)
			}
			if got := readWS(t, ws, "calc.go"); got != scenarioWorkspace["calc.go"] {
				t.Errorf("calc.go changed:\n%s", got)
			}
		},
	},
	{
		name:   "cancel mid-turn",
		needs:  []string{capCancel},
		script: []string{`{"text": "` + countToForty + `", "delay_ms": 30}`},
		run: func(t *testing.T, c scenarioClient, ws string) {
			r := c.turn(t, "Count to forty", turnOpts{cancel: true})
			if r.status != "cancelled" || strings.Contains(r.text, "forty") {
				t.Errorf("turn %+v", r)
			}
		},
	},
	{
		name:   "malformed input, then a turn",
		needs:  []string{capMalformed},
		script: []string{`{"text": "Still serving."}`},
		run: func(t *testing.T, c scenarioClient, ws string) {
			if e := c.malformed(t); e == "" {
				t.Errorf("no error for malformed input")
			} else {
				t.Logf("malformed input: %s", e)
			}
			if r := c.turn(t, "Are you there?", turnOpts{}); r.status != "completed" || r.text != "Still serving." {
				t.Errorf("turn after malformed input %+v", r)
			}
		},
	},
	{
		name:  "session resumed after a restart",
		needs: []string{capResume},
		script: []string{
			`{"text": "First answer."}`,
			`{"text": "Second answer: I remember {{ .Step }} earlier answer."}`,
		},
		run: func(t *testing.T, c scenarioClient, ws string) {
			if r := c.turn(t, "First question", turnOpts{}); r.text != "First answer." {
				t.Fatalf("first turn %+v", r)
			}
			c = c.restart(t)
			// The replay model plays line N+1 when the conversation holds N
			// answers: the second line proves the history was kept.
			if r := c.turn(t, "Second question", turnOpts{}); r.status != "completed" || r.text != "Second answer: I remember 1 earlier answer." {
				t.Errorf("turn after the restart %+v", r)
			}
		},
	},
}

// editScriptLines propose one edit and report what became of it.
var editScriptLines = []string{
	`{"text": "Fixing Add.", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.go", "old_string": "return a - b", "new_string": "return a + b"}}]}`,
	`{"text": "patch: {{ get (get (.Result \"edit_file\") \"patch\") \"status\" }}"}`,
}

func readWS(t *testing.T, ws, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestScenarios runs every scenario on every front-end that can express it.
func TestScenarios(t *testing.T) {
	table := map[string]map[string]string{}
	var mu sync.Mutex
	mark := func(sc, fe, v string) {
		mu.Lock()
		defer mu.Unlock()
		if table[sc] == nil {
			table[sc] = map[string]string{}
		}
		table[sc][fe] = v
	}
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			for _, sc := range scenarios {
				missing := ""
				for _, n := range sc.needs {
					if !slices.Contains(fe.caps, n) {
						missing = n
					}
				}
				if missing != "" {
					mark(sc.name, fe.name, "n/a ("+missing+")")
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					start := time.Now()
					ws := t.TempDir()
					for name, content := range scenarioWorkspace {
						writeFile(t, filepath.Join(ws, name), content)
					}
					script := filepath.Join(t.TempDir(), "script.jsonl")
					writeFile(t, script, strings.Join(sc.script, "\n")+"\n")
					p := &plexusProc{ws: ws, script: script, dataDir: t.TempDir(), pluginDir: t.TempDir()}
					c := fe.start(t, p)
					sc.run(t, c, ws)
					result := fmt.Sprintf("pass %.1fs", time.Since(start).Seconds())
					if t.Failed() {
						result = "FAIL"
						t.Logf("plexus stderr:\n%s", p.stderrText())
					}
					mark(sc.name, fe.name, result)
				})
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scenario table (rows: scenarios; columns: front-ends; n/a names the capability the protocol lacks)\n")
	fmt.Fprintf(&b, "%-34s", "scenario")
	for _, fe := range frontEnds {
		fmt.Fprintf(&b, " | %-15s", fe.name)
	}
	b.WriteString("\n")
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "%-34s", sc.name)
		for _, fe := range frontEnds {
			v := table[sc.name][fe.name]
			if v == "" {
				v = "not run"
			}
			fmt.Fprintf(&b, " | %-15s", v)
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
	if path := os.Getenv("PLEXUS_SCENARIO_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Errorf("write the scenario table: %v", err)
		}
	}
}

// plexusProc is one plexus process of a scenario.
type plexusProc struct {
	ws, script, dataDir, pluginDir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr strings.Builder
}

// start runs `plexus serve --transport TRANSPORT` in the scenario's
// workspace with its script. onStderr, when set, sees each stderr line.
func (p *plexusProc) start(t *testing.T, transport string, onStderr func(string), extra ...string) (stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	args := append([]string{"serve", "--transport", transport, "-w", p.ws, "--model", "replay:" + p.script}, extra...)
	cmd := exec.Command(plexusBin, args...)
	cmd.Dir = p.ws
	cmd.Env = append(os.Environ(), "PLEXUS_PLUGIN_PATH="+p.pluginDir, "PLEXUS_DATA_DIR="+p.dataDir,
		"PLEXUS_MODEL=", "PLEXUS_TOKEN=", "PLEXUS_LOG_LEVEL=info", "ZU_ROOT="+p.dataDir,
		"OLLAMA_HOST=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if onStderr != nil {
				onStderr(sc.Text())
			}
		}
	}()
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	t.Cleanup(func() { p.stop() })
	return in, out
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *plexusProc) stop() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (p *plexusProc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}
