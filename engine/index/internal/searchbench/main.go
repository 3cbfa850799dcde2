// Command searchbench measures plexus search as users reach it, beside
// ripgrep in the same loop, on a source tree (default the Go
// distribution's, $(go env GOROOT)/src, copied so that the original is
// never touched):
//
//	go build -o bin/plexus ./cmd/plexus
//	go run ./engine/index/internal/searchbench -plexus bin/plexus [-n 40] [-reps 3]
//
// It draws queries with fixed seeds from the corpus (goroot.Corpus):
// literals (names, receivers, qualified calls, common identifiers),
// regular expressions with a literal part, case-insensitive queries
// (ASCII identifiers in another case, and non-ASCII words found in the
// corpus), the four adversarial queries, and symbol names. Each
// text query runs, interleaved and -reps times: rg as a process (rg -n
// --no-heading --max-filesize 1M --hidden --glob '!.git' [-F] [-i]: the
// files the index holds), plexus search --kind text
// --limit 0 as a process (the CLI path: it asks the per-user search
// server), and a search.text request on the search server's socket (the
// server path: one connection, every match streamed, timed until the
// last arrives). The CLI's lines are compared with rg's, line for line
// (path, line number and text; plexus cuts lines over 300 bytes, whose
// text is then compared up to the cut), and every difference is printed.
// Symbol names run through plexus search --kind symbol. It prints p50
// and p99 per kind and path, the ratio rg p50 / plexus p50, the index
// build (wall time, and the peak RSS of the plexus index process), and the
// regex and case-insensitive queries where plexus was slower than rg.
//
// Medians and ratios are what to read: the machine may be shared.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine/index/internal/goroot"
)

type query struct {
	kind, pattern string
	regex, fold   bool
}

type timing struct {
	rg, cli, server []time.Duration
	slower          []string // regex and -i queries where the CLI's p50 > rg's
	mismatches      int
}

func main() {
	plexus := flag.String("plexus", "bin/plexus", "the plexus binary")
	corpusDir := flag.String("corpus", "", "source tree (default a copy of $(go env GOROOT)/src)")
	n := flag.Int("n", 40, "queries per kind")
	reps := flag.Int("reps", 3, "runs of each query on each path")
	seed := flag.Uint64("seed", 16, "seed of the query draw")
	flag.Parse()
	if err := run(*plexus, *corpusDir, *n, *reps, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "searchbench:", err)
		os.Exit(1)
	}
}

