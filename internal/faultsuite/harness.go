package faultsuite

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the integrity check reads plexus.db

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/plexus-agent/plexus/engine/store"
)

// Options size a run of the suite.
type Options struct {
	// Kills is the number of SIGKILLs per front-end.
	Kills int
	// Clients is the number of concurrent clients.
	Clients int
	// Seed seeds every random choice (kill points, approvals).
	Seed uint64
	// Report, when set, is a file the figures table is appended to.
	Report string
}

// DefaultKills is the number of kills per front-end of a plain `go test`
// (and of CI): about 20 s per front-end on a loaded 2-core machine.
// PLEXUS_FAULT_KILLS=20 runs the 20 per front-end issue 14 asks for
// (about 6 minutes for the five).
const DefaultKills = 5

// OptionsFromEnv reads PLEXUS_FAULT_KILLS, PLEXUS_FAULT_CLIENTS,
// PLEXUS_FAULT_SEED and PLEXUS_FAULT_REPORT (see the package
// documentation for the defaults).
func OptionsFromEnv() (Options, error) {
	o := Options{Kills: DefaultKills, Clients: 3, Seed: 1, Report: os.Getenv("PLEXUS_FAULT_REPORT")}
	for _, v := range []struct {
		name string
		dst  any
	}{{"PLEXUS_FAULT_KILLS", &o.Kills}, {"PLEXUS_FAULT_CLIENTS", &o.Clients}, {"PLEXUS_FAULT_SEED", &o.Seed}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return o, fmt.Errorf("%s=%q: want a positive integer", v.name, s)
		}
		switch d := v.dst.(type) {
		case *int:
			*d = int(n)
		case *uint64:
			*d = n
		}
	}
	return o, nil
}

// Rig is one front-end's run: its data directory (shared by every server
// it starts), its random source and its figures.
type Rig struct {
	t    testing.TB
	bin  string
	Name string
	Opts Options
	// Data is the data directory (PLEXUS_DATA_DIR and ZU_ROOT).
	Data string
	// WS is the default workspace.
	WS      string
	plugins string

	mu   sync.Mutex
	rng  *rand.Rand
	lost map[string]bool

	fig Figures
}

// Figures are what a run reports.
type Figures struct {
	Kills int
	// Acked counts the distinct items clients were told about, by kind;
	// every one is checked after every later restart.
	Acked map[string]int
	// Checks counts the checks made, Lost the items found missing.
	Checks, Lost int
	// Torn counts torn receipt lines moved aside after kills.
	Torn     int
	Duration time.Duration
}

// NewRig prepares a run of front-end name with the plexus binary bin.
func NewRig(t testing.TB, bin, name string, opts Options) *Rig {
	h := uint64(0)
	for _, c := range name {
		h = h*131 + uint64(c)
	}
	r := &Rig{t: t, bin: bin, Name: name, Opts: opts, Data: t.TempDir(), WS: t.TempDir(), plugins: t.TempDir(),
		rng: rand.New(rand.NewPCG(opts.Seed, h)), lost: map[string]bool{}, fig: Figures{Acked: map[string]int{}}}
	return r
}

// Intn returns a seeded random number in [0, n).
func (r *Rig) Intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// Between returns a seeded random duration in [lo, hi).
func (r *Rig) Between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Intn(int(hi-lo)))
}

// Ack counts an item a client was told about.
func (r *Rig) Ack(kind string) {
	r.mu.Lock()
	r.fig.Acked[kind]++
	r.mu.Unlock()
}

// Check records one check of an acknowledged item; ok false makes it
// lost (counted once however often it is checked again) and fails the
// test with the message.
func (r *Rig) Check(ok bool, format string, args ...any) {
	r.t.Helper()
	r.mu.Lock()
	r.fig.Checks++
	msg := fmt.Sprintf(format, args...)
	first := !ok && !r.lost[msg]
	if first {
		r.lost[msg] = true
		r.fig.Lost++
	}
	r.mu.Unlock()
	if first {
		r.t.Errorf("%s: LOST: %s", r.Name, msg)
	}
}

// Killed counts a SIGKILL.
func (r *Rig) Killed() {
	r.mu.Lock()
	r.fig.Kills++
	r.mu.Unlock()
}

// Figures returns the figures so far.
func (r *Rig) Figures() Figures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fig
	f.Acked = map[string]int{}
	for k, v := range r.fig.Acked {
		f.Acked[k] = v
	}
	return f
}

