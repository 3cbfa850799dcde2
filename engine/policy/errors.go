package policy

import (
	"errors"
	"fmt"

	"github.com/plexus-agent/plexus/engine"
)

// ErrInvalidPolicy is matched (errors.Is) by every error of Parse, New,
// Add and UnmarshalJSON that rejects a policy or rule as invalid.
var ErrInvalidPolicy = errors.New("invalid policy")

// ValidationError is one problem of a policy document or rule. Path names
// the field the way a JSON document nests it ("rules[2].paths[0]",
// "commands.mode"); it is empty for the document as a whole. It matches
// ErrInvalidPolicy and engine.ErrInvalidRequest through errors.Is, so a
// front-end answers a rejected PUT with its "bad request" code.
type ValidationError struct {
	Path string
	Msg  string
}

func (e *ValidationError) Error() string {
	if e.Path == "" {
		return "policy: " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Is matches ErrInvalidPolicy and engine.ErrInvalidRequest.
func (e *ValidationError) Is(target error) bool {
	return target == ErrInvalidPolicy || target == engine.ErrInvalidRequest
}

// maxReported bounds how many problems one error lists.
const maxReported = 20

// problems collects validation errors.
type problems struct {
	errs []error
	more int
}

func (p *problems) add(path, format string, args ...any) {
	if len(p.errs) == maxReported {
		p.more++
		return
	}
	p.errs = append(p.errs, &ValidationError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems as one error (errors.Join; errors.As finds
// the first *ValidationError), or nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	errs := p.errs
	if p.more > 0 {
		errs = append(errs[:len(errs):len(errs)], &ValidationError{Msg: fmt.Sprintf("and %d more problems", p.more)})
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// field joins a parent path and a field name.
func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// index joins a parent path and an array index.
func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }
