package unixrpc_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSessionSaveLoad(t *testing.T) {
	e := newEnv(t)
	e.model.set("remember the number 42", step{chunks: []string{"OK:\n```text\n42\n```\n"}})
	e.model.set("which number?", step{chunks: []string{"42"}})
	c := e.initialized(t)
	qid := c.call("agent.query", map[string]any{"message": "remember the number 42"}).str("query_id")
	c.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })

	path := filepath.Join(e.tmp, "s1.json")
	r := c.call("session.save", map[string]any{"path": path, "include_history": true, "include_blocks": true})
	if r.Error != nil || r.get("saved") != true || r.str("path") != path || r.get("size").(float64) <= 0 {
		t.Fatalf("session.save: %s", r.raw)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != int64(r.get("size").(float64)) {
		t.Errorf("file mode %v size %d, result %s", fi.Mode(), fi.Size(), r.raw)
	}
	if ents, _ := os.ReadDir(e.tmp); len(ents) != 1 {
		t.Errorf("the directory holds %d entries (temporary files left?)", len(ents))
	}
	var file struct {
		Format   string          `json:"format"`
		Version  int             `json:"version"`
		Checksum string          `json:"checksum"`
		Session  json.RawMessage `json:"session"`
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &file); err != nil || file.Format != "plexus-session" || file.Version != 1 || !strings.HasPrefix(file.Checksum, "sha256:") {
		t.Fatalf("file: %v %s", err, data)
	}
	var saved struct {
		ID      string            `json:"id"`
		History []json.RawMessage `json:"history"`
		Blocks  []json.RawMessage `json:"blocks"`
	}
	json.Unmarshal(file.Session, &saved)
	if len(saved.History) != 2 || len(saved.Blocks) != 1 {
		t.Fatalf("saved %d messages and %d blocks: %s", len(saved.History), len(saved.Blocks), file.Session)
	}

	// Another client loads it and goes on with the conversation.
	c2 := e.initialized(t)
	r = c2.call("session.load", map[string]any{"path": path})
	if r.Error != nil || r.get("loaded") != true || r.get("session.messages_count") != 2.0 || r.get("session.blocks_count") != 1.0 ||
		r.str("session.source_id") != saved.ID || r.str("session.id") == "" || r.get("session.created").(float64) <= 0 {
		t.Fatalf("session.load: %s", r.raw)
	}
	qid = c2.call("agent.query", map[string]any{"message": "which number?"}).str("query_id")
	c2.waitFor("stream.complete", func(m msg) bool { return m.str("query_id") == qid })
	turns := e.model.turnHistories()
	last := turns[len(turns)-1]
	if len(last) != 2 || last[0] != "remember the number 42" {
		t.Errorf("the loaded session's turn saw %q", last)
	}
	// Saving the loaded session keeps its blocks and adds the new turn.
	path2 := filepath.Join(e.tmp, "s2.json")
	r = c2.call("session.save", map[string]any{"path": path2, "include_blocks": false})
	if r.Error != nil {
		t.Fatal(r.raw)
	}
	data, _ = os.ReadFile(path2)
	json.Unmarshal(data, &file)
	saved.History, saved.Blocks = nil, nil
	json.Unmarshal(file.Session, &saved)
	if len(saved.History) != 4 || saved.Blocks != nil {
		t.Errorf("second save: %d messages, blocks %v", len(saved.History), saved.Blocks)
	}
	// Saving again over the file replaces it atomically.
	if r := c2.call("session.save", map[string]any{"path": path2}); r.Error != nil {
		t.Fatal(r.raw)
	}
	// A relative path and no path go to the session directory.
	if r := c2.call("session.save", map[string]any{"path": "mine.json"}); r.Error != nil || filepath.Base(r.str("path")) != "mine.json" {
		t.Errorf("relative path: %s", r.raw)
	}
	if r := c2.call("session.save", map[string]any{}); r.Error != nil || !strings.HasSuffix(r.str("path"), ".json") {
		t.Errorf("no path: %s", r.raw)
	}
}

