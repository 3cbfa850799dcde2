package receipts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// killChildEnv names the log directory a re-executed test binary appends
// to until it is killed.
const killChildEnv = "PLEXUS_RECEIPTS_KILL_DIR"

// TestSIGKILLDuringAppends kills a process appending receipts (and their
// signed heads) at 20 seeded random points. After each kill every receipt
// whose Append returned is in the log, the log verifies with its head
// (after Repair moved aside a torn last line, if the kill left one), and
// a new process appends after it.
func TestSIGKILLDuringAppends(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		appendUntilKilled(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("kills a child process 20 times")
	}
	dir := t.TempDir()
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(14, 4))
	acked := map[string]bool{}
	torn := 0
	for round := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLDuringAppends$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<12)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		if l := <-lines; l != "ready" {
			t.Fatalf("round %d: child said %q", round, l)
		}
		time.Sleep(time.Duration(2+rng.IntN(60)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		for l := range lines {
			if h, ok := strings.CutPrefix(l, "ack "); ok {
				acked[h] = true
			}
		}
		_, err = NewReader(dir).Verify(context.Background(), VerifyOptions{RequireHead: true, RequireSigned: true})
		if errors.Is(err, ErrTruncated) {
			torn++
			l, oerr := Open(dir, Options{Key: key})
			if oerr != nil {
				t.Fatal(oerr)
			}
			res, rerr := l.Repair(context.Background())
			l.Close()
			if rerr != nil || len(res.Torn) != 1 {
				t.Fatalf("round %d: repair after a torn line: %+v, %v", round, res, rerr)
			}
			_, err = NewReader(dir).Verify(context.Background(), VerifyOptions{RequireHead: true, RequireSigned: true})
		}
		if err != nil && !(errors.Is(err, ErrNoHead) && len(acked) == 0) {
			t.Fatalf("round %d: the log does not verify after the kill: %v", round, err)
		}
		entries, err := NewReader(dir).List(context.Background(), Month{})
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]bool{}
		for _, e := range entries {
			in[e.Receipt.Hash] = true
		}
		for h := range acked {
			if !in[h] {
				t.Fatalf("round %d: receipt %s was appended (Append returned) but is not in the log", round, h)
			}
		}
	}
	t.Logf("20 kills: %d receipts acknowledged, all in the log; %d torn last lines moved aside", len(acked), torn)
}

// appendUntilKilled appends receipts, printing each one's hash after its
// Append returned, until the process is killed.
func appendUntilKilled(t *testing.T, dir string) {
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		r, err := l.Append(context.Background(), sample(i))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("ack " + r.Hash)
	}
}
