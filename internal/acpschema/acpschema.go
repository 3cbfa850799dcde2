// Package acpschema validates Agent Client Protocol messages against the
// protocol's own JSON Schema, for tests of the ACP front-end
// (transports/acp) and of the scenario suite.
//
// The schema is not copied into this repository: it is read from the npm
// package @agentclientprotocol/sdk that the ACP example client installs
// (examples/clients/acp-node, `npm ci`; the package ships the protocol's
// schema/v1/schema.json), or from the file $PLEXUS_ACP_SCHEMA names.
// Without either, Validate returns ErrNoSchema, and callers decide whether
// that skips the check or fails it (CI installs the package and sets
// PLEXUS_REQUIRE_NODE=1).
package acpschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNoSchema is returned by Validate when the schema file cannot be found.
var ErrNoSchema = errors.New("the ACP JSON Schema is not installed: run `npm ci --prefix examples/clients/acp-node` (or set PLEXUS_ACP_SCHEMA to schema/v1/schema.json of the ACP repository)")

const baseURL = "https://plexus.invalid/acp/schema.v1.json"

var (
	once     sync.Once
	compiler *jsonschema.Compiler
	compiled = map[string]*jsonschema.Schema{}
	mu       sync.Mutex
	loadErr  error
)

// Path returns the schema file Validate reads: $PLEXUS_ACP_SCHEMA when set,
// else schema/v1/schema.json of the npm package @agentclientprotocol/sdk
// under examples/clients/acp-node/node_modules of this source tree.
func Path() string {
	if p := os.Getenv("PLEXUS_ACP_SCHEMA"); p != "" {
		return p
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	return filepath.Join(root, "examples", "clients", "acp-node", "node_modules", "@agentclientprotocol", "sdk", "schema", "v1", "schema.json")
}

func load() {
	path := Path()
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || path == "" {
		loadErr = fmt.Errorf("%w (looked for %s)", ErrNoSchema, path)
		return
	}
	if err != nil {
		loadErr = err
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		loadErr = fmt.Errorf("%s: %w", path, err)
		return
	}
	compiler = jsonschema.NewCompiler()
	loadErr = compiler.AddResource(baseURL, doc)
}

// Validate checks the JSON value data against the schema's definition def
// ("SessionNotification", "PromptResponse", "RequestPermissionRequest",
// ...). The error names the failing keyword and its place in data; it
// wraps ErrNoSchema when the schema file is missing (see Path).
func Validate(def string, data []byte) error {
	once.Do(load)
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
