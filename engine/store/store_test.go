package store

import (
	"context"
	"testing"
)

// The store's behaviour is tested by the conformance suite
// (storetest.Run, in conformance_test.go); the tests in this package look
// below the interface.

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
