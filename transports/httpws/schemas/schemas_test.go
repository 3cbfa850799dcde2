package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// The URLs the server registers the documents under.
const (
	openAPIURL = "https://plexus.dev/schemas/openapi.json"
	wsBaseURL  = "https://plexus.dev/schemas/ws/"
	draft      = "https://json-schema.org/draft/2020-12/schema"
)

var clientTypes = []string{
	"client.hello", "client.user_message", "client.context_update", "client.approval_response",
	"client.patch_apply_result", "client.command_result", "client.cancel", "client.file_changes",
}

var serverTypes = []string{
	"server.hello", "assistant.thinking", "agent.plan", "agent.retrieve.status", "tool.execute",
	"patch.proposed", "tool.request_approval", "command.request_approval", "assistant.token",
	"assistant.message_final", "server.error", "session.state", "approval.resolved", "patch.result",
	"index.updated",
}

var (
	requestSchemas  = []string{"RegisterWorkspaceRequest", "CreateSessionRequest", "SetCurrentModelRequest", "IncrementalRequest", "Policy", "SearchRequest"}
	responseSchemas = []string{
		"Health", "Workspace", "WorkspaceList", "IndexJob", "IndexJobResponse", "IndexStatusResponse",
		"IncrementalResponse", "Session", "SessionList", "SessionState", "Message", "ModelList", "CurrentModel", "Error",
	}
)

