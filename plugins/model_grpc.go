package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

// Configurer is implemented by model plugins that take settings (a base
// URL, an API key). The host calls Configure after every start of the
// plugin process, before any other call. Settings keys are the provider's
// own (see each models/* package).
type Configurer interface {
	Configure(ctx context.Context, settings map[string]string) error
}

// ModelPlugin is the go-plugin Plugin of the "model" kind. Plugins set
// Impl; hosts leave it nil.
type ModelPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl engine.Model
}

// GRPCServer registers the plugin side of ModelService.
func (p *ModelPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterModelServiceServer(s, &modelServer{impl: p.Impl})
	return nil
}

// GRPCClient returns the host side: a *modelClient.
func (p *ModelPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &modelClient{client: pb.NewModelServiceClient(c)}, nil
}

// modelClient is engine.Model (and Configurer) over one model plugin
// process. It returns gRPC errors as they are; the supervisor classifies
// them.
type modelClient struct {
	client pb.ModelServiceClient
}

func (c *modelClient) Configure(ctx context.Context, settings map[string]string) error {
	_, err := c.client.Configure(ctx, &pb.ConfigureRequest{Settings: settings})
	return err
}

func (c *modelClient) ListModels(ctx context.Context) ([]engine.ModelInfo, error) {
	resp, err := c.client.ListModels(ctx, &pb.ListModelsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]engine.ModelInfo, 0, len(resp.GetModels()))
	for _, m := range resp.GetModels() {
		out = append(out, engine.ModelInfo{
			Name: m.GetName(), Capabilities: m.GetCapabilities(), ContextLength: m.GetContextLength(),
			Family: m.GetFamily(), ParameterSize: m.GetParameterSize(), SizeBytes: m.GetSizeBytes(), Loaded: m.GetLoaded(),
		})
	}
	return out, nil
}

func (c *modelClient) Chat(ctx context.Context, req engine.ChatRequest, onChunk func(engine.ChatChunk) error) error {
	stream, err := c.client.Chat(ctx, chatRequestToProto(req))
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var chunk engine.ChatChunk
		switch ev := msg.GetEvent().(type) {
		case *pb.ChatResponse_Delta:
			chunk.Text = ev.Delta.GetText()
		case *pb.ChatResponse_ToolCall:
			tc := toolCallFromProto(ev.ToolCall)
			chunk.ToolCall = &tc
		case *pb.ChatResponse_Usage:
			chunk.Usage = &engine.Usage{PromptTokens: ev.Usage.GetPromptTokens(), CompletionTokens: ev.Usage.GetCompletionTokens()}
		case *pb.ChatResponse_Done:
			chunk.DoneReason = ev.Done.GetDoneReason()
		default:
			continue
		}
		if err := onChunk(chunk); err != nil {
			return err
		}
	}
}

func (c *modelClient) Embed(ctx context.Context, req engine.EmbedRequest) (engine.EmbedResponse, error) {
	resp, err := c.client.Embed(ctx, &pb.EmbedRequest{Model: req.Model, Inputs: req.Inputs})
	if err != nil {
		return engine.EmbedResponse{}, err
	}
	out := engine.EmbedResponse{PromptTokens: resp.GetPromptTokens(), Vectors: make([][]float32, 0, len(resp.GetEmbeddings()))}
	for _, e := range resp.GetEmbeddings() {
		out.Vectors = append(out.Vectors, e.GetValues())
	}
	return out, nil
}

// modelServer is ModelService over a plugin's engine.Model.
type modelServer struct {
	pb.UnimplementedModelServiceServer
	impl engine.Model
}

