// Command badplugin breaks the plugin contract in the way its first
// argument names, so the conformance check can be seen to catch it:
// "stdout" writes to stdout during a call, "badspec" describes a tool
// with an invalid name and no description, "crash" exits when a call's
// arguments are not an object, "linger" keeps running after the host
// closes the connection, "good" keeps the contract.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

type tools struct{ mode string }

func (t tools) Tools(context.Context) ([]engine.ToolSpec, error) {
	spec := engine.ToolSpec{Name: "ok_tool", Description: "a tool", InputSchema: json.RawMessage(`{"type":"object"}`), Risk: engine.RiskLow, ReadOnly: true}
	if t.mode == "badspec" {
		spec.Name, spec.Description, spec.Risk = "bad tool!", "", "extreme"
	}
	return []engine.ToolSpec{spec}, nil
}

func (t tools) Invoke(_ context.Context, req engine.InvokeRequest, _ func(engine.ToolUpdate)) (engine.ToolResult, error) {
	if t.mode == "stdout" {
		fmt.Println("debug: called", req.Tool)
	}
	if req.Tool != "ok_tool" {
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeUnknownTool, "no tool %q", req.Tool)
	}
	var in map[string]any
	if err := json.Unmarshal(req.Args, &in); err != nil {
		if t.mode == "crash" {
			os.Exit(3)
		}
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "arguments: %v", err)
	}
	return engine.JSONResult(in, "ok")
}

func main() {
	mode := "good"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	plugins.ServeTool(tools{mode: mode})
	if mode == "linger" {
		select {} // keeps running after the host closed the connection
	}
}
