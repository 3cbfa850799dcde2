package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
	"github.com/plexus-agent/plexus/plugins/plugintest"
)

func TestCount(t *testing.T) {
	cases := []struct {
		name, file, src string
		want            LanguageCount
	}{
		{"go", "a.go", "package a\n\n// doc\nfunc f() {} // trailing\n/* block\n still */ x := 1\n/*\n*/\n", LanguageCount{Code: 3, Comment: 4, Blank: 1}},
		{"python", "a.py", "# c\nimport os\n\n   \nx = 1  # c\n", LanguageCount{Code: 2, Comment: 1, Blank: 2}},
		{"blank line in a block comment", "a.c", "/*\n\n*/\nint x;\n", LanguageCount{Code: 1, Comment: 3}},
		{"two blocks on a line", "a.css", "/* a */ /* b */\nbody {} /* c */\n", LanguageCount{Code: 1, Comment: 1}},
		{"json has no comments", "a.json", "{\n  \"a\": 1\n}", LanguageCount{Code: 3}},
		{"no final newline", "Makefile", "all:\n\t# recipe comment", LanguageCount{Code: 1, Comment: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := languageOf(c.file)
			if l == nil {
				t.Fatalf("no language for %s", c.file)
			}
			var got LanguageCount
			l.count([]byte(c.src), &got)
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// workspace writes a small workspace with an ignored directory, a binary
// file and a file of no known language.
func writeWorkspace(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{
		".gitignore":     "vendor/\n",
		"main.go":        "package main\n\n// main runs.\nfunc main() {}\n",
		"lib/util.py":    "# util\ndef f():\n    return 1\n",
		"lib/more.py":    "x = 1\n",
		"vendor/dep.go":  "package dep\n",
		"notes.unknown":  "whatever\n",
		"image.png":      "\x89PNG\x00\x00",
		"web/index.html": "<!-- page -->\n<p>hi</p>\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestToolOverGRPC calls the tool as the engine does, over real gRPC.
func TestToolOverGRPC(t *testing.T) {
	impl, err := plugins.NewToolset(plugins.NewTool(countLines{}))
	if err != nil {
		t.Fatal(err)
	}
	ts := plugintest.StartTool(t, impl)
	specs, err := ts.Tools(t.Context())
	if err != nil || len(specs) != 1 || specs[0].Name != "count_lines_of_code" || !specs[0].ReadOnly || specs[0].Risk != engine.RiskLow {
		t.Fatalf("Tools = %+v, %v", specs, err)
	}
	var schema struct {
		Type                 string         `json:"type"`
		Properties           map[string]any `json:"properties"`
		Required             []string       `json:"required"`
		AdditionalProperties any            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(specs[0].InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["path"] == nil || len(schema.Required) != 0 || schema.AdditionalProperties != false {
		t.Errorf("inferred input schema %s (%v)", specs[0].InputSchema, err)
	}

	dir := writeWorkspace(t)
	invoke := func(args string) (engine.ToolResult, error) {
		return ts.Invoke(t.Context(), engine.InvokeRequest{CallID: "c1", Tool: "count_lines_of_code", Args: json.RawMessage(args), WorkspaceRoot: dir}, func(engine.ToolUpdate) {})
	}
	res, err := invoke(`{}`)
	if err != nil {
		t.Fatal(err)
	}
	var got result
	if err := json.Unmarshal(res.Content, &got); err != nil {
		t.Fatal(err)
	}
	want := result{Path: ".", Skipped: 3, Total: LanguageCount{Language: "total", Files: 4, Code: 6, Comment: 3, Blank: 1},
		Languages: []LanguageCount{
			{Language: "Python", Files: 2, Code: 3, Comment: 1},
			{Language: "Go", Files: 1, Code: 2, Comment: 1, Blank: 1},
			{Language: "HTML", Files: 1, Code: 1, Comment: 1},
		}}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("result\n got %s\nwant %s", g, w)
	}
	if res.Summary != "6 lines of code in 4 files, 3 languages (Python 3, Go 2, HTML 1)" {
		t.Errorf("summary %q", res.Summary)
	}

	// Overlay: a pending edit is counted as the model sees it.
	res, err = ts.Invoke(t.Context(), engine.InvokeRequest{CallID: "c2", Tool: "count_lines_of_code", Args: json.RawMessage(`{"path":"main.go"}`), WorkspaceRoot: dir,
		Overlay: map[string]engine.OverlayFile{"main.go": {Content: []byte("package main\nfunc a() {}\nfunc b() {}\n")}}}, func(engine.ToolUpdate) {})
	if err != nil || !json.Valid(res.Content) || res.Summary != "3 lines of code in 1 files, 1 languages (Go 3)" {
		t.Errorf("overlay: %s %q %v", res.Content, res.Summary, err)
	}

	for _, c := range []struct {
		args string
		code engine.ToolErrorCode
	}{
		{`{"path":"../outside"}`, engine.ToolCodePermissionDenied},
		{`{"path":"missing"}`, engine.ToolCodeNotFound},
		{`{"path":3}`, engine.ToolCodeInvalidInput},
		{`{"dir":"."}`, engine.ToolCodeInvalidInput},
		{`[]`, engine.ToolCodeInvalidInput},
	} {
		_, err := invoke(c.args)
		var te *engine.ToolError
		if !errors.As(err, &te) || te.Code != c.code {
			t.Errorf("%s: got %v, want a tool error %s", c.args, err, c.code)
		}
	}
}

// TestConformance builds the plugin binary and runs the conformance
// check any plugin author can run against theirs.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	bin := filepath.Join(t.TempDir(), "plexus-tool-loc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := plugintest.Conformance(t, bin)
	if len(r.Tools) != 1 || len(r.Results) < 7 {
		t.Errorf("report %+v", r)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
