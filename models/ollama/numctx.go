package ollama

import (
	"encoding/json"

	"github.com/ollama/ollama/api"
)

// The automatic context size (see the package doc).
const (
	// bytesPerToken estimates prompt tokens from bytes. English prose is
	// about 4 characters per token on GPT-style tokenizers (OpenAI, "What
	// are tokens and how to count them"); code and JSON, which fill an
	// agent's prompts, split finer. Estimating low truncates the prompt
	// silently (Ollama drops the oldest messages), estimating high only
	// costs memory, so the estimate errs high.
	bytesPerToken = 3
	// replyAllowance is the room left for the reply when MaxTokens is 0.
	replyAllowance = 1024
	// numCtxFloor is the smallest automatic num_ctx: Ollama 0.6.5's own
	// default (OLLAMA_CONTEXT_LENGTH, 2048) is too small for an agent's
	// system prompt and tool schemas. It was the --num-ctx default of
	// plexus before num_ctx became automatic.
	numCtxFloor = 8192
)

// promptBytes is the size of what a request puts in the prompt: its
// messages and tool definitions as JSON (the keys and quotes stand in for
// the template's role markers).
func promptBytes(creq *api.ChatRequest) int {
	n := 0
	if b, err := json.Marshal(creq.Messages); err == nil {
		n += len(b)
	}
	if len(creq.Tools) > 0 {
		if b, err := json.Marshal(creq.Tools); err == nil {
			n += len(b)
		}
	}
	return n
}

// autoNumCtx returns the context size for a prompt of promptBytes bytes
// and a reply of up to maxTokens tokens (0: replyAllowance): the token
// estimate rounded up to a power of two, at least the model's own num_ctx
// parameter or else numCtxFloor, and at most its trained context length
// when that is known. Powers of two keep the number of distinct sizes, and
// so of model reloads, small as a conversation grows.
func autoNumCtx(promptBytes, maxTokens int, f modelFacts) int {
	reply := maxTokens
	if reply <= 0 {
		reply = replyAllowance
	}
	need := (promptBytes+bytesPerToken-1)/bytesPerToken + reply
	floor := numCtxFloor
	if f.numCtxParam > 0 {
		floor = f.numCtxParam
	}
	n := floor
	for n < need {
		n *= 2
	}
	if f.contextLength > 0 {
		n = min(n, f.contextLength)
	}
	return n
}

// setNumCtx sets creq's num_ctx: numCtx (the caller's NumCtx) capped at
// the model's context length, or when numCtx is 0 the automatic size,
// never smaller than an automatic size sent for the model before.
func (p *Provider) setNumCtx(creq *api.ChatRequest, key factsKey, numCtx, maxTokens int, f modelFacts) {
	var n int
	switch {
	case numCtx > 0 && f.contextLength > 0:
		n = min(numCtx, f.contextLength)
	case numCtx > 0:
		n = numCtx
	default:
		n = p.facts.ratchet(key, autoNumCtx(promptBytes(creq), maxTokens, f), f.contextLength)
	}
	if creq.Options == nil {
		creq.Options = map[string]any{}
	}
	creq.Options["num_ctx"] = n
}
