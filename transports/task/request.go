package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine/receipts"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits and defaults of a request.
const (
	// DefaultTimeout is the task timeout when task.timeout is absent or 0.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest task.timeout accepted: 300000 ms.
	MaxTimeout = 300 * time.Second
	// MaxRetryCount is the largest task.retryCount accepted.
	MaxRetryCount = 5
	// MaxRepoIDLength is the longest repoId accepted, in bytes.
	MaxRepoIDLength = 100
)

// Request is the body of POST /api/task/process.
type Request struct {
	Task Task `json:"task"`
	// RepoID names the repository whose receipt log records the task;
	// kebab-case, 1 to MaxRepoIDLength characters.
	RepoID string `json:"repoId"`
}

// Task is the task member of a Request.
type Task struct {
	// ID is the client's id of the task, echoed as result.taskId.
	ID string `json:"id"`
	// Type is "code_review", "validation" or "general".
	Type string `json:"type"`
	// Priority is "low", "medium" (the default), "high" or "critical".
	Priority string `json:"priority,omitempty"`
	// Data holds the type's inputs: file_path (a workspace-relative path),
	// context (a string), prompt (for general), and anything else, which is
	// passed to the model as JSON.
	Data map[string]any `json:"data"`
	// Requirements add review focuses to a code_review.
	Requirements *Requirements `json:"requirements,omitempty"`
	// Timeout is the task's deadline in milliseconds, queueing included;
	// nil or 0 means DefaultTimeout; at most MaxTimeout.
	Timeout *float64 `json:"timeout,omitempty"`
	// RetryCount is how many times a failed engine turn is tried again
	// (0 to MaxRetryCount, whole numbers).
	RetryCount *float64 `json:"retryCount,omitempty"`
}

// Requirements are the optional focuses of a task.
type Requirements struct {
	Security    bool `json:"security,omitempty"`
	Performance bool `json:"performance,omitempty"`
	Compliance  bool `json:"compliance,omitempty"`
}

// Priorities, most urgent first; the index is the queue rank.
var priorities = []string{"critical", "high", "medium", "low"}

// Task types, as listed in refusals.
const (
	TypeCodeReview = "code_review"
	TypeValidation = "validation"
	TypeGeneral    = "general"
)

var taskTypes = []string{TypeCodeReview, TypeValidation, TypeGeneral}

// repoIDPattern is the contract's kebab-case.
var repoIDPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// decoded is a request that passed decoding and the checks that need no
// file system.
type decoded struct {
	Request
	// taskJSON is the task member in canonical JSON (RFC 8785), the input
	// of the receipt's args_digest.
	taskJSON []byte
	timeout  time.Duration
	retries  int
	rank     int // index in priorities
}

// decodeRequest parses and checks a request body: strict JSON (see
// receipts.Canonicalize: no duplicate member names, valid UTF-8, numbers
// within a double), then the contract's request schema, then the checks
// the schema cannot state, in field order (task.type, task.timeout,
// task.retryCount, repoId). The first problem is returned as a 400 Error.
func decodeRequest(body []byte) (*decoded, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fieldError(http.StatusBadRequest, CodeInvalidRequest, "Request body is not valid JSON", "",
			"The request body is empty; send a JSON object")
	}
	canon, err := receipts.Canonicalize(body)
	if err != nil {
		return nil, fieldError(http.StatusBadRequest, CodeInvalidRequest, "Request body is not valid JSON", "",
			upperFirst(err.Error()))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil { // canonical JSON always decodes
		return nil, invalid("", "Invalid JSON: "+err.Error())
	}
	if err := requestSchema.Validate(inst); err != nil {
		v, ok := firstViolation(err)
		if !ok {
			return nil, invalid("", err.Error())
		}
		return nil, invalid(v.field, v.reason)
	}
	if e := caseVariants(canon); e != nil {
		return nil, e
	}
	var wire struct {
		Task   json.RawMessage `json:"task"`
		RepoID string          `json:"repoId"`
	}
	d := &decoded{}
	if err := json.Unmarshal(canon, &wire); err != nil {
		return nil, invalid("", err.Error())
	}
	if err := json.Unmarshal(wire.Task, &d.Task); err != nil {
		return nil, invalid("task", err.Error())
	}
	d.RepoID, d.taskJSON = wire.RepoID, wire.Task

	t := &d.Task
	switch t.Type {
	case TypeCodeReview, TypeValidation, TypeGeneral:
	default:
		return nil, invalid("task.type", fmt.Sprintf("Unsupported task type %q; supported types: %s",
			t.Type, strings.Join(taskTypes, ", ")))
	}
	d.timeout = DefaultTimeout
	if t.Timeout != nil && *t.Timeout > 0 {
		if *t.Timeout > float64(MaxTimeout/time.Millisecond) {
			return nil, invalid("task.timeout", fmt.Sprintf("Must be at most %d milliseconds", MaxTimeout/time.Millisecond))
		}
		d.timeout = time.Duration(*t.Timeout * float64(time.Millisecond))
	}
	if t.RetryCount != nil {
		n := *t.RetryCount
		if n != math.Trunc(n) || n > MaxRetryCount {
			return nil, invalid("task.retryCount", fmt.Sprintf("Must be a whole number from 0 to %d", MaxRetryCount))
		}
		d.retries = int(n)
	}
	if t.Priority == "" {
		t.Priority = "medium"
	}
	for i, p := range priorities {
		if p == t.Priority {
			d.rank = i
		}
	}
	if err := ValidateRepoID(d.RepoID); err != nil {
		return nil, invalid("repoId", upperFirst(err.Error()))
	}
	return d, nil
}

