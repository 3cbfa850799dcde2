package plugins

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

var riskToProto = map[engine.RiskLevel]pb.RiskLevel{
	engine.RiskLow:      pb.RiskLevel_RISK_LEVEL_LOW,
	engine.RiskMedium:   pb.RiskLevel_RISK_LEVEL_MEDIUM,
	engine.RiskHigh:     pb.RiskLevel_RISK_LEVEL_HIGH,
	engine.RiskCritical: pb.RiskLevel_RISK_LEVEL_CRITICAL,
}

func riskFromProto(r pb.RiskLevel) engine.RiskLevel {
	for k, v := range riskToProto {
		if v == r {
			return k
		}
	}
	return ""
}

var toolCodeToProto = map[engine.ToolErrorCode]pb.ToolErrorCode{
	engine.ToolCodeInvalidInput:     pb.ToolErrorCode_TOOL_ERROR_CODE_INVALID_INPUT,
	engine.ToolCodeNotFound:         pb.ToolErrorCode_TOOL_ERROR_CODE_NOT_FOUND,
	engine.ToolCodePermissionDenied: pb.ToolErrorCode_TOOL_ERROR_CODE_PERMISSION_DENIED,
	engine.ToolCodeTimeout:          pb.ToolErrorCode_TOOL_ERROR_CODE_TIMEOUT,
	engine.ToolCodeCancelled:        pb.ToolErrorCode_TOOL_ERROR_CODE_CANCELLED,
	engine.ToolCodeFailed:           pb.ToolErrorCode_TOOL_ERROR_CODE_FAILED,
	engine.ToolCodeUnknownTool:      pb.ToolErrorCode_TOOL_ERROR_CODE_UNKNOWN_TOOL,
}

func toolCodeFromProto(c pb.ToolErrorCode) engine.ToolErrorCode {
	for k, v := range toolCodeToProto {
		if v == c {
			return k
		}
	}
	return engine.ToolCodeFailed
}

// toolErrorToProto classifies an error returned by a tool implementation.
func toolErrorToProto(ctx context.Context, err error) *pb.ToolError {
	var te *engine.ToolError
	switch {
	case errors.As(err, &te):
		code, ok := toolCodeToProto[te.Code]
		if !ok {
			code = pb.ToolErrorCode_TOOL_ERROR_CODE_FAILED
		}
		return &pb.ToolError{Code: code, Message: te.Message}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_TIMEOUT, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_CANCELLED, Message: err.Error()}
	case errors.Is(err, engine.ErrPermissionDenied):
		return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_PERMISSION_DENIED, Message: err.Error()}
	case errors.Is(err, engine.ErrNotFound):
		return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_NOT_FOUND, Message: err.Error()}
	case errors.Is(err, engine.ErrInvalidRequest):
		return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_INVALID_INPUT, Message: err.Error()}
	}
	return &pb.ToolError{Code: pb.ToolErrorCode_TOOL_ERROR_CODE_FAILED, Message: err.Error()}
}

func specToProto(s engine.ToolSpec) *pb.ToolSpec {
	return &pb.ToolSpec{
		Name: s.Name, Description: s.Description, InputSchemaJson: string(s.InputSchema),
		RiskLevel: riskToProto[s.Risk], ReadOnly: s.ReadOnly, NeedsApproval: s.NeedsApproval,
	}
}

func specFromProto(s *pb.ToolSpec) engine.ToolSpec {
	return engine.ToolSpec{
		Name: s.GetName(), Description: s.GetDescription(), InputSchema: json.RawMessage(s.GetInputSchemaJson()),
		Risk: riskFromProto(s.GetRiskLevel()), ReadOnly: s.GetReadOnly(), NeedsApproval: s.GetNeedsApproval(),
	}
}

// modelErrorToStatus maps a model implementation's error onto a gRPC status
// whose message is the provider's own words.
func modelErrorToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	msg := err.Error()
	var me *engine.ModelError
	if errors.As(err, &me) {
		msg = me.Message
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, engine.ErrModelNotFound):
		code = codes.NotFound
	case errors.Is(err, engine.ErrUnsupported):
		code = codes.FailedPrecondition
	case errors.Is(err, engine.ErrModelUnavailable):
		code = codes.Unavailable
	case errors.Is(err, engine.ErrInvalidRequest):
		code = codes.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, msg)
}

// modelErrorFromStatus turns a model plugin's gRPC status back into an
// engine error. ctx errors are returned as they are.
func modelErrorFromStatus(ctx context.Context, provider string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, ok := status.FromError(err)
	if !ok {
		return &engine.ModelError{Provider: provider, Message: err.Error()}
	}
	me := &engine.ModelError{Provider: provider, Message: st.Message()}
	switch st.Code() {
	case codes.NotFound:
		me.Kind = engine.ErrModelNotFound
	case codes.FailedPrecondition:
		me.Kind = engine.ErrUnsupported
	case codes.Unavailable:
		me.Kind = engine.ErrModelUnavailable
	case codes.InvalidArgument:
		me.Kind = engine.ErrInvalidRequest
	case codes.DeadlineExceeded:
		me.Kind = engine.ErrTimeout
	}
	return me
}

func jsonOrEmpty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}
