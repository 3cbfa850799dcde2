package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
)

func newTools(t testing.TB, opts Options) *Tools {
	t.Helper()
	tl := New(opts)
	t.Cleanup(func() { tl.Close() })
	return tl
}

// call is one Invoke with its updates.
type call struct {
	res     engine.ToolResult
	err     error
	updates []engine.ToolUpdate
}

func invoke(ctx context.Context, tl *Tools, ws, tool, args string) call {
	return invokeOver(ctx, tl, ws, nil, tool, args)
}

// invokeOver is invoke with the pending content ov of earlier calls.
func invokeOver(ctx context.Context, tl *Tools, ws string, ov map[string]engine.OverlayFile, tool, args string) call {
	var c call
	var mu sync.Mutex
	c.res, c.err = tl.Invoke(ctx, engine.InvokeRequest{CallID: "call_1", Tool: tool, Args: json.RawMessage(args), WorkspaceRoot: ws, Overlay: ov},
		func(u engine.ToolUpdate) {
			mu.Lock()
			defer mu.Unlock()
			c.updates = append(c.updates, u)
		})
	return c
}

// mustOK invokes a call that must succeed and decodes its content into out.
func mustOK(t *testing.T, tl *Tools, ws, tool, args string, out any) call {
	t.Helper()
	return mustOKOver(t, tl, ws, nil, tool, args, out)
}

// mustOKOver is mustOK with the pending content ov of earlier calls.
func mustOKOver(t *testing.T, tl *Tools, ws string, ov map[string]engine.OverlayFile, tool, args string, out any) call {
	t.Helper()
	c := invokeOver(context.Background(), tl, ws, ov, tool, args)
	if c.err != nil {
		t.Fatalf("%s %s: %v", tool, args, c.err)
	}
	if err := json.Unmarshal(c.res.Content, out); err != nil {
		t.Fatalf("%s result %s: %v", tool, c.res.Content, err)
	}
	return c
}

// snapshot records every path under dir with its mode, and its content
// (regular files) or target (symlinks).
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		case fi.Mode()&iofs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unchangedAfter checks, when the test ends, that the tree under dir is
// byte for byte what it is now: the tools never write.
func unchangedAfter(t testing.TB, dir string) {
	t.Helper()
	before := snapshot(t, dir)
	t.Cleanup(func() {
		if after := snapshot(t, dir); !maps.Equal(before, after) {
			t.Errorf("the tree under %s changed:\nbefore %v\nafter  %v", dir, before, after)
		}
	})
}

// wantToolError checks that err is a *engine.ToolError with code whose
// message contains every one of parts.
func wantToolError(t *testing.T, err error, code engine.ToolErrorCode, parts ...string) {
	t.Helper()
	var te *engine.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want *engine.ToolError %s", err, err, code)
	}
	if te.Code != code {
		t.Errorf("code = %s, want %s (message %q)", te.Code, code, te.Message)
	}
	for _, p := range parts {
		if !strings.Contains(te.Message, p) {
			t.Errorf("message %q does not contain %q", te.Message, p)
		}
	}
}

func TestSpecs(t *testing.T) {
	tl := newTools(t, Options{})
	specs, err := tl.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name     string
		risk     engine.RiskLevel
		kind     string
		args     any
		required []string
	}
	wants := []want{
		{ReadFileTool, engine.RiskLow, "", readArgs{}, []string{"path"}},
		{ListFilesTool, engine.RiskLow, "", listArgs{}, nil},
		{WriteFileTool, engine.RiskMedium, engine.ToolKindEdit, writeArgs{}, []string{"path", "content"}},
		{EditFileTool, engine.RiskMedium, engine.ToolKindEdit, editArgs{}, []string{"path", "old_string", "new_string"}},
		{DeleteFileTool, engine.RiskMedium, engine.ToolKindEdit, deleteArgs{}, []string{"path"}},
	}
	if len(specs) != len(wants) {
		t.Fatalf("got %d specs, want %d", len(specs), len(wants))
	}
	for i, w := range wants {
		s := specs[i]
		t.Run(w.name, func(t *testing.T) {
			// No tool writes: the edit tools propose, and the engine asks
			// for approval of the patch, not of each call.
			if s.Name != w.name || s.Risk != w.risk || s.Kind != w.kind || !s.ReadOnly || s.NeedsApproval {
				t.Errorf("spec = %s risk %s kind %q read-only %v approval %v", s.Name, s.Risk, s.Kind, s.ReadOnly, s.NeedsApproval)
			}
			if s.Description == "" {
				t.Error("no description")
			}
			if w.kind == engine.ToolKindEdit {
				for _, part := range []string{"applied only if they approve", `"proposed"`, "Later calls in the same response", "pending"} {
					if !strings.Contains(s.Description, part) {
						t.Errorf("description lacks %q: %s", part, s.Description)
					}
				}
			}
			var schema struct {
				Schema     string                    `json:"$schema"`
				Type       string                    `json:"type"`
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
				Additional *bool                     `json:"additionalProperties"`
			}
			if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
				t.Fatalf("schema: %v", err)
			}
			if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || schema.Type != "object" || schema.Additional == nil || *schema.Additional {
				t.Errorf("schema header = %q %q additionalProperties %v", schema.Schema, schema.Type, schema.Additional)
			}
			if !slices.Equal(schema.Required, w.required) {
				t.Errorf("required = %q, want %q", schema.Required, w.required)
			}
			// The schema's properties are exactly the fields the decoder accepts.
			var tags []string
			rt := reflect.TypeOf(w.args)
			for i := range rt.NumField() {
				tags = append(tags, rt.Field(i).Tag.Get("json"))
			}
			var props []string
			for name, p := range schema.Properties {
				props = append(props, name)
				if d, _ := p["description"].(string); d == "" {
					t.Errorf("property %s has no description", name)
				}
			}
			slices.Sort(tags)
			slices.Sort(props)
			if !slices.Equal(tags, props) {
				t.Errorf("schema properties %q, decoder fields %q", props, tags)
			}
		})
	}
	// Descriptions state the configured limits.
	tl2 := newTools(t, Options{MaxReadLines: 77, MaxFileBytes: 3 << 20})
	specs2, _ := tl2.Tools(context.Background())
	if !strings.Contains(specs2[0].Description, "77 lines") || !strings.Contains(specs2[2].Description, "3 MiB") {
		t.Errorf("descriptions do not follow Options:\n%s\n%s", specs2[0].Description, specs2[2].Description)
	}
}

