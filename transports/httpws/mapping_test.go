package httpws

import (
	"encoding/json"
	"testing"

	"github.com/plexus-agent/plexus/engine"
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
