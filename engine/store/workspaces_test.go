package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/store"
)

func TestWorkspacesPersist(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "plexus.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := st.SaveWorkspace(ctx, engine.WorkspaceRecord{ID: "ws_000000000001", Root: "/src/app", Registered: first}); err != nil {
		t.Fatal(err)
	}
	// Registering again renames, keeps the first registration time, and
	// an empty name keeps the old one.
	st.SaveWorkspace(ctx, engine.WorkspaceRecord{ID: "ws_000000000001", Root: "/src/app", Name: "App", Registered: first.Add(time.Hour)})
	st.SaveWorkspace(ctx, engine.WorkspaceRecord{ID: "ws_000000000001", Root: "/src/app", Registered: first.Add(2 * time.Hour)})
	st.SaveWorkspace(ctx, engine.WorkspaceRecord{ID: "ws_000000000002", Root: "/src/lib", Registered: first.Add(time.Minute)})
	st.Close()

	st, err = store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.ListWorkspaces(ctx)
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
		if got[i] != want[i] {
			t.Errorf("workspace %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
