package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-agent/plexus/engine"
)

// bufferHost is a Host whose client holds an unsaved buffer of a.go and
// fails for b.go.
type bufferHost struct {
	fakeHost
	asked []string
}

func (h *bufferHost) ReadBuffer(_ context.Context, path string) ([]byte, bool, error) {
	h.asked = append(h.asked, path)
	switch filepath.Base(path) {
	case "a.go":
		return []byte("package a // unsaved"), true, nil
	case "b.go":
		return nil, false, errors.New("the editor is gone")
	}
	return nil, false, nil
}

func TestBufferReaderFillsTheOverlayOfReadOnlyCalls(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{calls: []engine.ToolCall{
			call("c1", "read", `{"path":"a.go"}`),
			call("c2", "read", `{"paths":["b.go","c.go","../outside.go","dir"]}`),
			call("c3", "write", `{"path":"a.go"}`),
		}},
		step{text: "done"})
	root := f.sess.Workspace().Root
	for _, name := range []string{"a.go", "b.go", "c.go"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("package a // on disk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := &bufferHost{fakeHost: fakeHost{approve: true}}
	res, _ := f.run(t, context.Background(), "look", engine.TurnOptions{Host: host})
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn %+v", res)
	}
	// Files inside the workspace that exist were asked about, by absolute
	// path; the directory, the path outside and the write call's were not.
	want := []string{filepath.Join(root, "a.go"), filepath.Join(root, "b.go"), filepath.Join(root, "c.go")}
	if !slices.Equal(host.asked, want) {
		t.Errorf("asked %v, want %v", host.asked, want)
	}
	ov := f.tools.overlays
	if len(ov) != 3 {
		t.Fatalf("%d calls ran", len(ov))
	}
	if got := string(ov[0]["a.go"].Content); got != "package a // unsaved" {
		t.Errorf("read a.go overlay %q", got)
	}
	if len(ov[1]) != 0 {
		t.Errorf("b.go failed and c.go had nothing: overlay %v", ov[1])
	}
	if len(ov[2]) != 0 {
		t.Errorf("the write call got an overlay %v", ov[2])
	}
}

func TestReadOnlyTurnDeniesChangesWhateverThePolicy(t *testing.T) {
	f := newFixture(t, engine.Options{},
		step{calls: []engine.ToolCall{call("c1", "read", `{"path":"a.go"}`), call("c2", "write", `{"path":"a.go"}`)}},
		step{text: "done"})
	host := &fakeHost{approve: true}
	res, events := f.run(t, context.Background(), "change it", engine.TurnOptions{Host: host, ApproveAll: true, ReadOnly: true})
	if res.Status != engine.TurnCompleted {
		t.Fatalf("turn %+v", res)
	}
	if !slices.Equal(f.tools.invoked, []string{"read"}) || len(host.asked) != 0 {
		t.Errorf("invoked %v, asked %v", f.tools.invoked, host.asked)
	}
	var denied *engine.ToolCallEvent
	for _, e := range events {
		if tc, ok := e.Data.(*engine.ToolCallEvent); ok && tc.Status == engine.ToolDenied {
			denied = tc
		}
	}
	if denied == nil || denied.Name != "write" || !strings.Contains(denied.Error, "the session is read-only") {
		t.Errorf("denial %+v", denied)
	}
}
