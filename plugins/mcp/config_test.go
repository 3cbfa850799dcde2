package mcp_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/plugins/mcp"
)

func TestParseConfig(t *testing.T) {
	cfg, err := mcp.ParseConfig([]byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/w"], "env": {"A": "1"}, "cwd": "/w", "timeout": "90s", "type": "stdio"},
		"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}, "type": "http"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]mcp.ServerConfig{
		"fs":  {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/w"}, Env: map[string]string{"A": "1"}, Cwd: "/w", Timeout: 90 * time.Second},
		"web": {URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
	}
	if !reflect.DeepEqual(cfg.Servers, want) {
		t.Errorf("got %+v\nwant %+v", cfg.Servers, want)
	}
	if got := cfg.Servers["web"].Transport(); got != mcp.TransportHTTP {
		t.Errorf("transport %q", got)
	}
	if got := cfg.Servers["fs"].Target(); got != "npx -y @modelcontextprotocol/server-filesystem /w" {
		t.Errorf("target %q", got)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, json, field, msg string
	}{
		{"not an object", `[]`, "", "want a JSON object"},
		{"trailing data", `{"mcpServers": {}} {}`, "", "unexpected data"},
		{"unknown top key", `{"mcpServers": {}, "servers": {}}`, "servers", "unknown key"},
		{"no mcpServers", `{}`, "", `no "mcpServers"`},
		{"servers not an object", `{"mcpServers": []}`, "mcpServers", "want a JSON object"},
		{"bad name", `{"mcpServers": {"Fs": {"command": "x"}}}`, "mcpServers.Fs", "bad server name"},
		{"name with __", `{"mcpServers": {"a__b": {"command": "x"}}}`, "mcpServers.a__b", `contains "__"`},
		{"long name", `{"mcpServers": {"abcdefghijklmnopqrstuvwxyz": {"command": "x"}}}`, "mcpServers.abcdefghijklmnopqrstuvwxyz", "longer than 24"},
		{"unknown key", `{"mcpServers": {"fs": {"command": "x", "arg": []}}}`, "mcpServers.fs.arg", "unknown key"},
		{"both", `{"mcpServers": {"fs": {"command": "x", "url": "http://h/mcp"}}}`, "mcpServers.fs", "both"},
		{"neither", `{"mcpServers": {"fs": {"args": ["a"]}}}`, "mcpServers.fs", `needs "command"`},
		{"args type", `{"mcpServers": {"fs": {"command": "x", "args": "a b"}}}`, "mcpServers.fs.args", "a JSON string is not allowed here (want an array of strings)"},
		{"env type", `{"mcpServers": {"fs": {"command": "x", "env": {"A": 1}}}}`, "mcpServers.fs.env", "want an object of strings"},
		{"env name", `{"mcpServers": {"fs": {"command": "x", "env": {"A=B": "1"}}}}`, "mcpServers.fs.env", "bad variable name"},
		{"bad url", `{"mcpServers": {"web": {"url": "ftp://h/mcp"}}}`, "mcpServers.web.url", "not an http"},
		{"url without host", `{"mcpServers": {"web": {"url": "http:///mcp"}}}`, "mcpServers.web.url", "not an http"},
		{"headers on stdio", `{"mcpServers": {"fs": {"command": "x", "headers": {"A": "b"}}}}`, "mcpServers.fs.headers", "HTTP servers only"},
		{"args on http", `{"mcpServers": {"web": {"url": "http://h/mcp", "args": []}}}`, "mcpServers.web.args", "stdio servers only"},
		{"bad header", `{"mcpServers": {"web": {"url": "http://h/mcp", "headers": {"A B": "c"}}}}`, "mcpServers.web.headers", "bad header name"},
		{"bad timeout", `{"mcpServers": {"fs": {"command": "x", "timeout": "soon"}}}`, "mcpServers.fs.timeout", "positive duration"},
		{"zero timeout", `{"mcpServers": {"fs": {"command": "x", "timeout": "0s"}}}`, "mcpServers.fs.timeout", "positive duration"},
		{"numeric timeout", `{"mcpServers": {"fs": {"command": "x", "timeout": 60}}}`, "mcpServers.fs.timeout", "want a string"},
		{"type mismatch", `{"mcpServers": {"fs": {"command": "x", "type": "http"}}}`, "mcpServers.fs.type", `needs "url"`},
		{"sse", `{"mcpServers": {"web": {"url": "http://h/sse", "type": "sse"}}}`, "mcpServers.web.type", "not supported"},
		{"unknown type", `{"mcpServers": {"fs": {"command": "x", "type": "ws"}}}`, "mcpServers.fs.type", "unknown transport"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := mcp.ParseConfig([]byte(c.json))
			var ce *mcp.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *ConfigError", err)
			}
			if ce.Field != c.field || !strings.Contains(ce.Msg, c.msg) {
				t.Errorf("field %q msg %q; want field %q msg containing %q", ce.Field, ce.Msg, c.field, c.msg)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	os.WriteFile(path, []byte(`{"mcpServers": {"fs": {"command": "x", "cwd": "sub"}}}`), 0o644)
	cfg, err := mcp.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["fs"].Cwd; got != filepath.Join(dir, "sub") {
		t.Errorf("cwd %q, want it relative to the file", got)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {"fs": {}}}`), 0o644)
	_, err = mcp.LoadConfig(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": mcpServers.fs: ") {
		t.Errorf("error %v does not start with the file and field", err)
	}
}

// FuzzParseConfig: the decoder never panics, and what it accepts is
// valid: every server has exactly one of command and url, and a valid
// name.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers": {"fs": {"command": "npx", "args": ["a"], "env": {"A": "1"}, "timeout": "1s"}}}`,
		`{"mcpServers": {"web": {"url": "http://127.0.0.1:3001/mcp", "headers": {"X": "y"}, "type": "http"}}}`,
		`{"mcpServers": {"a__b": {"command": "x"}}}`,
		`{"mcpServers": {"x": {"command": "x", "url": "http://h"}}}`,
		`{"mcpServers": null}`, `null`, `{"mcpServers": {"x": null}}`, `"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := mcp.ParseConfig(data)
		if err != nil {
			var ce *mcp.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *ConfigError", err, err)
			}
			return
		}
		for name, s := range cfg.Servers {
			if (s.Command == "") == (s.URL == "") {
				t.Errorf("server %q: command %q url %q", name, s.Command, s.URL)
			}
			if name == "" || strings.Contains(name, "__") || len(name) > mcp.MaxServerNameLen {
				t.Errorf("accepted name %q", name)
			}
			if s.Timeout < 0 {
				t.Errorf("timeout %s", s.Timeout)
			}
		}
	})
}

func TestToolName(t *testing.T) {
	valid := func(s string) bool {
		if len(s) == 0 || len(s) > 64 {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
		return true
	}
	long := strings.Repeat("x", 70)
	for _, c := range []struct{ server, tool, want string }{
		{"fs", "read_file", "fs__read_file"},
		{"every", "get-sum", "every__get-sum"},
		{"fs", "a.b", "fs__a_b_"},     // sanitised: hash suffix
		{"fs", "a_b", "fs__a_b"},      // unchanged: no suffix, so no clash with a.b
		{"fs", "", "fs___"},           // empty tool name
		{"fs", "ütf", "fs___tf_"},     // non-ASCII
		{"fs", long, "fs__xxxxxxxxx"}, // cut with a suffix
	} {
		got := mcp.ToolName(c.server, c.tool)
		if !strings.HasPrefix(got, c.want) || !valid(got) {
			t.Errorf("ToolName(%q, %q) = %q, want prefix %q and a valid name", c.server, c.tool, got, c.want)
		}
	}
	if a, b := mcp.ToolName("fs", "a.b"), mcp.ToolName("fs", "a/b"); a == b {
		t.Errorf("a.b and a/b both named %q", a)
	}
	if a, b := mcp.ToolName("fs", long), mcp.ToolName("fs", long+"y"); a == b || len(a) != 64 {
		t.Errorf("long names %q and %q", a, b)
	}
}
