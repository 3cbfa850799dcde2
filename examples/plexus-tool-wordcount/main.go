// Command plexus-tool-wordcount is a complete third-party Plexus tool
// plugin: one tool, word_count, that counts the lines, words and bytes of
// a file in the workspace. Install it (built, checked and recorded with its
// SHA-256 in the plugin directory's lock file) and Plexus finds it by its
// name:
//
//	plexus plugins install ./examples/plexus-tool-wordcount
//	plexus plugins
//
// Run it as plexus-tool-wordcount --debug (under a debugger, e.g. dlv exec
// ... -- --debug) and give plexus the PLEXUS_REATTACH_PLUGINS line it
// prints to debug it inside a real turn.
//
// It shows the whole plugin contract: describe the tools (name,
// description for the model, JSON Schema of the input, risk), run a call
// confined to the workspace, stream progress, return a JSON result with a
// one-line summary, and report failures as typed tool errors.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"unicode"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/plugins"
)

// wordCount implements engine.Toolset.
type wordCount struct{}

var _ engine.Toolset = wordCount{}

func (wordCount) Tools(context.Context) ([]engine.ToolSpec, error) {
	return []engine.ToolSpec{{
		Name:        "word_count",
		Description: "Count the lines, words and bytes of one file in the workspace (like wc).",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {"path": {"type": "string", "description": "Workspace-relative path of the file."}},
  "required": ["path"],
  "additionalProperties": false
}`),
		Risk:     engine.RiskLow,
		ReadOnly: true,
	}}, nil
}

func (wordCount) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if req.Tool != "word_count" {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q in this plugin", req.Tool)
	}
	var in struct {
		Path string `json:"path"`
	}
	dec := json.NewDecoder(bytes.NewReader(req.Args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Path == "" {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, `word_count needs {"path": "<file>"}`)
	}
	root, err := workspace.Open(req.WorkspaceRoot)
	if err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "open workspace: %v", err)
	}
	defer root.Close()
	rel, err := root.Resolve(in.Path) // refuses .., outside paths and escaping symlinks
	if err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodePermissionDenied, "%v", err)
	}
	f, err := root.FS().Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s does not exist in the workspace", in.Path)
	}
	if err != nil {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "%v", err)
	}
	defer f.Close()

	onUpdate(engine.ToolUpdate{Progress: &engine.ToolProgress{Message: "counting " + rel}})
	var lines, words, size int
	inWord := false
	r := bufio.NewReader(f)
	for {
		if lines%4096 == 0 && ctx.Err() != nil {
			return engine.ToolResult{}, ctx.Err()
		}
		c, n, err := r.ReadRune()
		if err != nil {
			break
		}
		size += n
		if c == '\n' {
			lines++
		}
		if unicode.IsSpace(c) {
			inWord = false
		} else if !inWord {
			inWord = true
			words++
		}
	}
	return engine.JSONResult(map[string]any{"path": rel, "lines": lines, "words": words, "bytes": size},
		fmt.Sprintf("%d lines, %d words, %d bytes in %s", lines, words, size, rel))
}

func main() { plugins.ServeTool(wordCount{}) }
