package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/plexus-agent/plexus/engine"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

// ToolPlugin is the go-plugin Plugin of the "tool" kind. Plugins set Impl;
// hosts leave it nil.
type ToolPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl engine.Toolset
}

// GRPCServer registers the plugin side of ToolService.
func (p *ToolPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterToolServiceServer(s, &toolServer{impl: p.Impl, host: newHostDialer(broker)})
	return nil
}

// GRPCClient returns the host side: a *toolClient, an engine.Toolset.
func (p *ToolPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	client := pb.NewToolServiceClient(c)
	return &toolClient{client: client, callbacks: newHostServer(broker), calls: &callsPool{client: client}}, nil
}

// toolClient is engine.Toolset over one tool plugin process.
type toolClient struct {
	client    pb.ToolServiceClient
	callbacks *hostServer
	calls     *callsPool
}

var _ engine.Toolset = (*toolClient)(nil)

func (c *toolClient) Tools(ctx context.Context) ([]engine.ToolSpec, error) {
	resp, err := c.client.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	specs := make([]engine.ToolSpec, 0, len(resp.GetTools()))
	for _, s := range resp.GetTools() {
		specs = append(specs, specFromProto(s))
	}
	return specs, nil
}

// Invoke runs one call: on the plugin's Calls stream when it serves one
// (see calls.go), else on a stream of its own (Invoke). Transport failures
// are returned as the gRPC error they are; the supervisor decides whether
// the process died.
func (c *toolClient) Invoke(ctx context.Context, req engine.InvokeRequest, onUpdate func(engine.ToolUpdate)) (engine.ToolResult, error) {
	preq := &pb.InvokeRequest{
		CallId: req.CallID, ToolName: req.Tool, InputJson: jsonOrEmpty(req.Args), WorkspaceRoot: req.WorkspaceRoot,
		Overlay: overlayToProto(req.Overlay), Settings: req.Settings,
	}
	if req.Host != nil {
		preq.HostBrokerId = c.callbacks.serve()
		c.callbacks.register(req.CallID, req.Host)
		defer c.callbacks.unregister(req.CallID)
	}
	cs, err := c.calls.get(ctx)
	if err != nil {
		return engine.ToolResult{}, err
	}
	if cs != nil {
		res, err, reusable := cs.invoke(ctx, preq, onUpdate)
		if reusable {
			c.calls.put(cs)
		}
		return res, err
	}
	stream, err := c.client.Invoke(ctx, preq)
	if err != nil {
		return engine.ToolResult{}, err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "tool plugin ended %s without a result", req.Tool)
		}
		if err != nil {
			return engine.ToolResult{}, err
		}
		if res, err, done := invokeEvent(msg, onUpdate); done {
			return res, err
		}
	}
}

// invokeEvent handles one event of a call: progress and output go to
// onUpdate; a result or an error ends the call (done).
func invokeEvent(msg *pb.InvokeResponse, onUpdate func(engine.ToolUpdate)) (res engine.ToolResult, err error, done bool) {
	switch ev := msg.GetEvent().(type) {
	case *pb.InvokeResponse_Progress:
		p := &engine.ToolProgress{Message: ev.Progress.GetMessage()}
		if ev.Progress.Percentage != nil {
			v := ev.Progress.GetPercentage()
			p.Percentage = &v
		}
		onUpdate(engine.ToolUpdate{Progress: p})
	case *pb.InvokeResponse_Output:
		onUpdate(engine.ToolUpdate{Output: &engine.ToolOutput{Stream: ev.Output.GetStream(), Text: ev.Output.GetText()}})
	case *pb.InvokeResponse_Result:
		return engine.ToolResult{Content: json.RawMessage(ev.Result.GetResultJson()), Summary: ev.Result.GetSummary(),
			Edits: editsFromProto(ev.Result.GetEdits())}, nil, true
	case *pb.InvokeResponse_Error:
		return engine.ToolResult{}, &engine.ToolError{Code: toolCodeFromProto(ev.Error.GetCode()), Message: ev.Error.GetMessage()}, true
	}
	return engine.ToolResult{}, nil, false
}

// toolServer is ToolService over a plugin's engine.Toolset.
type toolServer struct {
	pb.UnimplementedToolServiceServer
	impl engine.Toolset
	host *hostDialer
}

func (s *toolServer) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	specs, err := s.impl.Tools(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.DescribeResponse{}
	for _, sp := range specs {
		resp.Tools = append(resp.Tools, specToProto(sp))
	}
	return resp, nil
}

func (s *toolServer) Invoke(req *pb.InvokeRequest, stream grpc.ServerStreamingServer[pb.InvokeResponse]) error {
	var mu sync.Mutex // Send is not safe for concurrent use
	s.run(stream.Context(), req, func(r *pb.InvokeResponse) {
		mu.Lock()
		defer mu.Unlock()
		_ = stream.Send(r) // a failed send means the host is gone; ctx ends the call
	})
	return nil
}

// run runs one call of impl and sends its events: any progress and
// output, then exactly one result or error. send may be called from the
// tool's goroutines.
func (s *toolServer) run(ctx context.Context, req *pb.InvokeRequest, send func(*pb.InvokeResponse)) {
	ereq := engine.InvokeRequest{
		CallID: req.GetCallId(), Tool: req.GetToolName(), Args: json.RawMessage(req.GetInputJson()),
		WorkspaceRoot: req.GetWorkspaceRoot(), Overlay: overlayFromProto(req.GetOverlay()), Settings: req.GetSettings(),
	}
	if id := req.GetHostBrokerId(); id != 0 {
		s.host.dial(id)
		ereq.Host = &hostClient{dialer: s.host, callID: req.GetCallId()}
	}
	res, err := s.impl.Invoke(ctx, ereq, func(u engine.ToolUpdate) {
		switch {
		case u.Progress != nil:
			send(&pb.InvokeResponse{Event: &pb.InvokeResponse_Progress{Progress: &pb.ToolProgress{
				Message: u.Progress.Message, Percentage: u.Progress.Percentage}}})
		case u.Output != nil:
			send(&pb.InvokeResponse{Event: &pb.InvokeResponse_Output{Output: &pb.ToolOutput{
				Stream: u.Output.Stream, Text: u.Output.Text}}})
		}
	})
	if err != nil {
		send(&pb.InvokeResponse{Event: &pb.InvokeResponse_Error{Error: toolErrorToProto(ctx, err)}})
		return
	}
	content := res.Content
	if len(content) == 0 {
		content = json.RawMessage("null")
	}
	send(&pb.InvokeResponse{Event: &pb.InvokeResponse_Result{Result: &pb.ToolResult{
		ResultJson: string(content), Summary: res.Summary, Edits: editsToProto(res.Edits)}}})
}
