package replay

import (
	"unicode"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
)

// maxPieceBytes caps one streamed piece, so long words and long runs of
// spaces still stream in several pieces.
const maxPieceBytes = 16

// splitPieces cuts text into word-ish pieces for streaming: each piece is
// a run of whitespace followed by a run of non-whitespace (a word and the
// space before it), at most maxPieceBytes long unless one rune is longer.
// Joining the pieces gives text back exactly.
func splitPieces(text string) []string {
	var pieces []string
	for len(text) > 0 {
		i := 0
		for i < len(text) {
			r, n := utf8.DecodeRuneInString(text[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		for i < len(text) {
			r, n := utf8.DecodeRuneInString(text[i:])
			if unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i > maxPieceBytes {
			i = maxPieceBytes
			for i > 0 && !utf8.RuneStart(text[i]) {
				i--
			}
			if i == 0 {
				_, i = utf8.DecodeRuneInString(text)
			}
		}
		pieces = append(pieces, text[:i])
		text = text[i:]
	}
	return pieces
}

// charsPerToken is the rule of thumb behind estimated usage.
const charsPerToken = 4

// estimateTokens is len(s) bytes / charsPerToken, rounded up.
func estimateTokens(n int) int64 {
	return int64((n + charsPerToken - 1) / charsPerToken)
}

// estimateUsage estimates a reply's usage: the prompt is every message's
// content and tool call arguments, the completion the reply's text and
// tool call names and arguments.
func estimateUsage(msgs []engine.Message, text string, calls []engine.ToolCall) engine.Usage {
	prompt := 0
	for _, m := range msgs {
		prompt += len(m.Content)
		for _, c := range m.ToolCalls {
			prompt += len(c.Name) + len(c.Args)
		}
	}
	completion := len(text)
	for _, c := range calls {
		completion += len(c.Name) + len(c.Args)
	}
	return engine.Usage{PromptTokens: estimateTokens(prompt), CompletionTokens: estimateTokens(completion)}
}
