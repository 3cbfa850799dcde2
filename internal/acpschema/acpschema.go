// Package acpschema validates Agent Client Protocol messages against the
// protocol's own JSON Schema, for tests of the ACP front-end
// (transports/acp) and of the scenario suite. schema.v1.json is
// schema/v1/schema.json of github.com/agentclientprotocol/agent-client-protocol
// at commit 4effcc11e117c67feb5ed505b17f75537932f5a6 (schema version
// 1.21.0, 2026-08-20), unchanged.
package acpschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schema.v1.json
var schemaV1 []byte

const baseURL = "https://plexus.invalid/acp/schema.v1.json"

var (
	once     sync.Once
	compiler *jsonschema.Compiler
	compiled = map[string]*jsonschema.Schema{}
	mu       sync.Mutex
	loadErr  error
)

// Validate checks the JSON value data against the schema's definition def
// ("SessionNotification", "PromptResponse", "RequestPermissionRequest",
// ...). The error names the failing keyword and its place in data.
func Validate(def string, data []byte) error {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaV1))
		if err != nil {
			loadErr = err
			return
		}
		compiler = jsonschema.NewCompiler()
		loadErr = compiler.AddResource(baseURL, doc)
	})
	if loadErr != nil {
		return fmt.Errorf("load the ACP schema: %w", loadErr)
	}
	mu.Lock()
	s, ok := compiled[def]
	if !ok {
		var err error
		s, err = compiler.Compile(baseURL + "#/$defs/" + def)
		if err != nil {
			mu.Unlock()
			return fmt.Errorf("compile $defs/%s: %w", def, err)
		}
		compiled[def] = s
	}
	mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: %v", def, err)
	}
	return nil
}

// ValidateValue marshals v and validates it as Validate does.
func ValidateValue(def string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return Validate(def, b)
}
