package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// lookup returns the ToolHost of the running call callID; an unknown call
// is a NotFound status.
func (h *hostServer) lookup(callID string) (engine.ToolHost, error) {
	h.mu.Lock()
	host, ok := h.calls[callID]
	h.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no running call %q: callbacks are only accepted while their call runs", callID)
	}
	return host, nil
}

func (h *hostServer) RequestApproval(ctx context.Context, req *pb.RequestApprovalRequest) (*pb.RequestApprovalResponse, error) {
	host, err := h.lookup(req.GetCallId())
	if err != nil {
		return nil, err
	}
	dec, err := host.RequestApproval(ctx, engine.ActionApproval{
		Action: req.GetAction(), Description: req.GetDescription(), Preview: req.GetPreview(),
		Risk: engine.Risk{Level: riskFromProto(req.GetRiskLevel()), Reasons: req.GetReasons(), Reversible: req.GetReversible()},
	})
	if err != nil {
		return nil, hostErrorToStatus(err)
	}
	return &pb.RequestApprovalResponse{Approved: dec.Approved, Reason: dec.Reason}, nil
}

func (h *hostServer) SearchSymbols(ctx context.Context, req *pb.SearchSymbolsRequest) (*pb.SearchSymbolsResponse, error) {
	host, err := h.lookup(req.GetCallId())
	if err != nil {
		return nil, err
	}
	hits, err := host.SearchSymbols(ctx, symbolQueryFromProto(req))
	if err != nil {
		return nil, hostErrorToStatus(err)
	}
	return &pb.SearchSymbolsResponse{Symbols: symbolHitsToProto(hits)}, nil
}