// readJSON decodes an embedded file with the schema library's decoder
// (numbers as json.Number).
func readJSON(t *testing.T, name string) any {
	t.Helper()
	data, err := fs.ReadFile(schemas.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

// compiler returns a compiler holding every embedded document, as the
// server registers them.
func compiler(t *testing.T) *jsonschema.Compiler {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, readJSON(t, "openapi.json")); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(schemas.FS, "ws/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := c.AddResource(wsBaseURL+strings.TrimPrefix(f, "ws/"), readJSON(t, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return c
}

// compileAll compiles every message schema, by type.
func compileAll(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := compiler(t)
	out := map[string]*jsonschema.Schema{}
	for _, typ := range slices.Concat(clientTypes, serverTypes) {
		s, err := c.Compile(wsBaseURL + typ + ".json")
		if err != nil {
			t.Fatalf("compile %s: %v", typ, err)
		}
		out[typ] = s
	}
	return out
}

func TestMessageSchemaFiles(t *testing.T) {
	files, err := fs.Glob(schemas.FS, "ws/*.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ws/context.json"}
	for _, typ := range slices.Concat(clientTypes, serverTypes) {
		want = append(want, "ws/"+typ+".json")
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf("ws files = %v, want %v", files, want)
	}
	for _, f := range files {
		doc := readJSON(t, f).(map[string]any)
		name := strings.TrimPrefix(f, "ws/")
		if doc["$id"] != wsBaseURL+name {
			t.Errorf("%s: $id = %v", f, doc["$id"])
		}
		if doc["$schema"] != draft {
			t.Errorf("%s: $schema = %v", f, doc["$schema"])
		}
		if name == "context.json" {
			continue
		}
		typ := strings.TrimSuffix(name, ".json")
		props, _ := doc["properties"].(map[string]any)
		if c, _ := props["type"].(map[string]any); c == nil || c["const"] != typ {
			t.Errorf("%s: properties.type = %v, want const %q", f, props["type"], typ)
		}
		req, _ := doc["required"].([]any)
		strict := doc["additionalProperties"] == false
		isClient := slices.Contains(clientTypes, typ)
		switch {
		case isClient && !strict:
			t.Errorf("%s: a client message schema must have additionalProperties false", f)
		case !slices.Contains(req, any("type")):
			t.Errorf("%s: type is not required", f)
		case !isClient && !slices.Contains(req, any("seq")):
			t.Errorf("%s: seq is not required", f)
		}
	}
}

func TestCompileMessageSchemas(t *testing.T) {
	compileAll(t)
	if _, err := compiler(t).Compile(wsBaseURL + "context.json"); err != nil {
		t.Fatal(err)
	}
}

// resolvePointer follows a JSON pointer ("/a/b") in doc.
func resolvePointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// refs returns every $ref in doc.
func refs(doc any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				out = append(out, r)
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

func TestOpenAPI(t *testing.T) {
	doc := readJSON(t, "openapi.json").(map[string]any)
	if doc["openapi"] != "3.1.0" || doc["jsonSchemaDialect"] != draft {
		t.Errorf("openapi = %v, jsonSchemaDialect = %v", doc["openapi"], doc["jsonSchemaDialect"])
	}
	if sec, _ := doc["security"].([]any); len(sec) != 1 || sec[0].(map[string]any)["bearerAuth"] == nil {
		t.Errorf("security = %v, want bearerAuth applied globally", doc["security"])
	}
	if _, ok := resolvePointer(doc, "/components/securitySchemes/bearerAuth"); !ok {
		t.Error("no bearerAuth security scheme")
	}

	c := compiler(t)
	t.Run("refs", func(t *testing.T) {
		all := refs(doc)
		if len(all) < 50 {
			t.Fatalf("only %d $refs", len(all))
		}
		for _, r := range all {
			if ptr, ok := strings.CutPrefix(r, "#"); ok {
				if _, ok := resolvePointer(doc, ptr); !ok {
					t.Errorf("$ref %s does not resolve", r)
				}
				continue
			}
			// A reference to a message schema, relative to the document.
			if !strings.HasPrefix(r, "ws/") {
				t.Errorf("$ref %s: want a local pointer or ws/<type>.json", r)
				continue
			}
			if _, err := c.Compile(strings.TrimSuffix(openAPIURL, "openapi.json") + r); err != nil {
				t.Errorf("$ref %s: %v", r, err)
			}
		}
	})

	t.Run("components", func(t *testing.T) {
		comps, _ := resolvePointer(doc, "/components/schemas")
		names := slices.Sorted(maps.Keys(comps.(map[string]any)))
		for _, want := range slices.Concat(requestSchemas, responseSchemas) {
			if !slices.Contains(names, want) {
				t.Errorf("components/schemas lacks %s", want)
			}
		}
		for _, name := range names {
			if _, err := c.Compile(openAPIURL + "#/components/schemas/" + name); err != nil {
				t.Errorf("compile %s: %v", name, err)
			}
		}
		// Request bodies are strict, except the policy document, which
		// the engine validates itself.
		for _, name := range requestSchemas[:4] {
			s, _ := resolvePointer(doc, "/components/schemas/"+name)
			m := s.(map[string]any)
			if m["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties = %v, want false", name, m["additionalProperties"])
			}
			if req, _ := m["required"].([]any); len(req) == 0 {
				t.Errorf("%s: no required members", name)
			}
		}
	})

	t.Run("operations", func(t *testing.T) {
		// method path -> statuses the operation must document.
		want := map[string][]string{
			"get /v1/health":                                       {"200", "401"},
			"get /v1/workspaces":                                   {"200", "401"},
			"post /v1/workspaces/register":                         {"200", "201", "400", "401", "413"},
			"get /v1/workspaces/{workspace_id}":                    {"200", "401", "404"},
			"get /v1/workspaces/{workspace_id}/policy":             {"200", "401", "404"},
			"put /v1/workspaces/{workspace_id}/policy":             {"200", "400", "401", "404", "413"},
			"post /v1/workspaces/{workspace_id}/index/rebuild":     {"202", "401", "404", "409"},
			"post /v1/workspaces/{workspace_id}/index/refresh":     {"202", "401", "404", "409"},
			"post /v1/workspaces/{workspace_id}/index/incremental": {"200", "400", "401", "404", "413"},
			"get /v1/workspaces/{workspace_id}/index/status":       {"200", "401", "404"},
			"post /v1/workspaces/{workspace_id}/search":            {"200", "400", "401", "404", "413"},
			"post /v1/sessions":                                    {"201", "400", "401", "404"},
			"get /v1/sessions":                                     {"200", "400", "401"},
			"get /v1/sessions/{session_id}":                        {"200", "401", "404"},
			"delete /v1/sessions/{session_id}":                     {"204", "401", "404"},
			"get /v1/sessions/{session_id}/stream":                 {"101", "401", "404"},
			"get /v1/models":                                       {"200", "401", "503"},
			"get /v1/models/current":                               {"200", "401", "404"},
			"put /v1/models/current":                               {"200", "400", "401", "503"},
		}
		paths := doc["paths"].(map[string]any)
		got := 0
		for path, item := range paths {
			for method, op := range item.(map[string]any) {
				if method == "parameters" {
					continue
				}
				got++
				key := method + " " + path
				statuses, ok := want[key]
				if !ok {
					t.Errorf("unexpected operation %s", key)
					continue
				}
				resps := op.(map[string]any)["responses"].(map[string]any)
				for _, st := range statuses {
					if resps[st] == nil {
						t.Errorf("%s: no %s response", key, st)
					}
				}
				for st, r := range resps {
					if st >= "400" {
						rm := r.(map[string]any)
						if ref, _ := rm["$ref"].(string); ref == "" && rm["content"] == nil {
							t.Errorf("%s: %s response has no Error body", key, st)
						}
					}
				}
			}
		}
		if got != len(want) {
			t.Errorf("%d operations, want %d", got, len(want))
		}
		// The stream documents since and lists every message schema.
		since, ok := resolvePointer(doc, "/components/parameters/Since")
		if !ok || since.(map[string]any)["in"] != "query" {
			t.Errorf("Since parameter = %v", since)
		}
		msgs, _ := resolvePointer(doc, "/paths/~1v1~1sessions~1{session_id}~1stream/get/x-websocket-messages")
		m, _ := msgs.(map[string]any)
		if m == nil {
			t.Fatal("no x-websocket-messages")
		}
		cl, _ := m["client"].(map[string]any)
		sv, _ := m["server"].(map[string]any)
		if !slices.Equal(slices.Sorted(maps.Keys(cl)), slices.Sorted(slices.Values(clientTypes))) ||
			!slices.Equal(slices.Sorted(maps.Keys(sv)), slices.Sorted(slices.Values(serverTypes))) {
			t.Errorf("x-websocket-messages lists client %v, server %v", slices.Sorted(maps.Keys(cl)), slices.Sorted(maps.Keys(sv)))
		}
	})
}

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatalf("bad test JSON: %v\n%s", err, s)
	}
	return v
}

