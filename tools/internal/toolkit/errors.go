package toolkit

import (
	"context"
	"errors"

	"github.com/plexus-agent/plexus/engine"
)

// CtxError is the error of a call of tool whose context ended with err:
// timeout after its deadline, cancelled otherwise.
func CtxError(tool string, err error) *engine.ToolError {
	if errors.Is(err, context.DeadlineExceeded) {
		return engine.ToolErrorf(engine.ToolCodeTimeout, "%s did not finish before its deadline", tool)
	}
	return engine.ToolErrorf(engine.ToolCodeCancelled, "%s was cancelled", tool)
}

// CallError is the *engine.ToolError a toolset's Invoke returns for err,
// the non-nil error of one call of tool: a *engine.ToolError as it is,
// CtxError when ctx has ended, otherwise code failed naming the tool.
func CallError(ctx context.Context, tool string, err error) *engine.ToolError {
	var te *engine.ToolError
	switch {
	case errors.As(err, &te):
		return te
	case ctx.Err() != nil:
		return CtxError(tool, ctx.Err())
	}
	return engine.ToolErrorf(engine.ToolCodeFailed, "%s: %v", tool, err)
}
