package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/plexus-agent/plexus/plugins"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

// serveOldSDK serves a tool plugin as one built with an SDK from before
// ToolService.Calls: Describe and Invoke only (Calls answers
// Unimplemented). Its one tool, "stream", returns the gRPC method its call
// arrived on.
func serveOldSDK() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  plugins.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{plugins.ProtocolVersion: {plugins.KindTool: oldSDKPlugin{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}

type oldSDKPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (oldSDKPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterToolServiceServer(s, oldSDKServer{})
	return nil
}

func (oldSDKPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin side only")
}

type oldSDKServer struct {
	pb.UnimplementedToolServiceServer
}

func (oldSDKServer) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return &pb.DescribeResponse{Tools: []*pb.ToolSpec{{Name: "stream", Description: "the gRPC method of the call",
		InputSchemaJson: `{"type":"object"}`, RiskLevel: pb.RiskLevel_RISK_LEVEL_LOW, ReadOnly: true}}}, nil
}

func (oldSDKServer) Invoke(_ *pb.InvokeRequest, stream grpc.ServerStreamingServer[pb.InvokeResponse]) error {
	method, _ := grpc.Method(stream.Context())
	b, _ := json.Marshal(map[string]string{"method": method})
	return stream.Send(&pb.InvokeResponse{Event: &pb.InvokeResponse_Result{Result: &pb.ToolResult{ResultJson: string(b)}}})
}
