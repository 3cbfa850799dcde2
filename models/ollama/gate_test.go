package ollama

import (
	"testing"
)

func TestGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		want   []string // forwarded after each piece
		held   string   // left at the end
	}{
		{"plain text streams", []string{"Hel", "lo ", "world"}, []string{"Hel", "lo ", "world"}, ""},
		{"leading space waits for a decision", []string{"  ", "Hi"}, []string{"", "  Hi"}, ""},
		{"object is held", []string{"{\"na", "me\":1}"}, []string{"", ""}, `{"name":1}`},
		{"array of objects is held", []string{"[", " {"}, []string{"", ""}, "[ {"},
		{"markdown link streams", []string{"[", "docs]"}, []string{"", "[docs]"}, ""},
		{"json fence is held", []string{"``", "`js", "on\n{"}, []string{"", "", ""}, "```json\n{"},
		{"go fence streams", []string{"```g", "o\nx"}, []string{"```g", "o\nx"}, ""},
		{"marker at the start", []string{"<tool", "_call>{"}, []string{"", ""}, "<tool_call>{"},
		{"marker after text", []string{"Sure. <tool", "_call>{\"a\""}, []string{"Sure. ", ""}, "<tool_call>{\"a\""},
		{"partial marker released", []string{"a <func", "tional b"}, []string{"a ", "<functional b"}, ""},
		{"mistral marker", []string{"[TOOL_", "CALLS][{"}, []string{"", ""}, "[TOOL_CALLS][{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gate{hold: true}
			for i, p := range tc.pieces {
				if got := g.push(p); got != tc.want[i] {
					t.Errorf("push %q = %q, want %q", p, got, tc.want[i])
				}
			}
			if got := g.flush(); got != tc.held {
				t.Errorf("held %q, want %q", got, tc.held)
			}
		})
	}
	g := gate{}
	if got := g.push("{"); got != "{" {
		t.Errorf("without tools, push = %q, want it forwarded", got)
	}
}
