package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func testWorkspaces(t *testing.T, d *db) {
	s := d.handle(t)
	if got, err := s.ListWorkspaces(bg()); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty store: %#v, %v; want an empty, non-nil list", got, err)
	}
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, rec := range []engine.WorkspaceRecord{
		{ID: "ws_000000000001", Root: "/src/app", Registered: first},
		// Registering again renames, keeps the first registration time,
		// and an empty name keeps the old one.
		{ID: "ws_000000000001", Root: "/src/app", Name: "App", Registered: first.Add(time.Hour)},
		{ID: "ws_000000000001", Root: "/src/app", Registered: first.Add(2 * time.Hour)},
		{ID: "ws_000000000002", Root: "/src/lib", Registered: first.Add(time.Minute)},
	} {
		if err := s.SaveWorkspace(bg(), rec); err != nil {
			t.Fatal(err)
		}
	}
	s = d.reopen(t, s)
	got, err := s.ListWorkspaces(bg())
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.WorkspaceRecord{
		{ID: "ws_000000000001", Root: "/src/app", Name: "App", Registered: first},
		{ID: "ws_000000000002", Root: "/src/lib", Name: "lib", Registered: first.Add(time.Minute)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Root != want[i].Root || got[i].Name != want[i].Name || !got[i].Registered.Equal(want[i].Registered) {
			t.Errorf("workspace %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func testPatches(t *testing.T, d *db) {
	s := d.handle(t)
	set := &engine.PatchSet{ID: "pset_1", Rationale: "fix", Files: []engine.FilePatch{{ID: "patch_1", Path: "a.go", Op: "modify", Base: []byte("old\n"), New: []byte("new\n")}}}
	if err := s.SavePatchSet(bg(), "ws_1", set); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i, id := range []string{"apl_1", "apl_2"} {
		a := &engine.AppliedPatch{ID: id, SetID: "pset_1", Workspace: "ws_1", Time: t0.Add(time.Duration(i) * time.Second),
			Files: []engine.AppliedFile{{Path: "a.go", Op: "modify", Before: []byte{0, 1, 2, 255}, BeforeExisted: true, Mode: 0o640, AfterHash: "sha256:x"}}}
		if err := s.SaveApplied(bg(), a); err != nil {
			t.Fatal(err)
		}
	}
	s = d.reopen(t, s)
	got, err := s.PatchSet(bg(), "pset_1")
	if err != nil || got.Files[0].Path != "a.go" || string(got.Files[0].New) != "new\n" {
		t.Fatalf("patch set %+v %v", got, err)
	}
	if _, err := s.PatchSet(bg(), "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("missing set: %v, want ErrNotFound", err)
	}
	list, err := s.Applied(bg(), "ws_1", 0)
	if err != nil || len(list) != 2 || list[0].ID != "apl_2" || !bytes.Equal(list[1].Files[0].Before, []byte{0, 1, 2, 255}) || list[1].Files[0].Mode != 0o640 {
		t.Fatalf("applied %+v %v", list, err)
	}
	if err := s.MarkUndone(bg(), "apl_2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUndone(bg(), "apl_2", time.Now()); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second undo: %v, want ErrNotFound", err)
	}
	s = d.reopen(t, s)
	list, _ = s.Applied(bg(), "ws_1", 1)
	if len(list) != 1 || list[0].UndoneAt == nil {
		t.Errorf("after undo: %+v", list)
	}
	if other, _ := s.Applied(bg(), "ws_2", 0); len(other) != 0 {
		t.Errorf("another workspace sees %d changes", len(other))
	}
}

func testPolicyDocs(t *testing.T, d *db) {
	s := d.handle(t)
	if _, ok, err := s.PolicyDoc(bg(), "ws_1"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	for _, doc := range []string{`{"version":1}`, `{"version":1,"rules":[]}`} {
		if err := s.SetPolicyDoc(bg(), "ws_1", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		s = d.reopen(t, s)
		got, ok, err := s.PolicyDoc(bg(), "ws_1")
		if !ok || err != nil || string(got) != doc {
			t.Errorf("got %s %v %v, want %s", got, ok, err, doc)
		}
	}
}
