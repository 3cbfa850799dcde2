// Command noopserver is a minimal MCP server over stdio, on the go-sdk,
// with one read-only tool "noop" that returns the text "ok". The benchmark
// of plugins/mcp calls it as the MCP peer of the test tool plugin's noop.
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "noopserver", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "noop",
		Description: "Does nothing and returns ok.",
		InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