// merge adds the members of extra to doc, recursing into objects.
func merge(doc, extra any) any {
	d, ok1 := doc.(map[string]any)
	e, ok2 := extra.(map[string]any)
	if !ok1 || !ok2 {
		return extra
	}
	for k, v := range e {
		if cur, ok := d[k]; ok {
			d[k] = merge(cur, v)
		} else {
			d[k] = v
		}
	}
	return d
}

// The contract's examples (protocols/http-websocket-sessions.md), with each
// union reduced to one of its values and comments dropped. Server messages
// get, in extra, the members the server always adds (seq, and the
// extensions of transports/httpws/wire.go).
var contractExamples = []struct {
	typ, example, extra string
}{
	{"client.hello", `{
  "type": "client.hello",
  "client_info": {
    "name": "vscode-extension",
    "version": "0.1.0",
    "capabilities": ["diff_preview", "terminal_exec", "git_integration"]
  }
}`, ""},
	{"client.user_message", `{
  "type": "client.user_message",
  "message": "Fix the authentication bug",
  "context": {
    "active_editor": {
      "file_path": "src/auth/login.ts",
      "language": "typescript",
      "selection": {
        "start": { "line": 23, "character": 0 },
        "end": { "line": 45, "character": 12 }
      },
      "visible_range": {
        "start": 1,
        "end": 100
      },
      "content_hash": "sha256:abc123..."
    },
    "open_editors": [
      {
        "file_path": "src/auth/session.ts",
        "is_dirty": false,
        "visible": true
      }
    ],
    "diagnostics": [
      {
        "file_path": "src/auth/login.ts",
        "severity": "error",
        "message": "Property 'password' is used before being defined",
        "line": 23,
        "character": 15,
        "source": "typescript"
      }
    ],
    "terminal_output": {
      "command": "npm test",
      "exit_code": 1,
      "stdout": "FAIL src/auth/login.test.ts...",
      "stderr": "",
      "timestamp": "2025-12-30T10:30:45Z"
    },
    "git_context": {
      "branch": "feature/auth-fix",
      "staged_files": [],
      "modified_files": ["src/auth/login.ts", "src/auth/session.ts"],
      "recent_commits": [
        {
          "sha": "abc123",
          "message": "Add password validation",
          "author": "Kevin",
          "timestamp": "2025-12-30T09:15:00Z"
        }
      ]
    },
    "mentions": [
      {
        "type": "file",
        "path": "src/utils/validator.ts"
      },
      {
        "type": "symbol",
        "name": "validatePassword",
        "file_path": "src/utils/validator.ts",
        "line": 12
      }
    ],
    "command": "/fix"
  }
}`, ""},
	{"client.context_update", `{
  "type": "client.context_update",
  "updates": {
    "diagnostics": [],
    "terminal_output": {}
  }
}`, ""},
	{"client.approval_response", `{
  "type": "client.approval_response",
  "request_id": "req_abc123",
  "approved": true,
  "scope": "all",
  "file_path": "src/auth/login.ts"
}`, ""},
	{"client.patch_apply_result", `{
  "type": "client.patch_apply_result",
  "patch_id": "patch_abc123",
  "file_path": "src/auth/login.ts",
  "success": true,
  "error": null,
  "applied_hash": "sha256:def456..."
}`, ""},
	{"client.command_result", `{
  "type": "client.command_result",
  "command_id": "cmd_abc123",
  "command": "npm test",
  "exit_code": 0,
  "stdout": "...",
  "stderr": "...",
  "duration_ms": 2340
}`, ""},
	{"client.cancel", `{
  "type": "client.cancel",
  "reason": "user_cancelled"
}`, ""},
	{"client.file_changes", `{
  "type": "client.file_changes",
  "changes": [
    {
      "type": "created",
      "file_path": "src/utils/new_helper.ts",
      "content_hash": "sha256:abc123...",
      "timestamp": "2025-12-30T10:35:12Z"
    }
  ]
}`, ""},
	{"server.hello", `{
  "type": "server.hello",
  "server_info": {
    "version": "0.1.0",
    "model": {
      "provider": "ollama",
      "model_name": "codellama:13b",
      "capabilities": ["chat", "code_completion", "refactor"]
    },
    "capabilities": ["agentic_rag", "ace", "multi_file_edit"]
  }
}`, `{"seq": 0, "session_id": "ses_0123456789abcdef"}`},
	{"assistant.thinking", `{
  "type": "assistant.thinking",
  "phase": "analyzing",
  "message": "Analyzing authentication flow..."
}`, `{"seq": 3, "turn_id": "turn_1"}`},
	{"agent.plan", `{
  "type": "agent.plan",
  "steps": [
    {
      "step_number": 1,
      "description": "Add input validation to prevent SQL injection",
      "files_involved": ["src/auth/login.ts"]
    },
    {
      "step_number": 2,
      "description": "Add TypeScript types for parameters",
      "files_involved": ["src/auth/login.ts", "src/types/auth.ts"]
    }
  ],
  "rationale": "These changes address the security vulnerability..."
}`, `{"seq": 4}`},
	{"agent.retrieve.status", `{
  "type": "agent.retrieve.status",
  "stage": "symbol_search",
  "results_count": 12,
  "message": "Found 12 relevant symbols"
}`, `{"seq": 5}`},
	{"tool.execute", `{
  "type": "tool.execute",
  "tool_name": "read_file",
  "args": {
    "file_path": "src/auth/login.ts"
  },
  "status": "started",
  "result": {}
}`, `{"seq": 6, "call_id": "call_1"}`},
	{"patch.proposed", `{
  "type": "patch.proposed",
  "patch_id": "patch_abc123",
  "file_path": "src/auth/login.ts",
  "diff": "--- a/src/auth/login.ts\n+++ b/src/auth/login.ts\n...",
  "rationale": "Added input validation to prevent SQL injection",
  "acceptance_criteria": [
    "Tests pass",
    "No SQL injection vulnerabilities",
    "Type safety maintained"
  ],
  "requires_approval": true,
  "hunks": [
    {
      "old_start": 23,
      "old_lines": 5,
      "new_start": 23,
      "new_lines": 8,
      "content": "..."
    }
  ]
}`, `{"seq": 7, "patch_set_id": "pset_01", "op": "modify", "base_hash": "sha256:00", "new_hash": "sha256:01"}`},
	{"tool.request_approval", `{
  "type": "tool.request_approval",
  "request_id": "req_abc123",
  "tool_name": "write_file",
  "args": {
    "file_path": "src/auth/login.ts",
    "reason": "Apply security fix"
  },
  "risk_level": "low"
}`, `{"seq": 8, "description": "Write src/auth/login.ts", "risk_reasons": [], "reversible": true}`},
	{"command.request_approval", `{
  "type": "command.request_approval",
  "command_id": "cmd_abc123",
  "command": "npm test",
  "working_directory": "/workspace/path",
  "environment": { "NODE_ENV": "test" },
  "requires_approval": true,
  "reason": "Verify fix resolves test failures"
}`, `{"seq": 9}`},
	{"assistant.token", `{
  "type": "assistant.token",
  "token": "The",
  "cumulative_text": "The authentication bug..."
}`, `{"seq": 10}`},
	{"assistant.message_final", `{
  "type": "assistant.message_final",
  "message": "I've fixed the authentication bug by adding input validation...",
  "metadata": {
    "tokens_used": 1234,
    "files_modified": 2,
    "tools_used": ["read_file", "search_symbols", "propose_diff"],
    "success": true
  }
}`, `{"seq": 11, "metadata": {"status": "completed", "model": "ollama:codellama:13b", "prompt_tokens": 1000,
      "completion_tokens": 234, "files_changed": ["src/auth/login.ts", "src/types/auth.ts"], "duration_ms": 5120}}`},
	{"server.error", `{
  "type": "server.error",
  "error": {
    "code": "RETRIEVAL_FAILED",
    "message": "Failed to retrieve relevant context",
    "details": {},
    "recoverable": true
  }
}`, `{"seq": 12}`},
	{"session.state", `{
  "type": "session.state",
  "state": {
    "pending_patches": ["patch_abc123", "patch_def456"],
    "applied_patches": ["patch_xyz789"],
    "pending_approvals": ["req_abc123"],
    "current_step": 2,
    "total_steps": 5
  }
}`, `{"seq": 13, "state": {"busy": true, "last_seq": 13}}`},
	// The extensions have no contract example.
	{"approval.resolved", `{"type": "approval.resolved", "seq": 14, "request_id": "req_abc123", "approved": true, "scope": "file", "actor": "user"}`, ""},
	{"patch.result", `{"type": "patch.result", "seq": 15, "patch_set_id": "pset_01", "status": "applied",
  "applied_files": ["src/auth/login.ts"], "rejected_files": [], "applied_id": "apl_01", "client_side": false}`, ""},
	{"index.updated", `{"type": "index.updated", "seq": 16, "changes": 1, "stats": {"files": 10, "read": 1, "changed": 1,
  "removed": 0, "analyzed": 1, "reused": 0, "skipped": 0, "bytes": 120, "full": false, "duration_ns": 1500000}}`, ""},
}