// ValidateRepoID checks that id is a repoId this front-end accepts:
// kebab-case (lower-case letters and digits in words joined by single
// dashes), 1 to MaxRepoIDLength characters, and a safe directory name
// (receipts.ValidateSegment). The error says which rule id breaks.
func ValidateRepoID(id string) error {
	if len(id) > MaxRepoIDLength || !repoIDPattern.MatchString(id) {
		return fmt.Errorf("must be kebab-case (lower-case letters and digits in words joined by single dashes) and at most %d characters", MaxRepoIDLength)
	}
	return receipts.ValidateSegment(id)
}

// ReceiptsDir is the directory of the task receipts of repoID under the
// storage root zuRoot: zuRoot/ide/receipts/repoID, whose month files are
// {yyyy}/{mm}/receipts.jsonl. The error is ValidateRepoID's, or
// receipts.RepoDir's for an empty root.
func ReceiptsDir(zuRoot, repoID string) (string, error) {
	if err := ValidateRepoID(repoID); err != nil {
		return "", err
	}
	return receipts.RepoDir(zuRoot, repoID)
}

// KeyDir is the directory of the key that signs task receipts under the
// storage root zuRoot: zuRoot/ide/keys (receipts.LoadOrCreateKey).
func KeyDir(zuRoot string) string { return filepath.Join(zuRoot, "ide", "keys") }

// timeoutMs is the task's effective timeout in milliseconds, as the 504
// details report it.
func (d *decoded) timeoutMs() float64 {
	return float64(d.timeout) / float64(time.Millisecond)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// knownMembers are the member names of the request's objects, by the
// dotted path of the object ("" for the body).
var knownMembers = map[string][]string{
	"":                  {"task", "repoId"},
	"task":              {"id", "type", "priority", "data", "requirements", "timeout", "retryCount"},
	"task.requirements": {"security", "performance", "compliance"},
}

// caseVariants refuses a member whose name is one of the contract's
// names in other letter case ("repoid", "RetryCount"): encoding/json
// would read it in place of, or as, the real one, past the schema's
// checks. canon is schema-valid canonical JSON.
func caseVariants(canon []byte) *Error {
	for at, names := range knownMembers {
		obj := map[string]json.RawMessage{}
		raw := json.RawMessage(canon)
		if at != "" {
			var ok bool
			if raw, ok = member(canon, at); !ok {
				continue
			}
		}
		if json.Unmarshal(raw, &obj) != nil {
			continue
		}
		for name := range obj {
			for _, known := range names {
				if name != known && strings.EqualFold(name, known) {
					field := name
					if at != "" {
						field = at + "." + name
					}
					return invalid(field, fmt.Sprintf("Unknown member; names are case-sensitive: did you mean %q?", known))
				}
			}
		}
	}
	return nil
}

// member returns the value at a dotted path of objects in doc.
func member(doc []byte, path string) (json.RawMessage, bool) {
	raw := json.RawMessage(doc)
	for name := range strings.SplitSeq(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil, false
		}
		var ok bool
		if raw, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return raw, true
}
