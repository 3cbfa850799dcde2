package shell

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// toolSpec describes run_command for a model, with the limits of opts and
// the confinement of sandbox.
func toolSpec(opts Options, sandbox sandboxPlan) engine.ToolSpec {
	return engine.ToolSpec{
		Name: ToolName,
		Description: fmt.Sprintf("Run a shell command in the workspace with %s -c and get its exit code, stdout and stderr. "+
			"Use it to build, test, run scripts and inspect the project (go test ./..., make, git status, ls, grep -rn). "+
			"The command runs non-interactively: stdin is empty, so a command that waits for input fails or runs into the timeout; pass flags such as --yes, --no-pager or --non-interactive. "+
			"Each call starts a fresh shell: cd and exported variables do not carry over to the next call; use cwd instead of cd. "+
			"A non-zero exit code is reported in exit_code, not as an error. "+
			"Processes left running in the background are stopped when the command's shell exits, so do not use this to start servers that should keep running. "+
			"Each of stdout and stderr keeps its first max_output_bytes bytes; the rest is dropped and counted in stdout_truncated_bytes and stderr_truncated_bytes, so filter long output (grep, head, tail, --quiet) rather than raising the limit. "+
			"%s"+
			"Only a few environment variables are passed (PATH, HOME, locale, toolchain settings; the list is in the result's env), and $TMPDIR is a fresh directory deleted after the command.",
			opts.Shell, sandboxDescription(sandbox)),
		InputSchema:   inputSchema(opts),
		Risk:          engine.RiskHigh,
		ReadOnly:      false,
		NeedsApproval: true,
		Kind:          engine.ToolKindCommand,
	}
}

// sandboxDescription tells the model what the sandbox of plan lets a
// command do, as a sentence followed by a space; "" without a sandbox.
func sandboxDescription(plan sandboxPlan) string {
	if plan.kind == kindNone {
		return ""
	}
	where := "the workspace and $TMPDIR"
	if len(plan.writable) > 0 {
		where = "the workspace, $TMPDIR and " + strings.Join(plan.writable, ", ")
	}
	s := "The command runs in a sandbox: it can read files anywhere but write only inside " + where + " (writes elsewhere fail with permission denied or read-only file system)"
	if !plan.network {
		s += ", and it has no network access, so downloads (go mod download, npm install, pip install) and connections, even to localhost, fail"
	}
	return s + ". "
}

type schemaObject struct {
	Schema               string           `json:"$schema"`
	Type                 string           `json:"type"`
	Properties           schemaProperties `json:"properties"`
	Required             []string         `json:"required"`
	AdditionalProperties bool             `json:"additionalProperties"`
}

type schemaProperties struct {
	Command        schemaProperty `json:"command"`
	Cwd            schemaProperty `json:"cwd"`
	TimeoutSeconds schemaProperty `json:"timeout_seconds"`
	MaxOutputBytes schemaProperty `json:"max_output_bytes"`
}

type schemaProperty struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	MinLength   *int   `json:"minLength,omitempty"`
	Minimum     *int64 `json:"minimum,omitempty"`
	Maximum     *int64 `json:"maximum,omitempty"`
	Default     *int64 `json:"default,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// inputSchema is the JSON Schema (draft 2020-12) of run_command's input
// with the limits of opts.
func inputSchema(opts Options) json.RawMessage {
	maxSec := int64(opts.MaxTimeout / time.Second)
	s := schemaObject{
		Schema: "https://json-schema.org/draft/2020-12/schema",
		Type:   "object",
		Properties: schemaProperties{
			Command: schemaProperty{
				Type: "string",
				Description: fmt.Sprintf("The shell command to run with %s -c, for example \"go test ./...\" or \"ls -la src && git status\". "+
					"Pipes, redirections, && and ; work. At most %d bytes; write longer scripts to a file and run the file.",
					opts.Shell, maxCommandBytes),
				MinLength: ptr(1),
			},
			Cwd: schemaProperty{
				Type: "string",
				Description: "The directory to run the command in, relative to the workspace root, for example \"server\" or \"packages/web\". " +
					"Default: the workspace root. It must be an existing directory inside the workspace; paths that leave it are refused.",
			},
			TimeoutSeconds: schemaProperty{
				Type: "integer",
				Description: fmt.Sprintf("Seconds the command may run before it and every process it started are stopped. Default %d, at most %d. "+
					"On timeout you still get the output produced so far, with timed_out set to true.",
					int64(opts.Timeout/time.Second), maxSec),
				Minimum: ptr[int64](1),
				Maximum: ptr(maxSec),
				Default: ptr(int64(opts.Timeout / time.Second)),
			},
			MaxOutputBytes: schemaProperty{
				Type: "integer",
				Description: fmt.Sprintf("How many bytes of stdout, and separately of stderr, to keep. Default %d, at most %d. "+
					"The first bytes are kept; the rest is dropped and counted in stdout_truncated_bytes / stderr_truncated_bytes.",
					opts.OutputBytes, opts.MaxOutputBytes),
				Minimum: ptr[int64](1),
				Maximum: ptr(int64(opts.MaxOutputBytes)),
				Default: ptr(int64(opts.OutputBytes)),
			},
		},
		Required:             []string{"command"},
		AdditionalProperties: false,
	}
	b, err := json.Marshal(s)
	if err != nil {
		// The schema is made of strings and integers only.
		panic(fmt.Sprintf("shell: encode input schema: %v", err))
	}
	return b
}