func TestContractExamples(t *testing.T) {
	compiled := compileAll(t)
	seen := map[string]bool{}
	for _, tc := range contractExamples {
		t.Run(tc.typ, func(t *testing.T) {
			seen[tc.typ] = true
			doc := decode(t, tc.example)
			if tc.extra != "" {
				doc = merge(doc, decode(t, tc.extra))
			}
			if err := compiled[tc.typ].Validate(doc); err != nil {
				t.Errorf("example rejected: %v", err)
			}
			// A server message without seq is rejected: the extras are
			// needed.
			if slices.Contains(serverTypes, tc.typ) {
				m := doc.(map[string]any)
				delete(m, "seq")
				if compiled[tc.typ].Validate(m) == nil {
					t.Error("accepted without seq")
				}
			}
		})
	}
	for _, typ := range slices.Concat(clientTypes, serverTypes) {
		if !seen[typ] {
			t.Errorf("no example for %s", typ)
		}
	}
}

func TestValidMessages(t *testing.T) {
	compiled := compileAll(t)
	for _, tc := range []struct{ name, typ, msg string }{
		{"hunk scope with hunks", "client.approval_response",
			`{"type":"client.approval_response","request_id":"apr_1","approved":true,"scope":"hunk","file_path":"a.go","hunks":[0,2]}`},
		{"hunk scope by file", "client.approval_response",
			`{"type":"client.approval_response","request_id":"apr_1","approved":true,"scope":"hunk","hunks_by_file":{"a.go":[1]}}`},
		{"file scope with file_paths", "client.approval_response",
			`{"type":"client.approval_response","request_id":"apr_1","approved":true,"scope":"file","file_paths":["a.go","b.go"],"remember_choice":true}`},
		{"denial", "client.approval_response",
			`{"type":"client.approval_response","request_id":"apr_1","approved":false,"reason":"no"}`},
		{"apply error", "client.patch_apply_result",
			`{"type":"client.patch_apply_result","patch_id":"patch_1","file_path":"a.go","success":false,"error":{"message":"changed","type":"conflict"}}`},
		{"user message without context", "client.user_message", `{"type":"client.user_message","message":"hi"}`},
		{"cancel without reason", "client.cancel", `{"type":"client.cancel"}`},
		{"terminal still running", "client.context_update",
			`{"type":"client.context_update","updates":{"terminal_output":{"command":"make","exit_code":null}}}`},
		{"generating phase", "assistant.thinking",
			`{"type":"assistant.thinking","seq":1,"turn_id":"t","phase":"generating","message":"Reading tool results"}`},
		{"reranking stage", "agent.retrieve.status",
			`{"type":"agent.retrieve.status","seq":1,"stage":"reranking","results_count":0,"message":"m"}`},
		{"tool progress", "tool.execute",
			`{"type":"tool.execute","seq":1,"call_id":"c","tool_name":"run","args":{},"status":"started","progress":{"progress":{"message":"half","percentage":50}}}`},
		{"plan step status", "agent.plan",
			`{"type":"agent.plan","seq":1,"steps":[{"step_number":1,"description":"d","files_involved":[],"status":"in_progress"}],"rationale":""}`},
		{"server error with unknown member", "server.error",
			`{"type":"server.error","seq":0,"error":{"code":"INVALID_REQUEST","message":"m","recoverable":true,"details":{"field":"/message"}},"future":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := compiled[tc.typ].Validate(decode(t, tc.msg)); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
}

func TestInvalidMessages(t *testing.T) {
	compiled := compileAll(t)
	for _, tc := range []struct{ name, typ, msg, want string }{
		{"missing request_id", "client.approval_response",
			`{"type":"client.approval_response","approved":true}`, "request_id"},
		{"missing approved", "client.approval_response",
			`{"type":"client.approval_response","request_id":"r"}`, "approved"},
		{"plan step without files_involved", "agent.plan",
			`{"type":"agent.plan","seq":1,"steps":[{"step_number":1,"description":"d"}],"rationale":""}`, "files_involved"},
		{"bad scope", "client.approval_response",
			`{"type":"client.approval_response","request_id":"r","approved":true,"scope":"some"}`, "scope"},
		{"file scope without a file", "client.approval_response",
			`{"type":"client.approval_response","request_id":"r","approved":true,"scope":"file"}`, "file_path"},
		{"wrong type const", "client.approval_response",
			`{"type":"client.approval","request_id":"r","approved":true}`, "type"},
		{"unknown top-level member", "client.user_message",
			`{"type":"client.user_message","message":"hi","extra":1}`, "extra"},
		{"unknown context member", "client.user_message",
			`{"type":"client.user_message","message":"hi","context":{"editor":{}}}`, "editor"},
		{"empty message", "client.user_message", `{"type":"client.user_message","message":""}`, "message"},
		{"negative line", "client.user_message",
			`{"type":"client.user_message","message":"m","context":{"active_editor":{"file_path":"a","selection":{"start":{"line":-1,"character":0},"end":{"line":0,"character":0}}}}}`, "line"},
		{"bad severity", "client.context_update",
			`{"type":"client.context_update","updates":{"diagnostics":[{"file_path":"a","severity":"fatal","message":"m"}]}}`, "severity"},
		{"mention of unknown kind", "client.context_update",
			`{"type":"client.context_update","updates":{"mentions":[{"type":"folder","path":"src"}]}}`, "type"},
		{"updates missing", "client.context_update", `{"type":"client.context_update"}`, "updates"},
		{"no changes", "client.file_changes", `{"type":"client.file_changes","changes":[]}`, "changes"},
		{"bad change type", "client.file_changes",
			`{"type":"client.file_changes","changes":[{"type":"renamed","file_path":"a"}]}`, "type"},
		{"missing exit_code", "client.command_result", `{"type":"client.command_result","command_id":"c"}`, "exit_code"},
		{"missing success", "client.patch_apply_result", `{"type":"client.patch_apply_result","patch_id":"p"}`, "success"},
		{"hello without client_info", "client.hello", `{"type":"client.hello"}`, "client_info"},
		{"unknown cancel member", "client.cancel", `{"type":"client.cancel","why":"x"}`, "why"},
		{"bad timestamp", "client.file_changes",
			`{"type":"client.file_changes","changes":[{"type":"created","file_path":"a","timestamp":"yesterday"}]}`, "timestamp"},
		{"server message without seq", "assistant.token",
			`{"type":"assistant.token","token":"a","cumulative_text":"a"}`, "seq"},
		{"negative seq", "assistant.token",
			`{"type":"assistant.token","seq":-1,"token":"a","cumulative_text":"a"}`, "seq"},
		{"bad phase", "assistant.thinking", `{"type":"assistant.thinking","seq":1,"phase":"dreaming","message":""}`, "phase"},
		{"bad risk", "tool.request_approval",
			`{"type":"tool.request_approval","seq":1,"request_id":"r","tool_name":"t","args":{},"risk_level":"extreme","description":"","risk_reasons":[],"reversible":true}`, "risk_level"},
		{"bad tool status", "tool.execute",
			`{"type":"tool.execute","seq":1,"call_id":"c","tool_name":"t","args":{},"status":"running"}`, "status"},
		{"null list", "session.state",
			`{"type":"session.state","seq":1,"state":{"pending_patches":null,"applied_patches":[],"pending_approvals":[],"current_step":0,"total_steps":0,"busy":false,"last_seq":1}}`, "pending_patches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compiled[tc.typ].Validate(decode(t, tc.msg))
			if err == nil {
				t.Fatal("accepted")
			}
			var ve *jsonschema.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T: %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not mention %q: %v", tc.want, err)
			}
		})
	}
}

func TestRESTBodies(t *testing.T) {
	c := compiler(t)
	compile := func(name string) *jsonschema.Schema {
		s, err := c.Compile(openAPIURL + "#/components/schemas/" + name)
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		return s
	}
	hash := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, schema, body string
		ok                 bool
	}{
		{"register", "RegisterWorkspaceRequest", `{"path":"/src/app","name":"app"}`, true},
		{"register without path", "RegisterWorkspaceRequest", `{"name":"app"}`, false},
		{"register empty path", "RegisterWorkspaceRequest", `{"path":""}`, false},
		{"register unknown member", "RegisterWorkspaceRequest", `{"path":"/a","root":"/a"}`, false},
		{"session", "CreateSessionRequest", `{"workspace_id":"ws_0123456789ab"}`, true},
		{"session bad id", "CreateSessionRequest", `{"workspace_id":"ws_0123"}`, false},
		{"model", "SetCurrentModelRequest", `{"provider":"ollama","model_name":"llama3"}`, true},
		{"model without name", "SetCurrentModelRequest", `{"provider":"ollama"}`, false},
		{"incremental", "IncrementalRequest", `{"changes":[{"type":"modified","file_path":"a.go","content_hash":"` + hash + `","timestamp":"2025-12-30T10:35:12Z"}]}`, true},
		// The contract's own example hash: accepted, as on the stream.
		{"incremental example hash", "IncrementalRequest", `{"changes":[{"type":"created","file_path":"src/utils/new_helper.ts","content_hash":"sha256:abc123...","timestamp":"2025-12-30T10:35:12Z"}]}`, true},
		{"incremental hash without its algorithm", "IncrementalRequest", `{"changes":[{"type":"modified","file_path":"a.go","content_hash":"abc"}]}`, false},
		{"incremental empty", "IncrementalRequest", `{"changes":[]}`, false},
		{"search text", "SearchRequest", `{"pattern":"ReadFile","limit":0}`, true},
		{"search text without pattern", "SearchRequest", `{"mode":"text","query":"x"}`, false},
		{"search symbols", "SearchRequest", `{"mode":"symbols","query":"os.ReadFile","limit":5}`, true},
		{"search symbols without query", "SearchRequest", `{"mode":"symbols","pattern":"x"}`, false},
		{"search symbols limit 0", "SearchRequest", `{"mode":"symbols","query":"x","limit":0}`, false},
		{"search unknown member", "SearchRequest", `{"pattern":"x","max":3}`, false},
		{"policy", "Policy", `{"version":1,"commands":{"mode":"local_terminal"},"rules":[{"tool":"write_file","action":"ask","source":"user"}]}`, true},
		{"policy not an object", "Policy", `[]`, false},
		{"error", "Error", `{"error":{"code":"INVALID_REQUEST","message":"m","details":{"field":"/workspace_id"}}}`, true},
		{"error without code", "Error", `{"error":{"message":"m"}}`, false},
		{"health", "Health", `{"status":"ok","version":"0.1.0","uptime_seconds":1.5,"model":null,"active_turns":0,"connections":1}`, true},
		{"index status", "IndexStatusResponse", `{"workspace_id":"ws_0123456789ab","job":null,"status":{"root":"/a","workspace_id":"ws_0123456789ab","files":1,"contents":1,"chunks":2,"symbols":3,"delta_contents":0,"last_update":"2025-12-30T10:35:12Z","building":false,"database_bytes":4096,"vectors":{"model":"","embedded":0,"total":2,"running":false}}}`, true},
		{"session", "Session", `{"session_id":"ses_0123456789abcdef","workspace_id":"ws_0123456789ab","created_at":"2025-12-30T10:35:12Z","busy":false,"turns":1,"last_seq":9,
		  "state":{"pending_patches":[],"applied_patches":[],"pending_approvals":[],"current_step":0,"total_steps":0,"busy":false,"last_seq":9},
		  "messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"read_file","arguments":{"path":"a"}}]},{"role":"tool","content":"{}","tool_call_id":"c1","tool_name":"read_file"}]}`, true},
		{"models", "ModelList", `{"models":[{"provider":"ollama","model_name":"llama3","capabilities":["completion"],"loaded":true}],"current":null,"errors":[{"provider":"ollama","message":"down"}],"not_configured":[{"provider":"openai","message":"not configured: set OPENAI_API_KEY"}]}`, true},
		{"models without not_configured", "ModelList", `{"models":[],"current":null,"errors":[]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compile(tc.schema).Validate(decode(t, tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("valid = %v, want %v (%v)", err == nil, tc.ok, err)
			}
		})
	}
}

// The files are JSON with two-space indentation, as written.
func TestFormatting(t *testing.T) {
	files, _ := fs.Glob(schemas.FS, "ws/*.json")
	for _, f := range append(files, "openapi.json") {
		data, _ := fs.ReadFile(schemas.FS, f)
		if !json.Valid(data) {
			t.Fatalf("%s: not JSON", f)
		}
		if !bytes.HasPrefix(data, []byte("{\n  \"")) {
			t.Errorf("%s: not indented by two spaces", f)
		}
	}
}