func TestInvokeErrors(t *testing.T) {
	ws := t.TempDir()
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	ctx := context.Background()

	c := invoke(ctx, tl, ws, "delete_everything", `{}`)
	wantToolError(t, c.err, engine.ToolCodeUnknownTool, `"delete_everything"`, "read_file, list_files, write_file, edit_file, delete_file")

	c = invoke(ctx, tl, "", ReadFileTool, `{"path":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeFailed, "without a workspace root")

	c = invoke(ctx, tl, "relative/dir", ReadFileTool, `{"path":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeFailed, "relative workspace root")

	c = invoke(ctx, tl, filepath.Join(ws, "missing"), ReadFileTool, `{"path":"a"}`)
	wantToolError(t, c.err, engine.ToolCodeNotFound, "does not exist")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c = invoke(cctx, tl, ws, ListFilesTool, `{}`)
	wantToolError(t, c.err, engine.ToolCodeCancelled)
}

func TestDecodeErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{"a.txt": "a\n"})
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	tests := []struct {
		tool, args string
		parts      []string
	}{
		{ReadFileTool, `{"path":"a.txt","lines":5}`, []string{`unknown field "lines"`, "path, start_line, end_line"}},
		{ReadFileTool, `{"Path":"a.txt"}`, []string{`unknown field "Path"`}},
		{ReadFileTool, `{"path":"a.txt","b":1,"a":2}`, []string{`unknown fields "a", "b"`}},
		{ReadFileTool, `{"path":7}`, []string{`"path"`, "must be a string", "number"}},
		{ReadFileTool, `{"path":"a.txt","start_line":"10"}`, []string{`"start_line"`, "an integer", "string"}},
		{ReadFileTool, `{"path":"a.txt","start_line":1.5}`, []string{`"start_line"`, "an integer"}},
		{ReadFileTool, `{"path":"a.txt","start_line":0}`, []string{`"start_line"`, "at least 1"}},
		{ReadFileTool, `{"path":"a.txt","start_line":5,"end_line":2}`, []string{`"end_line"`, "start_line"}},
		{ReadFileTool, `{}`, []string{`missing required field "path"`}},
		{ReadFileTool, `{"path":null}`, []string{`missing required field "path"`}},
		{ReadFileTool, `["a.txt"]`, []string{"must be a JSON object", "an array"}},
		{ReadFileTool, `{"path":"a.txt"} {}`, []string{"single JSON object"}},
		{ReadFileTool, `{"path":"a.txt"`, []string{"not valid JSON"}},
		{ListFilesTool, `{"recursive":"yes"}`, []string{`"recursive"`, "true or false"}},
		{ListFilesTool, `{"max_results":0}`, []string{`"max_results"`, "between 1 and 10000"}},
		{ListFilesTool, `{"pattern":"[a-"}`, []string{`"pattern"`, "not a valid glob"}},
		{ListFilesTool, `{"pattern":""}`, []string{`"pattern"`, "empty"}},
		{ListFilesTool, `{"include":"*.go"}`, []string{`unknown field "include"`}},
		{WriteFileTool, `{"path":"b.txt"}`, []string{`missing required field "content"`}},
		{WriteFileTool, `{"content":"x"}`, []string{`missing required field "path"`}},
		{WriteFileTool, `{"path":"b.txt","content":["x"]}`, []string{`"content"`, "a string"}},
		{WriteFileTool, `{"path":"b.txt","content":"x","create_dirs":1}`, []string{`"create_dirs"`, "true or false"}},
		{WriteFileTool, `{"path":"b.txt","content":"x","acceptance_criteria":"tests pass"}`, []string{`"acceptance_criteria"`, "an array of strings", "string"}},
		{WriteFileTool, `{"path":"b.txt","content":"x","acceptance_criteria":["ok",3]}`, []string{`"acceptance_criteria"`, "an array of strings", "number"}},
		{WriteFileTool, `{"path":"b.txt","content":"x","rationale":true}`, []string{`"rationale"`, "a string"}},
		{WriteFileTool, `{"path":"b.txt","content":"x","mode":"0755"}`, []string{`unknown field "mode"`, "path, content, create_dirs, rationale, acceptance_criteria"}},
		{EditFileTool, `{"path":"a.txt","new_string":"b"}`, []string{`missing required field "old_string"`}},
		{EditFileTool, `{"path":"a.txt","old_string":"a"}`, []string{`missing required field "new_string"`}},
		{EditFileTool, `{"old_string":"a","new_string":"b"}`, []string{`missing required field "path"`}},
		{EditFileTool, `{"path":"a.txt","old_string":"a","new_string":"b","replace_all":"yes"}`, []string{`"replace_all"`, "true or false"}},
		{EditFileTool, `{"path":"a.txt","old_string":"","new_string":"b"}`, []string{`"old_string"`, "is empty", "write_file"}},
		{EditFileTool, `{"path":"a.txt","old_string":"a","new_string":"a"}`, []string{`"new_string"`, "same as old_string"}},
		{EditFileTool, `{"path":"a.txt","old":"a","new":"b"}`, []string{`unknown fields "new", "old"`, "old_string, new_string"}},
		{DeleteFileTool, `{}`, []string{`missing required field "path"`}},
		{DeleteFileTool, `{"path":"a.txt","acceptance_criteria":[]}`, []string{`unknown field "acceptance_criteria"`, "path, rationale"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, tt.tool, tt.args)
			wantToolError(t, c.err, engine.ToolCodeInvalidInput, append([]string{tt.tool + ":"}, tt.parts...)...)
		})
	}
}

