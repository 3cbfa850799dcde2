package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/plexus-agent/plexus/engine"
)

// toolSpec maps MCP tool t of a server to the engine spec named name. The
// annotations decide policy (see the package doc, "Policy").
func toolSpec(name string, t *mcp.Tool) engine.ToolSpec {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	readOnly, risk := classify(t.Annotations)
	return engine.ToolSpec{
		Name:          name,
		Description:   desc,
		InputSchema:   schema,
		Risk:          risk,
		ReadOnly:      readOnly,
		NeedsApproval: !readOnly,
	}
}

// classify reads MCP tool annotations with the spec's defaults
// (readOnlyHint false, destructiveHint true, openWorldHint true).
func classify(a *mcp.ToolAnnotations) (readOnly bool, risk engine.RiskLevel) {
	destructive, openWorld := true, true
	if a != nil {
		readOnly = a.ReadOnlyHint
		if a.DestructiveHint != nil {
			destructive = *a.DestructiveHint
		}
		if a.OpenWorldHint != nil {
			openWorld = *a.OpenWorldHint
		}
	}
	switch {
	case readOnly && openWorld:
		return true, engine.RiskMedium
	case readOnly:
		return true, engine.RiskLow
	case destructive || openWorld:
		return false, engine.RiskHigh
	}
	return false, engine.RiskMedium
}

// callResult is the JSON value the model sees for a successful call.
type callResult struct {
	// Text is the text content blocks, joined by newlines.
	Text string `json:"text"`
	// Structured is the call's structuredContent, verbatim.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Attachments summarise the other content blocks.
	Attachments []attachment `json:"attachments,omitempty"`
}

// attachment summarises a non-text content block: an image or audio clip
// (its size, not its data), a resource link, or an embedded resource (its
// text when it is text, else its size).
type attachment struct {
	Type     string `json:"type"`
	MIMEType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
	Name     string `json:"name,omitempty"`
	Bytes    int    `json:"bytes,omitempty"`
	Text     string `json:"text,omitempty"`
}

// toolResult maps a CallToolResult that is not an error.
func toolResult(r *mcp.CallToolResult) (engine.ToolResult, error) {
	var out callResult
	var texts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
		case *mcp.ImageContent:
			out.Attachments = append(out.Attachments, attachment{Type: "image", MIMEType: c.MIMEType, Bytes: len(c.Data)})
		case *mcp.AudioContent:
			out.Attachments = append(out.Attachments, attachment{Type: "audio", MIMEType: c.MIMEType, Bytes: len(c.Data)})
		case *mcp.ResourceLink:
			out.Attachments = append(out.Attachments, attachment{Type: "resource_link", MIMEType: c.MIMEType, URI: c.URI, Name: c.Name})
		case *mcp.EmbeddedResource:
			a := attachment{Type: "resource"}
			if rc := c.Resource; rc != nil {
				a.URI, a.MIMEType, a.Text, a.Bytes = rc.URI, rc.MIMEType, rc.Text, len(rc.Blob)
			}
			out.Attachments = append(out.Attachments, a)
		default:
			out.Attachments = append(out.Attachments, attachment{Type: fmt.Sprintf("%T", c)})
		}
	}
	out.Text = strings.Join(texts, "\n")
	if r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err != nil {
			return engine.ToolResult{}, fmt.Errorf("encode structuredContent: %w", err)
		}
		out.Structured = b
	}
	return engine.JSONResult(out, summary(out))
}

// summary is one line for people: the first line of the text, else what
// the attachments are.
func summary(r callResult) string {
	line, _, _ := strings.Cut(strings.TrimSpace(r.Text), "\n")
	if line == "" {
		switch {
		case len(r.Attachments) > 0:
			kinds := make([]string, len(r.Attachments))
			for i, a := range r.Attachments {
				kinds[i] = a.Type
			}
			line = strings.Join(kinds, ", ")
		case len(r.Structured) > 0:
			line = string(r.Structured)
		default:
			line = "(no output)"
		}
	}
	if len(line) > 120 {
		line = strings.ToValidUTF8(line[:117], "") + "..."
	}
	return line
}

// errorText is the text of an isError result, for a *engine.ToolError.
func errorText(r *mcp.CallToolResult) string {
	var texts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	if len(texts) == 0 {
		if r.StructuredContent != nil {
			b, _ := json.Marshal(r.StructuredContent)
			return string(b)
		}
		return "the tool reported an error without a message"
	}
	return strings.Join(texts, "\n")
}
