package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
		RiskLevel: riskToProto[s.Risk], ReadOnly: s.ReadOnly, NeedsApproval: s.NeedsApproval, Kind: s.Kind,
	}
}

func specFromProto(s *pb.ToolSpec) engine.ToolSpec {
	return engine.ToolSpec{
		Name: s.GetName(), Description: s.GetDescription(), InputSchema: json.RawMessage(s.GetInputSchemaJson()),
		Risk: riskFromProto(s.GetRiskLevel()), ReadOnly: s.GetReadOnly(), NeedsApproval: s.GetNeedsApproval(), Kind: s.GetKind(),
	}
}

func editsToProto(edits []engine.FileEdit) []*pb.FileEdit {
	out := make([]*pb.FileEdit, 0, len(edits))
	for _, e := range edits {
		out = append(out, &pb.FileEdit{Path: e.Path, Base: e.Base, BaseExists: e.BaseExists, NewContent: e.New, Delete: e.Delete})
	}
	return out
}

func editsFromProto(edits []*pb.FileEdit) []engine.FileEdit {
	var out []engine.FileEdit
	for _, e := range edits {
		out = append(out, engine.FileEdit{Path: e.GetPath(), Base: e.GetBase(), BaseExists: e.GetBaseExists(), New: e.GetNewContent(), Delete: e.GetDelete()})
	}
	return out
}

func overlayToProto(o map[string]engine.OverlayFile) map[string]*pb.OverlayFile {
	if len(o) == 0 {
		return nil
	}
	out := make(map[string]*pb.OverlayFile, len(o))
	for p, f := range o {
		out[p] = &pb.OverlayFile{Content: f.Content, Deleted: f.Deleted}
	}
	return out
}

func overlayFromProto(o map[string]*pb.OverlayFile) map[string]engine.OverlayFile {
	if len(o) == 0 {
		return nil
	}
	out := make(map[string]engine.OverlayFile, len(o))
	for p, f := range o {
		out[p] = engine.OverlayFile{Content: f.GetContent(), Deleted: f.GetDeleted()}
	}
	return out
}

// The ErrorInfo detail (google.rpc.ErrorInfo) that marks a model plugin's
// FAILED_PRECONDITION as engine.ErrNotConfigured rather than
// engine.ErrUnsupported (see proto/plexus/v1/model.proto).
const (
	errorDomain         = "plexus"
	reasonNotConfigured = "NOT_CONFIGURED"
)

// hasReason reports whether st carries an ErrorInfo detail of the plexus
// domain with reason.
func hasReason(st *status.Status, reason string) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain && info.GetReason() == reason {
			return true
		}
	}
	return false
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
	if errors.Is(err, engine.ErrNotConfigured) {
		st, derr := status.New(codes.FailedPrecondition, msg).WithDetails(&errdetails.ErrorInfo{Reason: reasonNotConfigured, Domain: errorDomain})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, msg)
		}
		return st.Err()
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
	if hasReason(st, reasonNotConfigured) {
		me.Kind = engine.ErrNotConfigured
		return me
	}
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

