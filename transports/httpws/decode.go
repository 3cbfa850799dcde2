package httpws

import (
	"encoding/json"
	"errors"
	"fmt"
)

// badMessage is a client message the server refuses, as server.error
// INVALID_MESSAGE reports it.
type badMessage struct {
	msg     string
	details map[string]any
}

func (b *badMessage) Error() string { return b.msg }

// decodeClient validates one client message against its schema
// (schemas/ws/<type>.json) and decodes it into its wire type: one of
// clientHello, userMessage, contextUpdate, approvalResponse,
// patchApplyResult, commandResult, cancel, fileChanges. Errors: a
// *badMessage naming the type and, for a schema violation, the member
// (details.field, a JSON pointer).
func decodeClient(data []byte) (any, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, &badMessage{msg: "the message is not a JSON object with a \"type\": " + err.Error()}
	}
	schema, ok := compiled().ws[env.Type]
	if !ok {
		return nil, &badMessage{msg: fmt.Sprintf("unknown message type %q; the client types are %v", env.Type, clientTypes),
			details: map[string]any{"type": env.Type}}
	}
	if err := check(schema, data); err != nil {
		field := ""
		var bad *invalid
		if errors.As(err, &bad) {
			field = bad.Field
		}
		return nil, &badMessage{msg: fmt.Sprintf("%s: %v", env.Type, err), details: map[string]any{"type": env.Type, "field": field}}
	}
	var m any
	switch env.Type {
	case typeClientHello:
		m = new(clientHello)
	case typeUserMessage:
		m = new(userMessage)
	case typeContextUpdate:
		m = new(contextUpdate)
	case typeApprovalResponse:
		m = new(approvalResponse)
	case typePatchApplyResult:
		m = new(patchApplyResult)
	case typeCommandResult:
		m = new(commandResult)
	case typeCancel:
		m = new(cancel)
	case typeFileChanges:
		m = new(fileChanges)
	}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, &badMessage{msg: fmt.Sprintf("%s: %v", env.Type, err), details: map[string]any{"type": env.Type}}
	}
	return m, nil
}
