package httpws

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/transports/httpws/schemas"
)

// TestCumulativeTextPerTurn: events of another turn between a turn's
// tokens (a patch approval of an ended turn answered meanwhile) do not
// reset the turn's cumulative_text; quotes and control characters are
// escaped once and stay valid JSON.
func TestCumulativeTextPerTurn(t *testing.T) {
	m := newMapper()
	var last map[string]any
	for i, ev := range []engine.Event{
		{Seq: 1, TurnID: "a", Data: &engine.TokenEvent{Text: "say \"hi\"\n"}},
		{Seq: 2, TurnID: "old", Data: &engine.PatchResultEvent{SetID: "pset_1", Status: engine.PatchApplied}},
		{Seq: 3, TurnID: "a", Data: &engine.TokenEvent{Text: "<ok> é"}},
	} {
		for _, msg := range m.messages(ev) {
			data, err := encode(msg)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("event %d: invalid JSON %s", i, data)
			}
			if got["type"] == typeToken {
				last = got
			}
		}
	}
	if last["cumulative_text"] != "say \"hi\"\n<ok> é" || last["token"] != "<ok> é" || last["seq"] != 3.0 || last["turn_id"] != "a" {
		t.Errorf("last token message %v", last)
	}
	m.messages(engine.Event{Seq: 4, TurnID: "a", Data: &engine.FinalEvent{Status: engine.TurnCompleted}})
	if len(m.texts) != 0 {
		t.Errorf("texts kept after the final event: %v", m.texts)
	}
}

// TestPlanFilesInvolved: a plan step that names no file still has
// files_involved, as an empty array (the contract's shape), and the
// message matches its schema.
func TestPlanFilesInvolved(t *testing.T) {
	m := newMapper()
	msgs := m.messages(engine.Event{Seq: 1, TurnID: "a", Data: &engine.PlanEvent{Steps: []engine.PlanStep{
		{Number: 1, Description: "Summarise what I found"},
		{Number: 2, Description: "Fix Add", FilesInvolved: []string{"calc.go"}, Status: engine.StepInProgress},
	}}})
	data, err := encode(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Steps []map[string]any `json:"steps"`
	}
	json.Unmarshal(data, &got)
	if files, ok := got.Steps[0]["files_involved"].([]any); !ok || len(files) != 0 {
		t.Errorf("a step without files: %s", data)
	}
	if files, _ := got.Steps[1]["files_involved"].([]any); len(files) != 1 || got.Steps[1]["status"] != "in_progress" {
		t.Errorf("a step with a file: %s", data)
	}
	raw, err := fs.ReadFile(schemas.FS, "ws/agent.plan.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	c := jsonschema.NewCompiler()
	c.AddResource(wsBaseURL+"agent.plan.json", doc)
	schema, err := c.Compile(wsBaseURL + "agent.plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := check(schema, data); err != nil {
		t.Errorf("agent.plan breaks its schema: %v\n%s", err, data)
	}
}