func (s *modelServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	c, ok := s.impl.(Configurer)
	if !ok {
		return &pb.ConfigureResponse{}, nil
	}
	if err := c.Configure(ctx, req.GetSettings()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.ConfigureResponse{}, nil
}

func (s *modelServer) ListModels(ctx context.Context, _ *pb.ListModelsRequest) (*pb.ListModelsResponse, error) {
	models, err := s.impl.ListModels(ctx)
	if err != nil {
		return nil, modelErrorToStatus(err)
	}
	resp := &pb.ListModelsResponse{}
	for _, m := range models {
		resp.Models = append(resp.Models, &pb.ModelInfo{
			Name: m.Name, Capabilities: m.Capabilities, ContextLength: m.ContextLength, Family: m.Family,
			ParameterSize: m.ParameterSize, SizeBytes: m.SizeBytes, Loaded: m.Loaded,
		})
	}
	return resp, nil
}

func (s *modelServer) Chat(req *pb.ChatRequest, stream grpc.ServerStreamingServer[pb.ChatResponse]) error {
	err := s.impl.Chat(stream.Context(), chatRequestFromProto(req), func(c engine.ChatChunk) error {
		var resp *pb.ChatResponse
		switch {
		case c.Text != "":
			resp = &pb.ChatResponse{Event: &pb.ChatResponse_Delta{Delta: &pb.TextDelta{Text: c.Text}}}
		case c.ToolCall != nil:
			resp = &pb.ChatResponse{Event: &pb.ChatResponse_ToolCall{ToolCall: toolCallToProto(*c.ToolCall)}}
		case c.Usage != nil:
			resp = &pb.ChatResponse{Event: &pb.ChatResponse_Usage{Usage: &pb.Usage{
				PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}}}
		case c.DoneReason != "":
			resp = &pb.ChatResponse{Event: &pb.ChatResponse_Done{Done: &pb.ChatDone{DoneReason: c.DoneReason}}}
		default:
			return nil
		}
		return stream.Send(resp)
	})
	return modelErrorToStatus(err)
}

func (s *modelServer) Embed(ctx context.Context, req *pb.EmbedRequest) (*pb.EmbedResponse, error) {
	res, err := s.impl.Embed(ctx, engine.EmbedRequest{Model: req.GetModel(), Inputs: req.GetInputs()})
	if err != nil {
		return nil, modelErrorToStatus(err)
	}
	resp := &pb.EmbedResponse{PromptTokens: res.PromptTokens}
	for _, v := range res.Vectors {
		resp.Embeddings = append(resp.Embeddings, &pb.Embedding{Values: v})
	}
	return resp, nil
}

func toolCallToProto(c engine.ToolCall) *pb.ToolCall {
	return &pb.ToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: jsonOrEmpty(c.Args)}
}

func toolCallFromProto(c *pb.ToolCall) engine.ToolCall {
	return engine.ToolCall{ID: c.GetId(), Name: c.GetName(), Args: json.RawMessage(c.GetArgumentsJson())}
}

func chatRequestToProto(r engine.ChatRequest) *pb.ChatRequest {
	out := &pb.ChatRequest{Model: r.Model, Options: &pb.ChatOptions{
		Temperature: r.Options.Temperature, TopP: r.Options.TopP, Seed: r.Options.Seed, Stop: r.Options.Stop,
		FormatJson: string(r.Options.Format),
	}}
	if r.Options.MaxTokens > 0 {
		v := int32(r.Options.MaxTokens)
		out.Options.MaxTokens = &v
	}
	if r.Options.NumCtx > 0 {
		v := int32(r.Options.NumCtx)
		out.Options.NumCtx = &v
	}
	if r.Options.KeepAlive != 0 {
		v := r.Options.KeepAlive.String()
		out.Options.KeepAlive = &v
	}
	for _, m := range r.Messages {
		pm := &pb.ChatMessage{Role: string(m.Role), Content: m.Content, ToolCallId: m.ToolCallID, ToolName: m.ToolName}
		for _, c := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, toolCallToProto(c))
		}
		out.Messages = append(out.Messages, pm)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, &pb.ToolDefinition{Name: t.Name, Description: t.Description, InputSchemaJson: string(t.InputSchema)})
	}
	return out
}

func chatRequestFromProto(r *pb.ChatRequest) engine.ChatRequest {
	o := r.GetOptions()
	out := engine.ChatRequest{Model: r.GetModel(), Options: engine.ChatOptions{
		Temperature: o.Temperature, TopP: o.TopP, Seed: o.Seed, Stop: o.GetStop(),
		MaxTokens: int(o.GetMaxTokens()), NumCtx: int(o.GetNumCtx()),
	}}
	if f := o.GetFormatJson(); f != "" {
		out.Options.Format = json.RawMessage(f)
	}
	if ka := o.GetKeepAlive(); ka != "" {
		if d, err := time.ParseDuration(ka); err == nil {
			out.Options.KeepAlive = d
		}
	}
	for _, m := range r.GetMessages() {
		em := engine.Message{Role: engine.Role(m.GetRole()), Content: m.GetContent(), ToolCallID: m.GetToolCallId(), ToolName: m.GetToolName()}
		for _, c := range m.GetToolCalls() {
			em.ToolCalls = append(em.ToolCalls, toolCallFromProto(c))
		}
		out.Messages = append(out.Messages, em)
	}
	for _, t := range r.GetTools() {
		out.Tools = append(out.Tools, engine.ToolSpec{Name: t.GetName(), Description: t.GetDescription(), InputSchema: json.RawMessage(t.GetInputSchemaJson())})
	}
	return out
}
