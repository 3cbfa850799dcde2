package task

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// The contract's three JSON Schemas (draft 2020-12), copied verbatim.
//
//go:embed schemas/request.schema.json schemas/response.schema.json schemas/error.schema.json
var schemaFiles embed.FS

// Schema file names inside schemaFiles.
const (
	requestSchemaFile  = "schemas/request.schema.json"
	responseSchemaFile = "schemas/response.schema.json"
	errorSchemaFile    = "schemas/error.schema.json"
)

// compiled schemas, built once at package initialisation: a broken embedded
// schema is a build defect, caught by every test.
var (
	requestSchema  = mustCompile(requestSchemaFile)
	responseSchema = mustCompile(responseSchemaFile)
	errorSchema    = mustCompile(errorSchemaFile)
)

func mustCompile(name string) *jsonschema.Schema {
	data, err := schemaFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		panic(fmt.Errorf("%s: %w", name, err))
	}
	url := "https://plexus.invalid/transports/task/" + name
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		panic(fmt.Errorf("%s: %w", name, err))
	}
	s, err := c.Compile(url)
	if err != nil {
		panic(fmt.Errorf("%s: %w", name, err))
	}
	return s
}

// fieldOrder is the order of the request's members in the contract; the
// first validation error is the one about the earliest field in it.
var fieldOrder = []string{
	"", "task", "task.id", "task.type", "task.priority", "task.data",
	"task.requirements", "task.requirements.security", "task.requirements.performance",
	"task.requirements.compliance", "task.timeout", "task.retryCount", "repoId",
}

// violation is one leaf error of a schema validation, as the wire reports
// it.
type violation struct {
	field, reason string
}

func (v violation) rank() int {
	if i := slices.Index(fieldOrder, v.field); i >= 0 {
		return i
	}
	return len(fieldOrder)
}

// firstViolation returns the validation error to report from err (the
// error of Schema.Validate): the leaf errors of the tree, one per missing
// property for a "required" failure, ordered by fieldOrder and then by
// field and reason, so the choice does not depend on the validator's map
// iteration. It returns ok false when err is not a *ValidationError.
func firstViolation(err error) (violation, bool) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return violation{}, false
	}
	var all []violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := strings.Join(e.InstanceLocation, ".")
		if r, ok := e.ErrorKind.(*kind.Required); ok {
			for _, name := range r.Missing {
				all = append(all, violation{joinField(loc, name), "Field is required"})
			}
			return
		}
		all = append(all, violation{loc, describeKind(e.ErrorKind)})
	}
	walk(ve)
	if len(all) == 0 {
		return violation{"", describeKind(ve.ErrorKind)}, true
	}
	slices.SortFunc(all, func(a, b violation) int {
		if d := a.rank() - b.rank(); d != 0 {
			return d
		}
		if c := strings.Compare(a.field, b.field); c != 0 {
			return c
		}
		return strings.Compare(a.reason, b.reason)
	})
	return all[0], true
}

func joinField(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

var printer = message.NewPrinter(language.English)

// describeKind words a schema violation for people.
func describeKind(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("Expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return "Must be one of: " + strings.Join(want, ", ")
	case *kind.MinLength:
		if k.Want == 1 {
			return "Must not be empty"
		}
		return fmt.Sprintf("Must be at least %d characters long", k.Want)
	case *kind.Minimum:
		return "Must be at least " + ratString(k.Want)
	}
	s := k.LocalizedString(printer)
	if s == "" {
		return "Invalid value"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}
