// Package storetest is the conformance suite of the engine's state stores:
// the behaviour engine/store (SQLite) has and any other backend (such as
// one on PostgreSQL) must have, including the durability model of the
// engine/store package documentation. A backend's test calls Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) func(t *testing.T) storetest.Store {
//			path := filepath.Join(t.TempDir(), "plexus.db")
//			return func(t *testing.T) storetest.Store {
//				s, err := store.Open(t.Context(), path)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			}
//		})
//	}
//
// The suite covers records, history, events, the atomic event-and-history
// write, session models, workspaces, patches, policy documents, many
// writers on two handles at once (as two processes would), and an engine
// restarted on the database after a turn was interrupted (the reconcile of
// the durability model).
package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/policy"
)

// Store is what a backend implements: every store interface of the engine
// and of engine/policy, and Close.
type Store interface {
	engine.SessionStore
	engine.SessionModelStore
	engine.WorkspaceStore
	engine.PatchStore
	policy.DocStore
	Close() error
}

// Opener prepares a fresh, empty database for one test and returns a
// function that opens a handle on it. Every call of that function opens
// another handle on the same database, as another process would; the
// suite closes each handle it opens (once), and expects what one handle
// committed to be visible through a handle opened later.
type Opener func(t *testing.T) func(t *testing.T) Store

// Run runs the suite against the backend that open makes, one subtest per
// behaviour.
func Run(t *testing.T, open Opener) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newDB(t, open))
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, db *db)
}{
	{"SessionRecords", testSessionRecords},
	{"SessionHistory", testSessionHistory},
	{"SessionEvents", testSessionEvents},
	{"EventWithHistoryIsAtomic", testEventWithHistory},
	{"DeleteSession", testDeleteSession},
	{"SessionModel", testSessionModel},
	{"Workspaces", testWorkspaces},
	{"Patches", testPatches},
	{"PolicyDocs", testPolicyDocs},
	{"ConcurrentWriters", testConcurrentWriters},
	{"CancelledWrite", testCancelledWrite},
	{"ReconcileInterruptedTurn", testReconcile},
}

// db is one test's database.
type db struct {
	open func(t *testing.T) Store
}

func newDB(t *testing.T, open Opener) *db {
	return &db{open: open(t)}
}

// handle opens a handle that is closed when the test ends (unless the
// test closed it first).
func (d *db) handle(t *testing.T) Store {
	t.Helper()
	h := &onceClosed{Store: d.open(t)}
	t.Cleanup(func() { h.Close() })
	return h
}

// reopen closes old and opens a new handle, as a restarted process would.
func (d *db) reopen(t *testing.T, old Store) Store {
	t.Helper()
	if err := old.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return d.handle(t)
}

// onceClosed closes its Store once, however often Close is called.
type onceClosed struct {
	Store
	once sync.Once
	err  error
}

func (h *onceClosed) Close() error {
	h.once.Do(func() { h.err = h.Store.Close() })
	return h.err
}

func bg() context.Context { return context.Background() }
