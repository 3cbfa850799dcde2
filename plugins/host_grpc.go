package plugins

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

// hostServer is the host side of HostService for one plugin process. It is
// served on one GRPCBroker id, started on the first call that offers
// callbacks (go-plugin's broker drops connection info the plugin does not
// pick up within 5 s, so both sides set it up on that first call), and
// routes each callback to the engine.ToolHost of the call named by call_id.
type hostServer struct {
	pb.UnimplementedHostServiceServer
	broker *plugin.GRPCBroker

	once sync.Once
	id   uint32

	mu    sync.Mutex
	calls map[string]engine.ToolHost
}

func newHostServer(b *plugin.GRPCBroker) *hostServer {
	return &hostServer{broker: b, calls: map[string]engine.ToolHost{}}
}

// serve starts the broker service once and returns its id.
func (h *hostServer) serve() uint32 {
	h.once.Do(func() {
		h.id = h.broker.NextId()
		go h.broker.AcceptAndServe(h.id, func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(opts...)
			pb.RegisterHostServiceServer(s, h)
			return s
		})
	})
	return h.id
}

func (h *hostServer) register(callID string, host engine.ToolHost) {
	h.mu.Lock()
	h.calls[callID] = host
	h.mu.Unlock()
}

func (h *hostServer) unregister(callID string) {
	h.mu.Lock()
	delete(h.calls, callID)
	h.mu.Unlock()
}

func (h *hostServer) RequestApproval(ctx context.Context, req *pb.RequestApprovalRequest) (*pb.RequestApprovalResponse, error) {
	h.mu.Lock()
	host, ok := h.calls[req.GetCallId()]
	h.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no running call %q: callbacks are only accepted while their call runs", req.GetCallId())
	}
	dec, err := host.RequestApproval(ctx, engine.ActionApproval{
		Action: req.GetAction(), Description: req.GetDescription(), Preview: req.GetPreview(),
		Risk: engine.Risk{Level: riskFromProto(req.GetRiskLevel()), Reasons: req.GetReasons(), Reversible: req.GetReversible()},
	})
	if err != nil {
		return nil, status.Error(codes.Canceled, err.Error())
	}
	return &pb.RequestApprovalResponse{Approved: dec.Approved, Reason: dec.Reason}, nil
}

// hostDialer is the plugin side: one connection to the host's HostService,
// dialed on the first call that carries a broker id.
type hostDialer struct {
	broker *plugin.GRPCBroker
	once   sync.Once
	ready  chan struct{}
	client pb.HostServiceClient
	err    error
}

func newHostDialer(b *plugin.GRPCBroker) *hostDialer {
	return &hostDialer{broker: b, ready: make(chan struct{})}
}

// dial connects in the background, once.
func (d *hostDialer) dial(id uint32) {
	d.once.Do(func() {
		go func() {
			defer close(d.ready)
			conn, err := d.broker.Dial(id)
			if err != nil {
				d.err = fmt.Errorf("connect to the host's callback service: %w", err)
				return
			}
			d.client = pb.NewHostServiceClient(conn)
		}()
	})
}

func (d *hostDialer) get(ctx context.Context) (pb.HostServiceClient, error) {
	select {
	case <-d.ready:
		return d.client, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// hostClient is the engine.ToolHost a plugin's Invoke receives.
type hostClient struct {
	dialer *hostDialer
	callID string
}

func (h *hostClient) RequestApproval(ctx context.Context, a engine.ActionApproval) (engine.ApprovalDecision, error) {
	c, err := h.dialer.get(ctx)
	if err != nil {
		return engine.ApprovalDecision{}, err
	}
	resp, err := c.RequestApproval(ctx, &pb.RequestApprovalRequest{
		CallId: h.callID, Action: a.Action, Description: a.Description, RiskLevel: riskToProto[a.Risk.Level],
		Reasons: a.Risk.Reasons, Reversible: a.Risk.Reversible, Preview: a.Preview,
	})
	if err != nil {
		return engine.ApprovalDecision{}, fmt.Errorf("request approval: %w", err)
	}
	return engine.ApprovalDecision{Approved: resp.GetApproved(), Reason: resp.GetReason()}, nil
}
