package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// Members of task.data the task types read.
const (
	dataFilePath = "file_path"
	dataContext  = "context"
	dataPrompt   = "prompt"
)

// Focus paragraphs a code_review prompt gains from task.requirements.
const (
	focusSecurity = "Security focus: look for injection (SQL, shell, HTML), unsafe handling of untrusted input, " +
		"path traversal, secrets or credentials in the code, missing authentication or authorization checks, " +
		"unsafe deserialization and weak cryptography."
	focusPerformance = "Performance focus: look for needless work in loops, repeated I/O or allocation, " +
		"quadratic algorithms on growing inputs, blocking calls on hot paths and missing caching or batching."
	focusCompliance = "Compliance focus: look for personal data that is logged, stored or sent without need, " +
		"missing licence or copyright headers, use of dependencies or APIs under incompatible licences, and " +
		"departures from the project's stated conventions."
)

// buildInput turns a decoded task into the engine turn that processes it.
// It checks what the task's type requires of task.data: a missing
// member is a 400 MISSING_FIELD, a member of the wrong type or a file
// outside the workspace (or missing, or not a regular file) a 400
// INVALID_REQUEST about that member.
func buildInput(d *decoded, root *workspace.Root) (engine.TurnInput, *Error) {
	t := &d.Task
	var b strings.Builder
	var in engine.TurnInput
	ctxText, err := optionalString(t.Data, dataContext)
	if err != nil {
		return in, err
	}
	path, err := optionalString(t.Data, dataFilePath)
	if err != nil {
		return in, err
	}
	if path != "" {
		rel, err := workspaceFile(root, path)
		if err != nil {
			return in, err
		}
		in.Attachments = []engine.Attachment{{Path: rel, MIME: "text/plain"}}
	}

	switch t.Type {
	case TypeCodeReview:
		if path == "" {
			return in, missing("task.data."+dataFilePath, t.Type)
		}
		fmt.Fprintf(&b, "Review the file %s (task %s).\n\n", path, t.ID)
		b.WriteString("Report bugs, risky constructs and unclear code, each with the line it concerns and a concrete fix. " +
			"Say which findings matter most. If you find nothing worth changing, say so plainly.")
		if r := t.Requirements; r != nil {
			for _, f := range []struct {
				on   bool
				text string
			}{{r.Security, focusSecurity}, {r.Performance, focusPerformance}, {r.Compliance, focusCompliance}} {
				if f.on {
					b.WriteString("\n\n" + f.text)
				}
			}
		}
	case TypeValidation:
		if path != "" {
			fmt.Fprintf(&b, "Validate the file %s (task %s): check it for errors (syntax errors, type errors, "+
				"references to things that do not exist, obvious bugs).", path, t.ID)
		} else {
			fmt.Fprintf(&b, "Validate the workspace (task %s): look through its files with the tools you have and "+
				"check them for errors (syntax errors, type errors, broken references, inconsistent configuration).", t.ID)
		}
		b.WriteString("\n\nStart your answer with a line that is exactly \"VERDICT: PASS\" when you found no errors " +
			"or \"VERDICT: FAIL\" when you did, then list each error with its file and line.")
	case TypeGeneral:
		prompt, err := optionalString(t.Data, dataPrompt)
		if err != nil {
			return in, err
		}
		if prompt == "" {
			return in, missing("task.data."+dataPrompt, t.Type)
		}
		b.WriteString(prompt)
	}
	if ctxText != "" {
		fmt.Fprintf(&b, "\n\nContext: %s", ctxText)
	}
	if rest := otherData(t.Data); rest != "" {
		fmt.Fprintf(&b, "\n\nTask data: %s", rest)
	}
	in.Message = b.String()
	return in, nil
}

// optionalString returns data[key] when it is a string; "" when it is
// absent or null. Another type, or an empty string, is refused.
func optionalString(data map[string]any, key string) (string, *Error) {
	v, ok := data[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid("task.data."+key, fmt.Sprintf("Expected string, got %s", jsonType(v)))
	}
	if s == "" {
		return "", invalid("task.data."+key, "Must not be empty")
	}
	return s, nil
}

// jsonType names the JSON type of a value decoded by encoding/json.
func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "string"
}

// workspaceFile resolves a task's file_path inside the workspace and
// returns the path to attach: relative to the workspace root with every
// symlink resolved. The file must exist and be a regular file.
func workspaceFile(root *workspace.Root, path string) (string, *Error) {
	const field = "task.data." + dataFilePath
	rel, err := root.Real(path)
	if err != nil {
		var esc *workspace.EscapeError
		if errors.As(err, &esc) {
			return "", invalid(field, upperFirst(err.Error()))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", invalid(field, fmt.Sprintf("No file %q in the workspace", path))
		}
		return "", invalid(field, upperFirst(err.Error()))
	}
	fi, err := root.FS().Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", invalid(field, fmt.Sprintf("No file %q in the workspace", path))
	case err != nil:
		return "", invalid(field, upperFirst(root.FSError(rel, err).Error()))
	case !fi.Mode().IsRegular():
		return "", invalid(field, fmt.Sprintf("%q is not a regular file", path))
	}
	return rel, nil
}

// otherData returns the members of task.data that no task type reads,
// as a JSON object, or "" when there are none.
func otherData(data map[string]any) string {
	rest := maps.Clone(data)
	for _, k := range []string{dataFilePath, dataContext, dataPrompt} {
		delete(rest, k)
	}
	if len(rest) == 0 {
		return ""
	}
	b, err := json.Marshal(rest) // encoding/json sorts the keys
	if err != nil {
		return ""
	}
	return string(b)
}

// verdict reads the "VERDICT: PASS|FAIL" line a validation answer starts
// with: "pass", "fail" or "unknown".
func verdict(output string) string {
	for line := range strings.Lines(output) {
		line = strings.ToUpper(strings.Trim(strings.TrimSpace(line), "*_`#> "))
		if rest, ok := strings.CutPrefix(line, "VERDICT:"); ok {
			switch strings.TrimSpace(rest) {
			case "PASS":
				return "pass"
			case "FAIL":
				return "fail"
			}
		}
	}
	return "unknown"
}
