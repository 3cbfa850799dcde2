package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestRecorder(t *testing.T) {
	dir := t.TempDir()
	rec := NewRecorder(openLog(t, dir, testKey(1), newClock("2025-03-01T00:00:00Z", time.Second)))
	code := 1
	diff := Digest([]byte("--- a/x\n+++ b/x\n"))
	records := []engine.DecisionRecord{
		{Kind: "approval", Actor: "", Workspace: "w", Session: "s", Turn: "t", Tool: "write_file",
			Args: json.RawMessage(`{"path": "x", "content": "y"}`), Reason: "asked", Time: time.Unix(0, 0)},
		{Kind: "command", Actor: "policy", Tool: "run_command", Args: json.RawMessage(`{"command":`), ExitCode: &code},
		{Kind: "patch_apply", Actor: "approve-all", DiffHash: diff},
	}
	for _, d := range records {
		if err := rec.Record(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := NewReader(dir).List(context.Background(), Month{})
	if err != nil || len(entries) != 3 {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	a, b, c := entries[0].Receipt, entries[1].Receipt, entries[2].Receipt
	wantArgs, _ := ArgsDigest([]byte(`{"content":"y","path":"x"}`))
	if a.Kind != KindApproval || a.Actor != "user" || a.Workspace != "w" || a.Session != "s" || a.Turn != "t" ||
		a.Tool != "write_file" || a.ArgsDigest != wantArgs || a.Reason != "asked" || a.Time.Year() != 2025 {
		t.Errorf("approval: %+v", a)
	}
	if b.Kind != KindCommand || b.ArgsDigest != Digest([]byte(`{"command":`)) || b.ExitCode == nil || *b.ExitCode != 1 {
		t.Errorf("command: %+v", b)
	}
	if c.Kind != KindPatchApply || c.Actor != "approve-all" || c.DiffHash != diff || c.ArgsDigest != "" {
		t.Errorf("patch: %+v", c)
	}
	verify(t, dir, VerifyOptions{RequireSigned: true})

	if err := rec.Record(context.Background(), engine.DecisionRecord{Kind: "approve", Actor: "user"}); !errors.Is(err, ErrInvalidReceipt) {
		t.Errorf("unknown kind: got %v", err)
	}
}
