package store

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPatchesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plexus.db")
	s := open(t, path)
	set := &engine.PatchSet{ID: "pset_1", Rationale: "fix", Files: []engine.FilePatch{{ID: "patch_1", Path: "a.go", Op: "modify", Base: []byte("old\n"), New: []byte("new\n")}}}
	if err := s.SavePatchSet(ctx, "ws_1", set); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i, id := range []string{"apl_1", "apl_2"} {
		a := &engine.AppliedPatch{ID: id, SetID: "pset_1", Workspace: "ws_1", Time: t0.Add(time.Duration(i) * time.Second),
			Files: []engine.AppliedFile{{Path: "a.go", Op: "modify", Before: []byte{0, 1, 2, 255}, BeforeExisted: true, Mode: 0o640, AfterHash: "sha256:x"}}}
		if err := s.SaveApplied(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open(t, path)
	got, err := s.PatchSet(ctx, "pset_1")
	if err != nil || got.Files[0].Path != "a.go" || string(got.Files[0].New) != "new\n" {
		t.Fatalf("patch set %+v %v", got, err)
	}
	if _, err := s.PatchSet(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("missing set: %v", err)
	}
	list, err := s.Applied(ctx, "ws_1", 0)
	if err != nil || len(list) != 2 || list[0].ID != "apl_2" || !bytes.Equal(list[1].Files[0].Before, []byte{0, 1, 2, 255}) || list[1].Files[0].Mode != 0o640 {
		t.Fatalf("applied %+v %v", list, err)
	}
	if err := s.MarkUndone(ctx, "apl_2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUndone(ctx, "apl_2", time.Now()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second undo: %v", err)
	}
	list, _ = s.Applied(ctx, "ws_1", 1)
	if len(list) != 1 || list[0].UndoneAt == nil {
		t.Errorf("after undo: %+v", list)
	}
	if other, _ := s.Applied(ctx, "ws_2", 0); len(other) != 0 {
		t.Errorf("another workspace sees %d changes", len(other))
	}
}

func TestPolicyDoc(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "plexus.db"))
	if _, ok, err := s.PolicyDoc(ctx, "ws_1"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	for _, doc := range []string{`{"version":1}`, `{"version":1,"rules":[]}`} {
		if err := s.SetPolicyDoc(ctx, "ws_1", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.PolicyDoc(ctx, "ws_1")
		if !ok || err != nil || string(got) != doc {
			t.Errorf("got %s %v %v", got, ok, err)
		}
	}
}
