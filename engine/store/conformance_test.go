package store_test

import (
	"path/filepath"
	"testing"

	"github.com/plexus-agent/plexus/engine/store"
	"github.com/plexus-agent/plexus/engine/store/storetest"
)

// TestConformance runs the store conformance suite on SQLite files.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(t *testing.T) storetest.Store {
		path := filepath.Join(t.TempDir(), "plexus.db")
		return func(t *testing.T) storetest.Store {
			s, err := store.Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
