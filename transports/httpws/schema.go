package httpws

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// schemaBase is the base URL the embedded schemas are registered under;
// the WebSocket message schemas carry their own $id under it.
const (
	openAPIURL = "https://plexus.dev/schemas/openapi.json"
	wsBaseURL  = "https://plexus.dev/schemas/ws/"
)

// validator holds the compiled request and client-message schemas.
type validator struct {
	rest map[string]*jsonschema.Schema // by components/schemas name
	ws   map[string]*jsonschema.Schema // by message type
}

// Request body schemas (components/schemas of openapi.json).
const (
	schemaRegisterWorkspace = "RegisterWorkspaceRequest"
	schemaCreateSession     = "CreateSessionRequest"
	schemaSetCurrentModel   = "SetCurrentModelRequest"
	schemaIncremental       = "IncrementalRequest"
	schemaPolicy            = "Policy"
)

// clientTypes are the client message types, each validated by
// schemas/ws/<type>.json.
var clientTypes = []string{
	typeClientHello, typeUserMessage, typeContextUpdate, typeApprovalResponse,
	typePatchApplyResult, typeCommandResult, typeCancel, typeFileChanges,
}

// compiled is built once, on first use (not at program start: every
// plexus command, plexus search included, would pay for it): a broken
// embedded schema is a build defect that every test catches.
var compiled = sync.OnceValue(mustCompileSchemas)

func mustCompileSchemas() *validator {
	v, err := compileSchemas(schemas.FS)
	if err != nil {
		panic(err)
	}
	return v
}

func compileSchemas(fsys fs.FS) (*validator, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	add := func(name, url string) error {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return c.AddResource(url, doc)
	}
	if err := add("openapi.json", openAPIURL); err != nil {
		return nil, err
	}
	files, err := fs.Glob(fsys, "ws/*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := add(f, wsBaseURL+strings.TrimPrefix(f, "ws/")); err != nil {
			return nil, err
		}
	}
	v := &validator{rest: map[string]*jsonschema.Schema{}, ws: map[string]*jsonschema.Schema{}}
	for _, name := range []string{schemaRegisterWorkspace, schemaCreateSession, schemaSetCurrentModel, schemaIncremental, schemaPolicy, schemaSearch} {
		s, err := c.Compile(openAPIURL + "#/components/schemas/" + name)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		v.rest[name] = s
	}
	for _, t := range clientTypes {
		s, err := c.Compile(wsBaseURL + t + ".json")
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", t, err)
		}
		v.ws[t] = s
	}
	return v, nil
}

// invalid is a body or message that breaks its schema: Field is a JSON
// pointer to the offending member ("" for the whole document).
type invalid struct {
	Field  string
	Reason string
}

func (e *invalid) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// check validates the JSON document data against s. The error is an
// *invalid naming the first offending member (in document order of the
// paths, so the answer is stable).
func check(s *jsonschema.Schema, data []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &invalid{Reason: "not valid JSON: " + err.Error()}
	}
	err = s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &invalid{Reason: err.Error()}
	}
	var all []invalid
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := pointer(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, name := range k.Missing {
				all = append(all, invalid{loc + "/" + name, "is required"})
			}
			return
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				all = append(all, invalid{loc + "/" + name, "is not a known member"})
			}
			return
		}
		all = append(all, invalid{loc, e.ErrorKind.LocalizedString(printer)})
	}
	walk(ve)
	if len(all) == 0 {
		return &invalid{Reason: ve.ErrorKind.LocalizedString(printer)}
	}
	slices.SortFunc(all, func(a, b invalid) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Reason, b.Reason))
	})
	return &all[0]
}

var printer = message.NewPrinter(language.English)

func pointer(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// decodeChecked validates data against s and decodes it into v.
func decodeChecked(s *jsonschema.Schema, data []byte, v any) error {
	if err := check(s, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &invalid{Reason: err.Error()}
	}
	return nil
}