// Report logs the figures and appends them to Options.Report.
func (r *Rig) Report(d time.Duration) {
	f := r.Figures()
	kinds := make([]string, 0, len(f.Acked))
	total := 0
	for k, n := range f.Acked {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	slices.Sort(kinds)
	line := fmt.Sprintf("%-9s kills %3d  clients %d  seed %d  acknowledged %6d (%s)  checks %7d  lost %d  torn receipt tails %d  %5.1fs",
		r.Name, f.Kills, r.Opts.Clients, r.Opts.Seed, total, strings.Join(kinds, ", "), f.Checks, f.Lost, f.Torn, d.Seconds())
	r.t.Log(line)
	if r.Opts.Report != "" {
		if fh, err := os.OpenFile(r.Opts.Report, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			fmt.Fprintln(fh, line)
			fh.Close()
		}
	}
}

// Proc is one running plexus process.
type Proc struct {
	cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser

	mu     sync.Mutex
	stderr strings.Builder
	watch  []func(string)
	done   chan struct{}
}

// Start runs plexus with args (after the global flags it always gets) in
// its own process group, with the rig's data directory and no network
// model provider configured.
func (r *Rig) Start(args ...string) *Proc {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.WS
	cmd.Env = append(os.Environ(), "PLEXUS_DATA_DIR="+r.Data, "ZU_ROOT="+r.Data, "PLEXUS_PLUGIN_PATH="+r.plugins,
		"PLEXUS_MODEL=", "PLEXUS_TOKEN=", "PLEXUS_LOG_LEVEL=info", "PLEXUS_MCP_CONFIG=",
		"OLLAMA_HOST=http://127.0.0.1:9", "OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_API_KEY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	var err error
	if p.Stdin, err = cmd.StdinPipe(); err != nil {
		r.t.Fatal(err)
	}
	if p.Stdout, err = cmd.StdoutPipe(); err != nil {
		r.t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			watch := slices.Clone(p.watch)
			p.mu.Unlock()
			for _, w := range watch {
				w(line)
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	r.t.Cleanup(func() { p.Kill() })
	return p
}

// WaitFor waits for a stderr line matching re and returns its submatches.
func (p *Proc) WaitFor(t testing.TB, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	found := make(chan []string, 1)
	p.mu.Lock()
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			p.mu.Unlock()
			return m
		}
	}
	p.watch = append(p.watch, func(line string) {
		if m := re.FindStringSubmatch(line); m != nil {
			select {
			case found <- m:
			default:
			}
		}
	})
	p.mu.Unlock()
	select {
	case m := <-found:
		return m
	case <-p.done:
		t.Fatalf("plexus exited before printing %q:\n%s", re, p.Stderr())
	case <-time.After(timeout):
		t.Fatalf("plexus did not print %q within %v:\n%s", re, timeout, p.Stderr())
	}
	return nil
}

// Stderr returns what the process wrote to stderr.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL to the process, waits for it, then kills what is
// left of its process group (plugin processes die with it on Linux;
// this only tidies up).
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Term sends SIGTERM and waits up to timeout for a graceful exit.
func (p *Proc) Term(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Errorf("plexus did not stop within %v of SIGTERM:\n%s", timeout, p.Stderr())
		p.Kill()
	}
}

// Run runs plexus with args to completion and returns its stdout, stderr
// and exit code.
func (r *Rig) Run(args ...string) (stdout, stderr string, code int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir = r.WS
	cmd.Env = append(os.Environ(), "PLEXUS_DATA_DIR="+r.Data, "ZU_ROOT="+r.Data, "PLEXUS_PLUGIN_PATH="+r.plugins, "PLEXUS_MODEL=")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("run plexus %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

var tornLine = regexp.MustCompile(`(?m)^moved \d+ torn bytes`)

// CheckReceipts runs plexus receipts repair, then verify, on the receipt
// log (repoArgs selects a task repository: "--repo", ID): a kill may
// leave at most one torn last line, which repair moves aside; verify
// must then accept the log and its signed head.
func (r *Rig) CheckReceipts(repoArgs ...string) {
	r.t.Helper()
	out, errOut, code := r.Run(append([]string{"receipts", "repair"}, repoArgs...)...)
	if code != 0 {
		r.Check(false, "receipts repair %v exited %d:\n%s%s", repoArgs, code, out, errOut)
		return
	}
	torn := len(tornLine.FindAllString(out, -1))
	r.mu.Lock()
	r.fig.Torn += torn
	r.mu.Unlock()
	out, errOut, code = r.Run(append([]string{"receipts", "verify"}, repoArgs...)...)
	r.Check(code == 0, "receipts verify %v exited %d:\n%s%s", repoArgs, code, out, errOut)
}

// CheckDatabase runs SQLite's integrity check on the data directory's
// plexus.db.
func (r *Rig) CheckDatabase() {
	r.t.Helper()
	path := filepath.Join(r.Data, "plexus.db")
	if _, err := os.Stat(path); err != nil {
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	var res string
	err = db.QueryRow("PRAGMA integrity_check").Scan(&res)
	r.Check(err == nil && res == "ok", "plexus.db integrity check: %q %v", res, err)
}

// OpenStore opens the data directory's state database (another handle
// beside the server's, as plexus undo would).
func (r *Rig) OpenStore() *store.Store {
	r.t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(r.Data, "plexus.db"))
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// AppliedIDs returns the ids of the applied changes stored for workspace
// wsID.
func (r *Rig) AppliedIDs(st *store.Store, wsID string) map[string]*engine.AppliedPatch {
	r.t.Helper()
	list, err := st.Applied(context.Background(), wsID, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]*engine.AppliedPatch{}
	for _, a := range list {
		out[a.ID] = a
	}
	return out
}

// Receipts lists the receipts of the log in dir.
func (r *Rig) Receipts(dir string) []receipts.Receipt {
	r.t.Helper()
	es, err := receipts.NewReader(dir).List(context.Background(), receipts.Month{})
	if err != nil {
		r.t.Fatalf("list receipts in %s: %v", dir, err)
	}
	out := make([]receipts.Receipt, len(es))
	for i, e := range es {
		out[i] = e.Receipt
	}
	return out
}

// WriteFile writes a file of the test's own (a workspace file).
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