func run(plexus, corpusDir string, n, reps int, seed uint64) error {
	plexus, err := filepath.Abs(plexus)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("rg"); err != nil {
		return fmt.Errorf("rg (ripgrep) is needed as the peer: %w", err)
	}
	tmp, err := os.MkdirTemp("", "searchbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if corpusDir == "" {
		src, err := goroot.Src()
		if err != nil {
			return err
		}
		corpusDir = filepath.Join(tmp, "src")
		if err := goroot.CopyTree(src, corpusDir, nil); err != nil {
			return err
		}
	}
	corpus, err := goroot.Load(corpusDir, 1<<20)
	if err != nil {
		return err
	}
	data := filepath.Join(tmp, "data")
	env := append(os.Environ(), "PLEXUS_DATA_DIR="+data, "PLEXUS_SEARCH_SERVER=auto", "PLEXUS_SEARCH_IDLE_TIMEOUT=2m")

	// The build, as a user runs it.
	start := time.Now()
	cmd := exec.Command(plexus, "index", "--no-embed", "-w", corpusDir)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("plexus index: %w\n%s", err, out)
	}
	rss := int64(0)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	fmt.Printf("build: %s  (wall %.1f s, peak RSS %.0f MB)\n", strings.TrimSpace(string(out)), time.Since(start).Seconds(), float64(rss)/1e6)

	// Start the search server with a first search and wait for it.
	cli := func(args ...string) ([]byte, time.Duration, error) {
		c := exec.Command(plexus, append([]string{"search", "-w", corpusDir}, args...)...)
		c.Env = env
		var stdout bytes.Buffer
		c.Stdout = &stdout
		s := time.Now()
		err := c.Run()
		d := time.Since(s)
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			err = nil // no match
		}
		return stdout.Bytes(), d, err
	}
	if _, _, err := cli("--kind", "text", "package"); err != nil {
		return err
	}
	socket, err := findSocket(data, plexus, env, corpusDir)
	if err != nil {
		return err
	}
	conn, err := dial(socket)
	if err != nil {
		return err
	}
	defer conn.Close()

	queries := drawQueries(corpus, n, seed)
	results := map[string]*timing{}
	var kinds []string
	for _, q := range queries {
		t := results[q.kind]
		if t == nil {
			t = &timing{}
			results[q.kind] = t
			kinds = append(kinds, q.kind)
		}
		if q.kind == "symbol" {
			var ds []time.Duration
			for r := 0; r < reps; r++ {
				_, d, err := cli("--kind", "symbol", q.pattern)
				if err != nil {
					return fmt.Errorf("symbol %q: %w", q.pattern, err)
				}
				ds = append(ds, d)
			}
			t.cli = append(t.cli, median(ds))
			continue
		}
		var rgD, cliD, srvD []time.Duration
		var rgOut, cliOut []byte
		for r := 0; r < reps; r++ {
			o, d, err := rgRun(corpusDir, q)
			if err != nil {
				return fmt.Errorf("rg %q: %w", q.pattern, err)
			}
			rgOut, rgD = o, append(rgD, d)
			args := []string{"--kind", "text", "--limit", "0"}
			if q.regex {
				args = append(args, "--regex")
			}
			if q.fold {
				args = append(args, "-i")
			}
			o, d, err = cli(append(args, "--", q.pattern)...)
			if err != nil {
				return fmt.Errorf("plexus search %q: %w", q.pattern, err)
			}
			cliOut, cliD = o, append(cliD, d)
			d, err = conn.searchText(corpusDir, q)
			if err != nil {
				return fmt.Errorf("search.text %q: %w", q.pattern, err)
			}
			srvD = append(srvD, d)
		}
		if diff := compare(rgOut, cliOut); diff != "" {
			t.mismatches++
			fmt.Printf("MISMATCH %s %q: %s\n", q.kind, q.pattern, diff)
		}
		t.rg, t.cli, t.server = append(t.rg, median(rgD)), append(t.cli, median(cliD)), append(t.server, median(srvD))
		if (q.regex || q.fold) && median(cliD) > median(rgD) {
			t.slower = append(t.slower, fmt.Sprintf("%q (plexus %.1f ms, rg %.1f ms)", q.pattern, ms(median(cliD)), ms(median(rgD))))
		}
	}
	fmt.Printf("\n%-10s %5s %12s %12s %14s %14s %12s %12s %s\n", "kind", "n", "rg p50", "rg p99", "CLI p50", "CLI p99", "server p50", "server p99", "rg/CLI, rg/server (p50)")
	for _, k := range kinds {
		t := results[k]
		if k == "symbol" {
			fmt.Printf("%-10s %5d %12s %12s %11.1f ms %11.1f ms\n", k, len(t.cli), "", "", ms(pct(t.cli, 50)), ms(pct(t.cli, 99)))
			continue
		}
		fmt.Printf("%-10s %5d %9.1f ms %9.1f ms %11.1f ms %11.1f ms %9.2f ms %9.2f ms %5.1fx %6.1fx  mismatches %d\n", k, len(t.rg),
			ms(pct(t.rg, 50)), ms(pct(t.rg, 99)), ms(pct(t.cli, 50)), ms(pct(t.cli, 99)), ms(pct(t.server, 50)), ms(pct(t.server, 99)),
			float64(pct(t.rg, 50))/float64(pct(t.cli, 50)), float64(pct(t.rg, 50))/float64(pct(t.server, 50)), t.mismatches)
	}
	for _, k := range kinds {
		for _, s := range results[k].slower {
			fmt.Printf("slower than rg (%s): %s\n", k, s)
		}
	}
	return nil
}

// drawQueries draws the query sets with the seed.
func drawQueries(c *goroot.Corpus, n int, seed uint64) []query {
	var out []query
	for _, s := range c.Literals(n, seed) {
		out = append(out, query{kind: "literal", pattern: s})
	}
	for _, s := range c.Regexps(n, seed+1) {
		out = append(out, query{kind: "regex", pattern: s, regex: true})
	}
	r := rand.New(rand.NewPCG(seed+2, 0x5eed))
	for i, s := range c.Literals(n/2, seed+3) {
		if i%2 == 0 {
			s = strings.ToUpper(s)
		} else {
			s = strings.ToLower(s)
		}
		out = append(out, query{kind: "ci-ascii", pattern: s, fold: true})
	}
	words := nonASCIIWords(c)
	r.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	for _, w := range words[:min(n/2, len(words))] {
		out = append(out, query{kind: "ci-unicode", pattern: w, fold: true})
	}
	for _, q := range []query{{pattern: "é", fold: true}, {pattern: "straße", fold: true}, {pattern: `[0-9]{4}-[0-9]{2}-[0-9]{2}`, regex: true}, {pattern: `\pL\pN{3}x`, regex: true}} {
		q.kind = "issue16"
		out = append(out, q)
	}
	for _, s := range c.SymbolNames(n, seed+4) {
		out = append(out, query{kind: "symbol", pattern: s})
	}
	return out
}