// writeSessionFile writes a session file as session.save does, with a
// correct checksum over body.
func writeSessionFile(t *testing.T, path string, version int, body string) {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(body)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(compact.Bytes())
	doc, _ := json.Marshal(map[string]any{"format": "plexus-session", "version": version,
		"checksum": "sha256:" + hex.EncodeToString(sum[:]), "session": json.RawMessage(compact.Bytes())})
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSessionLoadRefuses(t *testing.T) {
	e := newEnv(t)
	c := e.initialized(t)
	good := filepath.Join(e.tmp, "good.json")
	if r := c.call("session.save", map[string]any{"path": good}); r.Error != nil {
		t.Fatal(r.raw)
	}
	data, _ := os.ReadFile(good)
	valid := func(root string) string {
		return `{"id":"ses_1","created":1696435000,"saved":1696435100,"workspace":{"id":"ws_x","root":` + quote(root) + `},` +
			`"protocol_version":"1.0.0","messages_count":1,"history":[{"role":"user","content":"hi"}],"blocks":[]}`
	}
	write := func(name, content string) string {
		p := filepath.Join(e.tmp, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	tests := []struct {
		name, path string
		code       int
		reason     string
		inMessage  string
	}{
		{"changed byte", write("changed.json", strings.Replace(string(data), `"protocol_version":"1.0.0"`, `"protocol_version":"1.0.1"`, 1)), -32602, "corrupt_session_file", "checksum does not match"},
		{"cut short", write("cut.json", string(data[:len(data)/2])), -32602, "corrupt_session_file", "not a readable session file"},
		{"not JSON", write("garbage.json", "\x00\x01garbage"), -32602, "corrupt_session_file", "not a readable session file"},
		{"other format", write("other.json", `{"format":"x","version":1,"checksum":"","session":{}}`), -32602, "corrupt_session_file", "not a Plexus session file"},
		{"unknown member", write("extra.json", strings.Replace(string(data), `"version":1`, `"version":1,"x":2`, 1)), -32602, "corrupt_session_file", "unknown field"},
		{"newer version", func() string {
			p := filepath.Join(e.tmp, "v2.json")
			writeSessionFile(t, p, 2, valid(e.root))
			return p
		}(), -32602, "corrupt_session_file", "newer Plexus"},
		{"bad role", func() string {
			p := filepath.Join(e.tmp, "role.json")
			writeSessionFile(t, p, 1, strings.Replace(valid(e.root), `"role":"user"`, `"role":"root"`, 1))
			return p
		}(), -32602, "corrupt_session_file", `unknown role "root"`},
		{"other workspace", func() string {
			p := filepath.Join(e.tmp, "elsewhere.json")
			writeSessionFile(t, p, 1, valid("/somewhere/else"))
			return p
		}(), -32602, "workspace_mismatch", "saved in workspace /somewhere/else"},
		{"missing", filepath.Join(e.tmp, "nope.json"), -32602, "invalid_path", "does not exist"},
		{"not .json", write("notes.txt", "{}"), -32602, "invalid_path", "must end in .json"},
		{"climbs out", "../../x.json", -32602, "invalid_path", "must stay inside"},
		{"empty", "", -32602, "invalid_path", "path is required"},
		{"outside the roots", "/etc/plexus-test.json", -32005, "path_not_allowed", "outside the directories"},
		{"symlink", func() string {
			p := filepath.Join(e.tmp, "link.json")
			os.Symlink(good, p)
			return p
		}(), -32602, "invalid_path", "is a symlink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.call("session.load", map[string]any{"path": tt.path})
			if errCode(r) != tt.code || !strings.Contains(string(r.Error.Data), `"reason":"`+tt.reason+`"`) || !strings.Contains(r.Error.Message, tt.inMessage) {
				t.Fatalf("got %s, want %d %s %q", r.raw, tt.code, tt.reason, tt.inMessage)
			}
		})
	}
	// A hand-made valid file loads.
	p := filepath.Join(e.tmp, "handmade.json")
	writeSessionFile(t, p, 1, valid(e.root))
	if r := c.call("session.load", map[string]any{"path": p}); r.Error != nil || r.get("session.messages_count") != 1.0 || r.str("session.source_id") != "ses_1" {
		t.Fatalf("hand-made file: %s", r.raw)
	}
	// Save refuses the same paths.
	for _, p := range []string{"/etc/plexus-test.json", filepath.Join(e.tmp, "link.json"), filepath.Join(e.tmp, "nodir", "x.json")} {
		if r := c.call("session.save", map[string]any{"path": p}); r.Error == nil {
			t.Errorf("session.save to %s: %s", p, r.raw)
		}
	}
	if target, _ := os.ReadFile(good); !bytes.Equal(target, data) {
		t.Error("a save through a symlink changed its target")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSessionSaveKeepsOtherFiles: session.save does not replace a file
// that is not a session file (-32005, the file unchanged); a session file
// and a new path are fine.
func TestSessionSaveKeepsOtherFiles(t *testing.T) {
	e := newEnv(t)
	c := e.initialized(t)
	for name, content := range map[string]string{
		"package.json":  `{"name": "app", "version": "1.0.0"}`,
		"settings.json": `{"format": "plexus-session", "version": 1, "checksum": "x", "session": {}, "editor": "vim"}`,
		"empty.json":    "",
		"notjson.json":  "hello",
	} {
		p := filepath.Join(e.tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := c.call("session.save", map[string]any{"path": p})
		if errCode(r) != -32005 || !strings.HasPrefix(r.Error.Message, "Permission denied") || !strings.Contains(r.Error.Message, "not a Plexus session file") {
			t.Errorf("%s: session.save: %s", name, r.raw)
		}
		if data, _ := os.ReadFile(p); string(data) != content {
			t.Errorf("%s was replaced: %q", name, data)
		}
	}
	p := filepath.Join(e.tmp, "new.json")
	if r := c.call("session.save", map[string]any{"path": p}); r.Error != nil {
		t.Fatalf("new file: %s", r.raw)
	}
	if r := c.call("session.save", map[string]any{"path": p}); r.Error != nil {
		t.Fatalf("over a session file: %s", r.raw)
	}
	writeSessionFile(t, filepath.Join(e.tmp, "old.json"), 1, `{"id":"x"}`)
	if r := c.call("session.save", map[string]any{"path": filepath.Join(e.tmp, "old.json")}); r.Error != nil {
		t.Fatalf("over a session file it cannot load: %s", r.raw)
	}
}
