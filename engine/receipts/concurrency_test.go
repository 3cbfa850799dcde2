package receipts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// checkWholeLines checks that the log in dir holds exactly n receipts, each
// a whole line, that the chain verifies, and that every actor in actors
// appended its receipts in order (the reason member carries a per-actor
// sequence number). It returns how many times consecutive receipts come
// from different actors.
func checkWholeLines(t *testing.T, dir string, n int, actors []string) int {
	t.Helper()
	rep := verify(t, dir, VerifyOptions{RequireSigned: true, RequireHead: true})
	if rep.Receipts != n {
		t.Fatalf("verified %d receipts, want %d", rep.Receipts, n)
	}
	if rep.Anchor == nil || rep.Anchor.Count != n || rep.AfterAnchor != 0 {
		t.Errorf("signed head %+v, want one for receipt %d", rep.Anchor, n)
	}
	files, err := listMonthFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		data, _ := os.ReadFile(f.path)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s does not end with a newline", f.path)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	if lines != n {
		t.Errorf("%d lines, want %d", lines, n)
	}
	entries, err := NewReader(dir).List(context.Background(), Month{})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	ids := map[string]bool{}
	switches := 0
	for i, e := range entries {
		r := e.Receipt
		if ids[r.ID] {
			t.Errorf("duplicate id %s", r.ID)
		}
		ids[r.ID] = true
		seq, err := strconv.Atoi(r.Reason)
		if err != nil || seq != next[r.Actor] {
			t.Errorf("%s: receipt %q, want %d", r.Actor, r.Reason, next[r.Actor])
		}
		next[r.Actor] = seq + 1
		if i > 0 && entries[i-1].Receipt.Actor != r.Actor {
			switches++
		}
	}
	if len(next) != len(actors) {
		t.Errorf("actors %v, want %v", next, actors)
	}
	return switches
}

// appendSeq appends n receipts for actor with reasons "0", "1", ...
func appendSeq(l *Log, actor string, n int) error {
	for i := range n {
		_, err := l.Append(context.Background(), Receipt{Kind: KindApproval, Actor: actor, Reason: strconv.Itoa(i)})
		if err != nil {
			return fmt.Errorf("%s #%d: %w", actor, i, err)
		}
	}
	return nil
}

func TestConcurrentAppendsGoroutines(t *testing.T) {
	dir := t.TempDir()
	key := testKey(1)
	// Two Logs on one directory (separate lock file descriptors, as two
	// processes would have), eight goroutines on each.
	logs := []*Log{openLog(t, dir, key, nil), openLog(t, dir, key, nil)}
	const perActor = 25
	var actors []string
	var wg sync.WaitGroup
	for i := range 16 {
		actor := fmt.Sprintf("client:g%d", i)
		actors = append(actors, actor)
		l := logs[i%2]
		wg.Go(func() {
			if err := appendSeq(l, actor, perActor); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	switches := checkWholeLines(t, dir, 16*perActor, actors)
	t.Logf("%d actor switches in %d receipts", switches, 16*perActor)
}

// childEnv names the log directory a re-executed test binary appends to.
const childEnv = "PLEXUS_RECEIPTS_CHILD_DIR"

// TestConcurrentAppendsTwoProcesses re-executes the test binary as a child
// process; the child and the parent each append twoProcN receipts (from
// two goroutines each) to the same directory at the same time.
func TestConcurrentAppendsTwoProcesses(t *testing.T) {
	const n = 200
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(t, dir, n)
		return
	}
	dir := t.TempDir()
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentAppendsTwoProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v; stderr: %s", line, err, stderr.String())
	}
	l := openLog(t, dir, key, nil)
	stdin.Write([]byte("go\n")) // both start now
	var wg sync.WaitGroup
	for _, actor := range []string{"parent-a", "parent-b"} {
		wg.Go(func() {
			if err := appendSeq(l, actor, n/2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rest, _ := bufio.NewReader(out).ReadString(0)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\nstdout: %s\nstderr: %s", err, rest, stderr.String())
	}
	switches := checkWholeLines(t, dir, 2*n, []string{"parent-a", "parent-b", "child-a", "child-b"})
	entries, _ := NewReader(dir).List(context.Background(), Month{})
	procSwitches := 0
	for i := 1; i < len(entries); i++ {
		if entries[i].Receipt.Actor[:5] != entries[i-1].Receipt.Actor[:5] {
			procSwitches++
		}
	}
	t.Logf("%d actor switches, %d process switches in %d receipts", switches, procSwitches, 2*n)
}

func runChild(t *testing.T, dir string, n int) {
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		t.Fatalf("parent said %q, %v", line, err)
	}
	var wg sync.WaitGroup
	for _, actor := range []string{"child-a", "child-b"} {
		wg.Go(func() {
			if err := appendSeq(l, actor, n/2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
