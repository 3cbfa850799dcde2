package shell

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

func TestDecodeInput(t *testing.T) {
	tools := New(Options{})
	tests := []struct {
		name string
		args string
		want input
	}{
		{"command only", `{"command": "ls -la"}`,
			input{Command: "ls -la", Timeout: DefaultTimeout, OutputBytes: DefaultOutputBytes}},
		{"all fields", `{"command": "go test ./...", "cwd": "server", "timeout_seconds": 120, "max_output_bytes": 1000}`,
			input{Command: "go test ./...", Cwd: "server", Timeout: 120 * time.Second, OutputBytes: 1000}},
		{"integral float", `{"command": "x", "timeout_seconds": 30.0, "max_output_bytes": 1e3}`,
			input{Command: "x", Timeout: 30 * time.Second, OutputBytes: 1000}},
		{"limits", `{"command": "x", "timeout_seconds": 600, "max_output_bytes": 4194304}`,
			input{Command: "x", Timeout: 600 * time.Second, OutputBytes: 4 << 20}},
		{"empty cwd is the root", `{"command": "x", "cwd": ""}`,
			input{Command: "x", Timeout: DefaultTimeout, OutputBytes: DefaultOutputBytes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tools.decodeInput(json.RawMessage(tt.args))
			if err != nil {
				t.Fatalf("decodeInput: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeInputInvalid(t *testing.T) {
	tools := New(Options{})
	tests := []struct {
		name     string
		args     string
		wantText string // the message must name the field or the problem
	}{
		{"no arguments", ``, "JSON object"},
		{"null", `null`, "got null"},
		{"array", `["ls"]`, "got an array"},
		{"string", `"ls"`, "got a string"},
		{"not JSON", `{"command": }`, "not valid JSON"},
		{"trailing data", `{"command": "ls"} x`, "not valid JSON"},
		{"missing command", `{"cwd": "src"}`, `"command" is required`},
		{"empty command", `{"command": "  "}`, `"command" is empty`},
		{"command not a string", `{"command": ["ls", "-la"]}`, `"command" must be a string`},
		{"command null", `{"command": null}`, `"command" must be a string`},
		{"NUL in command", `{"command": "ls\u0000"}`, `"command" contains a NUL`},
		{"command too long", `{"command": "` + strings.Repeat("x", maxCommandBytes+1) + `"}`, `"command" is 131072 bytes`},
		{"unknown field", `{"command": "ls", "timeout": 5}`, `unknown field "timeout"`},
		{"cwd not a string", `{"command": "ls", "cwd": 3}`, `"cwd" must be a string`},
		{"cwd null", `{"command": "ls", "cwd": null}`, `"cwd" must be a string`},
		{"timeout zero", `{"command": "ls", "timeout_seconds": 0}`, `"timeout_seconds" must be a whole number of seconds from 1 to 600, got a number 0`},
		{"timeout too large", `{"command": "ls", "timeout_seconds": 601}`, `"timeout_seconds" must be`},
		{"timeout fractional", `{"command": "ls", "timeout_seconds": 1.5}`, `"timeout_seconds" must be`},
		{"timeout as string", `{"command": "ls", "timeout_seconds": "30"}`, `"timeout_seconds" must be`},
		{"timeout huge", `{"command": "ls", "timeout_seconds": 1e400}`, `"timeout_seconds" must be`},
		{"output zero", `{"command": "ls", "max_output_bytes": 0}`, `"max_output_bytes" must be a whole number of bytes from 1 to 4194304`},
		{"output too large", `{"command": "ls", "max_output_bytes": 4194305}`, `"max_output_bytes" must be`},
		{"output negative", `{"command": "ls", "max_output_bytes": -1}`, `"max_output_bytes" must be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tools.decodeInput(json.RawMessage(tt.args))
			var te *engine.ToolError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want *engine.ToolError", err)
			}
			if te.Code != engine.ToolCodeInvalidInput {
				t.Errorf("code = %s, want %s", te.Code, engine.ToolCodeInvalidInput)
			}
			if !errors.Is(err, engine.ErrInvalidRequest) {
				t.Errorf("errors.Is(err, ErrInvalidRequest) = false")
			}
			if !strings.Contains(te.Message, tt.wantText) {
				t.Errorf("message = %q, want it to contain %q", te.Message, tt.wantText)
			}
		})
	}
}

// TestDecodeInputLimitsFollowOptions checks that the limits in error
// messages and decoding are the configured ones.
func TestDecodeInputLimitsFollowOptions(t *testing.T) {
	tools := New(Options{MaxTimeout: 30 * time.Second, Timeout: 10 * time.Second, OutputBytes: 100, MaxOutputBytes: 1000})
	got, err := tools.decodeInput(json.RawMessage(`{"command": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Timeout != 10*time.Second || got.OutputBytes != 100 {
		t.Errorf("defaults = %s, %d; want 10s, 100", got.Timeout, got.OutputBytes)
	}
	_, err = tools.decodeInput(json.RawMessage(`{"command": "x", "timeout_seconds": 31}`))
	if err == nil || !strings.Contains(err.Error(), "from 1 to 30") {
		t.Errorf("timeout 31: err = %v, want one naming the limit 30", err)
	}
	_, err = tools.decodeInput(json.RawMessage(`{"command": "x", "max_output_bytes": 1001}`))
	if err == nil || !strings.Contains(err.Error(), "from 1 to 1000") {
		t.Errorf("max_output_bytes 1001: err = %v, want one naming the limit 1000", err)
	}
}

func FuzzDecodeInput(f *testing.F) {
	f.Add([]byte(`{"command": "ls", "cwd": "a", "timeout_seconds": 5, "max_output_bytes": 10}`))
	f.Add([]byte(`{"command": 1}`))
	f.Add([]byte(`{"command": "x", "timeout_seconds": -0.0}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, args []byte) {
		tools := New(Options{})
		in, err := tools.decodeInput(args)
		if err != nil {
			var te *engine.ToolError
			if !errors.As(err, &te) || te.Code != engine.ToolCodeInvalidInput || te.Message == "" {
				t.Fatalf("err = %#v, want an invalid_input *engine.ToolError with a message", err)
			}
			return
		}
		if strings.TrimSpace(in.Command) == "" || in.Timeout < time.Second || in.Timeout > DefaultMaxTimeout ||
			in.OutputBytes < 1 || in.OutputBytes > DefaultMaxOutputBytes {
			t.Fatalf("accepted out-of-range input %+v from %q", in, args)
		}
	})
}

func TestToolSpec(t *testing.T) {
	tools := New(Options{MaxTimeout: 300 * time.Second, MaxOutputBytes: 1 << 20})
	specs, err := tools.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 {
		t.Fatalf("got %d specs, want 1", len(specs))
	}
	s := specs[0]
	if s.Name != ToolName || s.Risk != engine.RiskHigh || s.ReadOnly || !s.NeedsApproval {
		t.Errorf("spec = %s risk=%s read_only=%v needs_approval=%v; want run_command, high, false, true",
			s.Name, s.Risk, s.ReadOnly, s.NeedsApproval)
	}
	if !strings.Contains(s.Description, "/bin/sh -c") {
		t.Errorf("description does not name the shell: %q", s.Description)
	}
	var schema struct {
		Schema               string   `json:"$schema"`
		Type                 string   `json:"type"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
		Properties           map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
			Minimum     *int64 `json:"minimum"`
			Maximum     *int64 `json:"maximum"`
			Default     *int64 `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || schema.Type != "object" {
		t.Errorf("$schema = %q, type = %q", schema.Schema, schema.Type)
	}
	if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
		t.Error("additionalProperties is not false")
	}
	if len(schema.Required) != 1 || schema.Required[0] != "command" {
		t.Errorf("required = %v, want [command]", schema.Required)
	}
	wantTypes := map[string]string{"command": "string", "cwd": "string", "timeout_seconds": "integer", "max_output_bytes": "integer"}
	if len(schema.Properties) != len(wantTypes) {
		t.Errorf("properties = %d, want %d", len(schema.Properties), len(wantTypes))
	}
	for name, typ := range wantTypes {
		p, ok := schema.Properties[name]
		if !ok {
			t.Errorf("property %s missing", name)
			continue
		}
		if p.Type != typ || p.Description == "" {
			t.Errorf("property %s: type %q, description %q", name, p.Type, p.Description)
		}
	}
	limits := []struct {
		name          string
		min, max, def int64
	}{
		{"timeout_seconds", 1, 300, 60},
		{"max_output_bytes", 1, 1 << 20, DefaultOutputBytes},
	}
	for _, l := range limits {
		p := schema.Properties[l.name]
		if p.Minimum == nil || p.Maximum == nil || p.Default == nil || *p.Minimum != l.min || *p.Maximum != l.max || *p.Default != l.def {
			t.Errorf("%s: minimum %v maximum %v default %v, want %d %d %d", l.name, deref(p.Minimum), deref(p.Maximum), deref(p.Default), l.min, l.max, l.def)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
