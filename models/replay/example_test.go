package replay_test

import (
	"context"
	"fmt"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/models/replay"
)

// A script answers one Chat call per line. The second line's text is a
// template citing the list_files result that came back in between.
func ExampleProvider_Chat() {
	p := replay.New()
	conv := []engine.Message{{Role: engine.RoleUser, Content: "How many files are there?"}}
	print := func(c engine.ChatChunk) error {
		switch {
		case c.Text != "":
			fmt.Printf("text %q\n", c.Text)
		case c.ToolCall != nil:
			fmt.Printf("call %s %s %s\n", c.ToolCall.ID, c.ToolCall.Name, c.ToolCall.Args)
		case c.Usage != nil:
			fmt.Printf("usage %d+%d\n", c.Usage.PromptTokens, c.Usage.CompletionTokens)
		default:
			fmt.Printf("done %s\n", c.DoneReason)
		}
		return nil
	}
	req := engine.ChatRequest{Model: "testdata/hello.jsonl", Messages: conv}
	if err := p.Chat(context.Background(), req, print); err != nil {
		fmt.Println(err)
	}

	req.Messages = append(req.Messages,
		engine.Message{Role: engine.RoleAssistant, Content: "I'll list the files first.",
			ToolCalls: []engine.ToolCall{{ID: "call_1_1", Name: "list_files", Args: []byte(`{"path":"."}`)}}},
		engine.Message{Role: engine.RoleTool, ToolCallID: "call_1_1", ToolName: "list_files",
			Content: `{"files": ["README.md", "go.mod", "engine"]}`})
	if err := p.Chat(context.Background(), req, print); err != nil {
		fmt.Println(err)
	}
	// Output:
	// text "I'll"
	// text " list"
	// text " the"
	// text " files"
	// text " first."
	// call call_1_1 list_files {"path":"."}
	// usage 42+11
	// done tool_calls
	// text "There"
	// text " are"
	// text " 3"
	// text " files"
	// text " here."
	// usage 60+6
	// done stop
}