// hostErrorCodes maps the engine errors a ToolHost returns onto the gRPC
// codes of HostService (proto/plexus/v1/host.proto), first match wins.
var hostErrorCodes = []struct {
	err  error
	code codes.Code
}{
	{engine.ErrUnsupported, codes.FailedPrecondition},
	{engine.ErrInvalidRequest, codes.InvalidArgument},
	{engine.ErrNotFound, codes.NotFound},
	{engine.ErrPermissionDenied, codes.PermissionDenied},
	{engine.ErrTimeout, codes.DeadlineExceeded},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// hostErrorToStatus maps an error of an engine.ToolHost onto a gRPC status
// whose message is err's text, verbatim.
func hostErrorToStatus(err error) error {
	for _, m := range hostErrorCodes {
		if errors.Is(err, m.err) {
			return status.Error(m.code, err.Error())
		}
	}
	if st, ok := status.FromError(err); ok {
		return status.Error(st.Code(), err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// HostError is an error a host callback (engine.ToolHost through
// HostService) returned to a plugin. Error is the host's message verbatim;
// errors.Is matches the engine sentinel of the status code:
// engine.ErrUnsupported, ErrInvalidRequest, ErrNotFound,
// ErrPermissionDenied, ErrTimeout, or context.Canceled.
type HostError struct {
	// Kind is the sentinel the error matches, nil when the host's error
	// was unclassified.
	Kind    error
	Message string
}

func (e *HostError) Error() string { return e.Message }

// Is reports whether target is e's Kind.
func (e *HostError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// hostErrorFromStatus turns the gRPC error of a HostService call back into
// the host's error: a *HostError for the codes the host sends, ctx's error
// when ctx has ended, and a wrapped transport error otherwise. A host that
// predates the RPC (Unimplemented) is reported as engine.ErrUnsupported.
func hostErrorFromStatus(ctx context.Context, rpc string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("host callback %s: %w", rpc, err)
	}
	switch st.Code() {
	case codes.Unimplemented:
		return &HostError{Kind: engine.ErrUnsupported, Message: fmt.Sprintf("the Plexus host does not offer %s (it is older than this plugin): %s", rpc, st.Message())}
	case codes.Unknown:
		return &HostError{Message: st.Message()}
	}
	for _, m := range hostErrorCodes {
		if m.code == st.Code() {
			return &HostError{Kind: m.err, Message: st.Message()}
		}
	}
	return fmt.Errorf("host callback %s: %w", rpc, err)
}

// int32Of converts a count or line number for the wire, saturating at
// the int32 range.
func int32Of(n int) int32 {
	return int32(max(math.MinInt32, min(n, math.MaxInt32)))
}

func symbolQueryToProto(callID string, q engine.SymbolQuery) *pb.SearchSymbolsRequest {
	return &pb.SearchSymbolsRequest{
		CallId: callID, Query: q.Query, Kind: q.Kind, Path: q.Path, IncludeRefs: q.IncludeRefs, Limit: int32Of(q.Limit),
	}
}

func symbolQueryFromProto(r *pb.SearchSymbolsRequest) engine.SymbolQuery {
	return engine.SymbolQuery{
		Query: r.GetQuery(), Kind: r.GetKind(), Path: r.GetPath(), IncludeRefs: r.GetIncludeRefs(), Limit: int(r.GetLimit()),
	}
}

func symbolHitsToProto(hits []engine.SymbolHit) []*pb.SymbolHit {
	out := make([]*pb.SymbolHit, len(hits))
	for i, h := range hits {
		out[i] = &pb.SymbolHit{
			Name: h.Name, Kind: h.Kind, Container: h.Container, Path: h.Path, Language: h.Language,
			StartLine: int32Of(h.StartLine), EndLine: int32Of(h.EndLine), Definition: h.Definition,
			Match: h.Match, Score: h.Score,
		}
	}
	return out
}

func symbolHitsFromProto(hits []*pb.SymbolHit) []engine.SymbolHit {
	out := make([]engine.SymbolHit, len(hits))
	for i, h := range hits {
		out[i] = engine.SymbolHit{
			Name: h.GetName(), Kind: h.GetKind(), Container: h.GetContainer(), Path: h.GetPath(), Language: h.GetLanguage(),
			StartLine: int(h.GetStartLine()), EndLine: int(h.GetEndLine()), Definition: h.GetDefinition(),
			Match: h.GetMatch(), Score: h.GetScore(),
		}
	}
	return out
}

func textQueryToProto(callID string, q engine.TextQuery) *pb.SearchTextRequest {
	return &pb.SearchTextRequest{
		CallId: callID, Pattern: q.Pattern, Regex: q.Regex, CaseInsensitive: q.CaseInsensitive, Path: q.Path,
		Include: q.Include, ContextLines: int32Of(q.ContextLines), Limit: int32Of(q.Limit),
	}
}

func textQueryFromProto(r *pb.SearchTextRequest) engine.TextQuery {
	return engine.TextQuery{
		Pattern: r.GetPattern(), Regex: r.GetRegex(), CaseInsensitive: r.GetCaseInsensitive(), Path: r.GetPath(),
		Include: r.GetInclude(), ContextLines: int(r.GetContextLines()), Limit: int(r.GetLimit()),
	}
}

func textMatchToProto(m engine.TextMatch) *pb.TextMatch {
	return &pb.TextMatch{
		Path: m.Path, Line: int32Of(m.Line), Column: int32Of(m.Column), Text: m.Text, Before: m.Before, After: m.After,
	}
}

func textMatchFromProto(m *pb.TextMatch) engine.TextMatch {
	return engine.TextMatch{
		Path: m.GetPath(), Line: int(m.GetLine()), Column: int(m.GetColumn()), Text: m.GetText(),
		Before: m.GetBefore(), After: m.GetAfter(),
	}
}

// sameMatches reports whether two lists hold the same matches in the same
// order.
func sameMatches(a, b []engine.TextMatch) bool {
	return slices.EqualFunc(a, b, func(x, y engine.TextMatch) bool {
		return x.Path == y.Path && x.Line == y.Line && x.Column == y.Column && x.Text == y.Text &&
			slices.Equal(x.Before, y.Before) && slices.Equal(x.After, y.After)
	})
}

func chunkHitsToProto(hits []engine.ChunkHit) []*pb.ChunkHit {
	out := make([]*pb.ChunkHit, len(hits))
	for i, h := range hits {
		out[i] = &pb.ChunkHit{
			Path: h.Path, StartLine: int32Of(h.StartLine), EndLine: int32Of(h.EndLine), Language: h.Language,
			Kind: h.Kind, Name: h.Name, Score: h.Score, Text: h.Text,
		}
	}
	return out
}

func chunkHitsFromProto(hits []*pb.ChunkHit) []engine.ChunkHit {
	out := make([]engine.ChunkHit, len(hits))
	for i, h := range hits {
		out[i] = engine.ChunkHit{
			Path: h.GetPath(), StartLine: int(h.GetStartLine()), EndLine: int(h.GetEndLine()), Language: h.GetLanguage(),
			Kind: h.GetKind(), Name: h.GetName(), Score: h.GetScore(), Text: h.GetText(),
		}
	}
	return out
}