// nonASCIIWords returns the distinct words (letters only, two runes or
// more, at least one non-ASCII) of the corpus's Go files, sorted.
func nonASCIIWords(c *goroot.Corpus) []string {
	set := map[string]bool{}
	for _, f := range c.Files {
		data, err := os.ReadFile(filepath.Join(c.Root, filepath.FromSlash(f.Path)))
		if err != nil {
			continue
		}
		for _, w := range strings.FieldsFunc(string(data), func(r rune) bool { return !unicode.IsLetter(r) }) {
			if utf8.RuneCountInString(w) >= 2 && utf8.RuneCountInString(w) <= 12 && !isASCII(w) && utf8.ValidString(w) {
				set[w] = true
			}
		}
	}
	var out []string
	for w := range set {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func rgRun(dir string, q query) ([]byte, time.Duration, error) {
	// --hidden: the index holds dotfiles (.gitattributes, .github/...)
	// too; like it, rg still skips .git and what .gitignore excludes.
	args := []string{"-n", "--no-heading", "--max-filesize", "1M", "--hidden", "--glob", "!.git"}
	if !q.regex {
		args = append(args, "-F")
	}
	if q.fold {
		args = append(args, "-i")
	}
	c := exec.Command("rg", append(args, "--", q.pattern, ".")...)
	c.Dir = dir
	var stdout bytes.Buffer
	c.Stdout = &stdout
	s := time.Now()
	err := c.Run()
	d := time.Since(s)
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil
	}
	return stdout.Bytes(), d, err
}

// compare checks plexus's lines (path:line:col: text) against rg's
// (./path:line:text) and describes the first differences, or "".
func compare(rgOut, pxOut []byte) string {
	rg := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(string(rgOut), "\n"), "\n") {
		if l == "" {
			continue
		}
		l = strings.TrimPrefix(l, "./")
		path, rest, _ := strings.Cut(l, ":")
		line, text, _ := strings.Cut(rest, ":")
		rg[path+":"+line] = strings.TrimRight(text, "\r")
	}
	px := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(string(pxOut), "\n"), "\n") {
		if l == "" {
			continue
		}
		path, rest, _ := strings.Cut(l, ":")
		line, rest, _ := strings.Cut(rest, ":")
		_, text, _ := strings.Cut(rest, ": ")
		px[path+":"+line] = text
	}
	var diffs []string
	for k, t := range rg {
		pt, ok := px[k]
		switch {
		case !ok:
			diffs = append(diffs, "rg only "+k)
		case pt != t && !cutMatches(pt, t):
			diffs = append(diffs, fmt.Sprintf("text of %s: plexus %q, rg %q", k, trunc(pt), trunc(t)))
		}
	}
	for k := range px {
		if _, ok := rg[k]; !ok {
			diffs = append(diffs, "plexus only "+k)
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.Sort(diffs)
	return fmt.Sprintf("%d differences: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "; "))
}

// cutMatches reports whether a line plexus cut (… at either end) is a
// window of rg's.
func cutMatches(px, rg string) bool {
	if !strings.Contains(px, "…") {
		return false
	}
	return strings.Contains(rg, strings.Trim(px, "…"))
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// findSocket waits for the search server that the first search started.
func findSocket(data, plexus string, env []string, dir string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(filepath.Join(data, "search-server.log"))
		if i := bytes.Index(log, []byte("socket=")); i >= 0 {
			sock := string(log[i+len("socket="):])
			sock, _, _ = strings.Cut(sock, " ")
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				return sock, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("no search server started (see %s)", filepath.Join(data, "search-server.log"))
}

// client is a JSON-RPC connection to the search server.
type client struct {
	nc   net.Conn
	r    *bufio.Reader
	next int
}

func dial(socket string) (*client, error) {
	nc, err := net.Dial("unix", socket)
	if err != nil {
		return nil, err
	}
	c := &client{nc: nc, r: bufio.NewReaderSize(nc, 1<<20)}
	if err := c.call("initialize", map[string]any{"protocol_version": "1.0.0", "capabilities": []string{}}, nil); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *client) Close() error { return c.nc.Close() }

func (c *client) call(method string, params any, count *int) error {
	c.next++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	if _, err := c.nc.Write(append(req, '\n')); err != nil {
		return err
	}
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return err
		}
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return err
		}
		if m.Method == "search.matches" && count != nil {
			var p struct{ Matches []json.RawMessage }
			json.Unmarshal(m.Params, &p)
			*count += len(p.Matches)
		}
		if m.ID != nil && *m.ID == c.next {
			if len(m.Error) > 0 {
				return fmt.Errorf("%s", m.Error)
			}
			return nil
		}
	}
}

// searchText times one search.text with every match streamed.
func (c *client) searchText(root string, q query) (time.Duration, error) {
	s := time.Now()
	n := 0
	err := c.call("search.text", map[string]any{"pattern": q.pattern, "regex": q.regex, "case_insensitive": q.fold,
		"limit": 0, "stream": true, "workspace_root": root}, &n)
	return time.Since(s), err
}

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }

// pct is the p-th percentile (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
