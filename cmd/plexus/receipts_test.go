package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine/receipts"
)

// taskLog writes n signed task receipts for repo under zu, as plexus serve
// --transport task would, and returns the log directory and month file.
func taskLog(t *testing.T, zu, repo string, n int) (dir, file string) {
	t.Helper()
	key, err := receipts.LoadOrCreateKey(filepath.Join(zu, "ide", "keys"))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(zu, "ide", "receipts", repo)
	l, err := receipts.Open(dir, receipts.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range n {
		r, err := l.Append(context.Background(), receipts.Receipt{Kind: receipts.KindTask, Actor: "plexus-task", Tool: "general", Reason: strings.Repeat("x", i)})
		if err != nil {
			t.Fatal(err)
		}
		file = l.Path(r)
	}
	return dir, file
}

// TestReceiptsVerifyUnknownRepo: verify (and list) of a repository with
// no receipts exit 1 naming it and the ones that have some; it exited 0
// with "0 receipts in 0 files verified" (issue 14 item 4).
func TestReceiptsVerifyUnknownRepo(t *testing.T) {
	zu, ws := t.TempDir(), t.TempDir()
	taskLog(t, zu, "repo-a", 1)
	env := []string{"ZU_ROOT=" + zu}
	for _, sub := range []string{"verify", "list", "repair"} {
		r := plexus(t, ws, "", env, "receipts", sub, "--repo", "no-such-repo")
		if r.code != 1 || !strings.Contains(r.stderr, `"no-such-repo"`) || !strings.Contains(r.stderr, "repo-a") {
			t.Errorf("receipts %s --repo no-such-repo: exit %d\n%s%s", sub, r.code, r.stdout, r.stderr)
		}
	}
	// The data directory's own log, when nothing was recorded there.
	r := plexus(t, ws, "", nil, "receipts", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, "no receipt log at") {
		t.Errorf("receipts verify on an empty data directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestReceiptsRepair: a torn last line (an append killed mid-write, its
// head not written) fails verify with a hint, plexus receipts repair
// moves it aside saying so, and verify passes; receipts removed from the
// end fail verify, and repair refuses them.
func TestReceiptsRepair(t *testing.T) {
	zu, ws := t.TempDir(), t.TempDir()
	env := []string{"ZU_ROOT=" + zu}
	dir, file := taskLog(t, zu, "repo-a", 3)
	head, err := os.ReadFile(filepath.Join(dir, receipts.HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	taskLog(t, zu, "repo-a", 1)
	// The fourth append was killed mid-line, before its head.
	data, _ := os.ReadFile(file)
	os.WriteFile(file, data[:len(data)-25], 0o600)
	os.WriteFile(filepath.Join(dir, receipts.HeadFile), head, 0o600)

	r := plexus(t, ws, "", env, "receipts", "verify", "--repo", "repo-a")
	if r.code != 1 || !strings.Contains(r.stderr, "receipts.jsonl:4:") || !strings.Contains(r.stderr, "plexus receipts repair --repo repo-a") {
		t.Fatalf("verify of a torn log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, ws, "", env, "receipts", "repair", "--repo", "repo-a")
	if r.code != 0 || !strings.Contains(r.stdout, "torn bytes at the end of "+file+" (line 4") || !strings.Contains(r.stdout, file+".torn") {
		t.Fatalf("repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = plexus(t, ws, "", env, "receipts", "verify", "--repo", "repo-a")
	if r.code != 0 || !strings.Contains(r.stdout, "3 receipts in 1 files verified (3 signed)") || !strings.Contains(r.stdout, "signed head at receipt 3") {
		t.Fatalf("verify after repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = plexus(t, ws, "", env, "receipts", "repair", "--repo", "repo-a"); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Errorf("second repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Two whole receipts removed from the end: the chain that is left
	// is valid, the signed head shows the cut.
	taskLog(t, zu, "repo-a", 2)
	lines := strings.SplitAfter(string(mustRead(t, file)), "\n")
	os.WriteFile(file, []byte(strings.Join(lines[:len(lines)-3], "")), 0o600)
	r = plexus(t, ws, "", env, "receipts", "verify", "--repo", "repo-a")
	if r.code != 1 || !strings.Contains(r.stderr, "receipts missing from the end") || !strings.Contains(r.stderr, "records 5 receipts") {
		t.Errorf("verify of a cut log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = plexus(t, ws, "", env, "receipts", "repair", "--repo", "repo-a"); r.code != 1 || !strings.Contains(r.stderr, "not repaired") {
		t.Errorf("repair of a cut log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
