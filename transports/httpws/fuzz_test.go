package httpws

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// FuzzDecodeClient feeds arbitrary bytes to the client message decoder:
// it must never panic, must refuse with a *badMessage, and whatever it
// accepts must be one of the wire types with the type it claims.
func FuzzDecodeClient(f *testing.F) {
	for _, s := range []string{
		`{"type":"client.hello","client_info":{"name":"vscode-extension","version":"0.1.0","capabilities":["diff_preview"]}}`,
		`{"type":"client.user_message","message":"Fix it","context":{"command":"/fix","diagnostics":[{"file_path":"a.ts","severity":"error","message":"m","line":1,"character":2}]}}`,
		`{"type":"client.approval_response","request_id":"apr_1","approved":true,"scope":"hunk","file_path":"a","hunks":[0]}`,
		`{"type":"client.patch_apply_result","patch_id":"patch_1","file_path":"a","success":false,"error":{"message":"x","type":"conflict"}}`,
		`{"type":"client.command_result","command_id":"cmd_1","exit_code":1,"stdout":"","stderr":"","duration_ms":3}`,
		`{"type":"client.cancel","reason":"user_cancelled"}`,
		`{"type":"client.file_changes","changes":[{"type":"deleted","file_path":"x"}]}`,
		`{"type":"client.context_update","updates":{"terminal_output":{"command":"go test","exit_code":1}}}`,
		`{"type":1}`, `[]`, `null`, `{"type":"client.user_message","message":"` + "\xff" + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeClient(data)
		if err != nil {
			var bad *badMessage
			if !errors.As(err, &bad) || bad.msg == "" {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		var env envelope
		if json.Unmarshal(data, &env) != nil {
			t.Fatalf("accepted %q, which is not JSON", data)
		}
		want := map[string]string{
			"*httpws.clientHello": typeClientHello, "*httpws.userMessage": typeUserMessage, "*httpws.contextUpdate": typeContextUpdate,
			"*httpws.approvalResponse": typeApprovalResponse, "*httpws.patchApplyResult": typePatchApplyResult,
			"*httpws.commandResult": typeCommandResult, "*httpws.cancel": typeCancel, "*httpws.fileChanges": typeFileChanges,
		}[fmt.Sprintf("%T", m)]
		if want != env.Type {
			t.Fatalf("%q decoded as %s", data, fmt.Sprintf("%T", m))
		}
		if um, ok := m.(*userMessage); ok && um.Message == "" {
			t.Fatalf("accepted an empty user message: %q", data)
		}
	})
}