// SearchText sends each match as the host's search reports it, then the
// summary. When the search's final list is not the streamed one, the
// summary carries the final list.
func (h *hostServer) SearchText(req *pb.SearchTextRequest, stream grpc.ServerStreamingServer[pb.SearchTextResponse]) error {
	host, err := h.lookup(req.GetCallId())
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex // onMatch may be called from several goroutines; Send is not safe for that
		streamed []engine.TextMatch
		sendErr  error
	)
	res, err := host.SearchText(stream.Context(), textQueryFromProto(req), func(m engine.TextMatch) {
		mu.Lock()
		defer mu.Unlock()
		streamed = append(streamed, m)
		if sendErr == nil {
			sendErr = stream.Send(&pb.SearchTextResponse{Event: &pb.SearchTextResponse_Match{Match: textMatchToProto(m)}})
		}
	})
	if err != nil {
		return hostErrorToStatus(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sendErr != nil {
		return sendErr // the plugin has gone away
	}
	sum := &pb.SearchTextSummary{FilesSearched: int32Of(res.FilesSearched), Truncated: res.Truncated}
	if !sameMatches(streamed, res.Matches) {
		sum.FinalMatches = &pb.TextMatchList{}
		for _, m := range res.Matches {
			sum.FinalMatches.Matches = append(sum.FinalMatches.Matches, textMatchToProto(m))
		}
	}
	return stream.Send(&pb.SearchTextResponse{Event: &pb.SearchTextResponse_Summary{Summary: sum}})
}

func (h *hostServer) SearchChunks(ctx context.Context, req *pb.SearchChunksRequest) (*pb.SearchChunksResponse, error) {
	host, err := h.lookup(req.GetCallId())
	if err != nil {
		return nil, err
	}
	hits, err := host.SearchChunks(ctx, engine.ChunkQuery{Query: req.GetQuery(), Path: req.GetPath(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, hostErrorToStatus(err)
	}
	return &pb.SearchChunksResponse{Chunks: chunkHitsToProto(hits)}, nil
}

func (h *hostServer) SearchVectors(ctx context.Context, req *pb.SearchVectorsRequest) (*pb.SearchVectorsResponse, error) {
	host, err := h.lookup(req.GetCallId())
	if err != nil {
		return nil, err
	}
	hits, err := host.SearchVectors(ctx, engine.ChunkQuery{Query: req.GetQuery(), Path: req.GetPath(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, hostErrorToStatus(err)
	}
	return &pb.SearchVectorsResponse{Chunks: chunkHitsToProto(hits)}, nil
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

// hostClient is the engine.ToolHost a plugin's Invoke receives. Each
// method is one HostService call tied to the running call by callID. A
// host error comes back as a *HostError whose message is the host's words
// and which matches the engine sentinel (engine.ErrUnsupported when the
// engine has no index, ErrInvalidRequest, ErrNotFound) with errors.Is; an
// ended ctx as ctx's error.
type hostClient struct {
	dialer *hostDialer
	callID string
}

var _ engine.ToolHost = (*hostClient)(nil)

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
		return engine.ApprovalDecision{}, hostErrorFromStatus(ctx, "RequestApproval", err)
	}
	return engine.ApprovalDecision{Approved: resp.GetApproved(), Reason: resp.GetReason()}, nil
}

func (h *hostClient) SearchSymbols(ctx context.Context, q engine.SymbolQuery) ([]engine.SymbolHit, error) {
	c, err := h.dialer.get(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.SearchSymbols(ctx, symbolQueryToProto(h.callID, q))
	if err != nil {
		return nil, hostErrorFromStatus(ctx, "SearchSymbols", err)
	}
	return symbolHitsFromProto(resp.GetSymbols()), nil
}

// SearchText calls onMatch (when not nil) for each match as it arrives,
// from the calling goroutine. The result's Matches are never nil.
func (h *hostClient) SearchText(ctx context.Context, q engine.TextQuery, onMatch func(engine.TextMatch)) (engine.TextResult, error) {
	c, err := h.dialer.get(ctx)
	if err != nil {
		return engine.TextResult{}, err
	}
	sctx, cancel := context.WithCancel(ctx) // ends the stream if we return early
	defer cancel()
	stream, err := c.SearchText(sctx, textQueryToProto(h.callID, q))
	if err != nil {
		return engine.TextResult{}, hostErrorFromStatus(ctx, "SearchText", err)
	}
	res := engine.TextResult{Matches: []engine.TextMatch{}}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return engine.TextResult{}, fmt.Errorf("host callback SearchText: the stream ended after %d matches without its summary", len(res.Matches))
		}
		if err != nil {
			return engine.TextResult{}, hostErrorFromStatus(ctx, "SearchText", err)
		}
		switch ev := msg.GetEvent().(type) {
		case *pb.SearchTextResponse_Match:
			m := textMatchFromProto(ev.Match)
			res.Matches = append(res.Matches, m)
			if onMatch != nil {
				onMatch(m)
			}
		case *pb.SearchTextResponse_Summary:
			res.FilesSearched, res.Truncated = int(ev.Summary.GetFilesSearched()), ev.Summary.GetTruncated()
			if final := ev.Summary.GetFinalMatches(); final != nil {
				res.Matches = make([]engine.TextMatch, len(final.GetMatches()))
				for i, m := range final.GetMatches() {
					res.Matches[i] = textMatchFromProto(m)
				}
			}
			return res, nil
		}
	}
}

func (h *hostClient) SearchChunks(ctx context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	c, err := h.dialer.get(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.SearchChunks(ctx, &pb.SearchChunksRequest{CallId: h.callID, Query: q.Query, Path: q.Path, Limit: int32Of(q.Limit)})
	if err != nil {
		return nil, hostErrorFromStatus(ctx, "SearchChunks", err)
	}
	return chunkHitsFromProto(resp.GetChunks()), nil
}

func (h *hostClient) SearchVectors(ctx context.Context, q engine.ChunkQuery) ([]engine.ChunkHit, error) {
	c, err := h.dialer.get(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.SearchVectors(ctx, &pb.SearchVectorsRequest{CallId: h.callID, Query: q.Query, Path: q.Path, Limit: int32Of(q.Limit)})
	if err != nil {
		return nil, hostErrorFromStatus(ctx, "SearchVectors", err)
	}
	return chunkHitsFromProto(resp.GetChunks()), nil
}