// TestRootReopened replaces the workspace directory between calls; the
// cached root must not keep serving the deleted one.
func TestRootReopened(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	testtree.Write(t, ws, map[string]string{"a.txt": "old\n"})
	tl := newTools(t, Options{})
	var r ReadResult
	mustOK(t, tl, ws, ReadFileTool, `{"path":"a.txt"}`, &r)
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, ws, map[string]string{"a.txt": "new\n"})
	unchangedAfter(t, ws)
	mustOK(t, tl, ws, ReadFileTool, `{"path":"a.txt"}`, &r)
	if r.Content != "new\n" {
		t.Errorf("content = %q, want the new workspace's", r.Content)
	}
}

// TestConcurrentCalls runs every tool at once on two workspaces (run with
// -race).
func TestConcurrentCalls(t *testing.T) {
	wss := []string{t.TempDir(), t.TempDir()}
	for _, ws := range wss {
		testtree.Write(t, ws, map[string]string{"a.txt": "alpha\nbeta\n", "src/b.go": "package b // beta\n"})
		unchangedAfter(t, ws)
	}
	tl := newTools(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := wss[i%2]
			var c call
			switch i % 5 {
			case 0:
				c = invoke(context.Background(), tl, ws, ReadFileTool, `{"path":"a.txt"}`)
			case 1:
				c = invoke(context.Background(), tl, ws, ListFilesTool, `{}`)
			case 2:
				c = invoke(context.Background(), tl, ws, WriteFileTool, fmt.Sprintf(`{"path":"out/%d.txt","content":"x","create_dirs":true}`, i))
			case 3:
				c = invoke(context.Background(), tl, ws, EditFileTool, `{"path":"src/b.go","old_string":"beta","new_string":"gamma"}`)
			case 4:
				c = invoke(context.Background(), tl, ws, DeleteFileTool, `{"path":"a.txt"}`)
			}
			if c.err != nil {
				errs <- c.err
			} else if i%5 >= 2 && len(c.res.Edits) != 1 {
				errs <- fmt.Errorf("call %d proposed %d edits, want 1", i, len(c.res.Edits))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 2150: "2.1 KiB", 40 << 10: "40 KiB", 1 << 20: "1 MiB", 5<<20 + 1<<19: "5.5 MiB", 3 << 30: "3 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
