package plugins

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexus-agent/plexus/engine"
	pb "github.com/plexus-agent/plexus/proto/plexus/v1"
)

// Tool calls on long-lived streams (ToolService.Calls). A call over Invoke
// opens an HTTP/2 stream of its own (headers each way, trailers, stream
// setup and teardown); on a Calls stream it is one message each way. Each
// stream runs one call at a time, and both ends handle it in the goroutine
// that receives it, so no goroutine handoff is added to what gRPC does: a
// no-op call costs about half a unary gRPC call on the same connection
// (BenchmarkToolCall measures both). The host keeps a pool of idle
// streams, one per call it ran at once, and cancels a call by cancelling
// its stream, which the plugin sees as its context ending although it
// reads nothing while the call runs.

// maxIdleCalls bounds the idle streams kept per plugin process; more
// concurrent calls than this open streams that close when they end.
const maxIdleCalls = 8

// callsPool is the host's pool of Calls streams to one plugin process. It
// remembers a plugin that does not serve Calls, whose calls then use
// Invoke. Safe for concurrent use.
type callsPool struct {
	client pb.ToolServiceClient

	mu          sync.Mutex
	idle        []*callStream
	unsupported bool
}

// callStream is one Calls stream, used by one call at a time.
type callStream struct {
	stream grpc.BidiStreamingClient[pb.CallsRequest, pb.CallsResponse]
	cancel context.CancelFunc // ends the stream, and a call running on it
}

// get returns an idle stream or opens one (waiting, within ctx, for the
// plugin's ready message); nil when the plugin does not serve Calls.
func (p *callsPool) get(ctx context.Context) (*callStream, error) {
	p.mu.Lock()
	if p.unsupported {
		p.mu.Unlock()
		return nil, nil
	}
	if n := len(p.idle); n > 0 {
		cs := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return cs, nil
	}
	p.mu.Unlock()
	cs, err := openCalls(ctx, p.client)
	if status.Code(err) == codes.Unimplemented {
		p.mu.Lock()
		p.unsupported = true
		p.mu.Unlock()
		return nil, nil
	}
	return cs, err
}

// put returns a stream whose call ended cleanly to the pool.
func (p *callsPool) put(cs *callStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleCalls {
		cs.cancel()
		return
	}
	p.idle = append(p.idle, cs)
}

// openCalls opens a Calls stream and waits (within ctx) for ready.
func openCalls(ctx context.Context, client pb.ToolServiceClient) (*callStream, error) {
	sctx, cancel := context.WithCancel(context.Background()) // outlives ctx: the stream is reused
	stream, err := client.Calls(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	stop := context.AfterFunc(ctx, cancel)
	msg, err := stream.Recv()
	if !stop() {
		cancel()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err == nil && !msg.GetReady() {
		err = status.Error(codes.Internal, "the plugin's calls stream did not start with ready")
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &callStream{stream: stream, cancel: cancel}, nil
}

// invoke runs one call on cs. The deadline travels as timeout_ms; when ctx
// ends first, the stream is cancelled (the plugin's call sees its context
// end) and the context's error is returned as a gRPC status, as on a
// stream of its own. reusable reports whether cs can take another call.
func (cs *callStream) invoke(ctx context.Context, req *pb.InvokeRequest, onUpdate func(engine.ToolUpdate)) (res engine.ToolResult, err error, reusable bool) {
	msg := &pb.CallsRequest{Request: req}
	if dl, ok := ctx.Deadline(); ok {
		msg.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	stop := context.AfterFunc(ctx, cs.cancel)
	defer func() {
		if !stop() { // ctx ended: the stream is cancelled
			reusable = false
		}
		if !reusable {
			cs.cancel()
		}
	}()
	if err := cs.stream.Send(msg); err != nil && !errors.Is(err, io.EOF) {
		return engine.ToolResult{}, cs.err(ctx, err), false
	}
	for {
		m, err := cs.stream.Recv()
		if err != nil {
			return engine.ToolResult{}, cs.err(ctx, err), false
		}
		if res, err, done := invokeEvent(m.GetEvent(), onUpdate); done {
			return res, err, true
		}
	}
}

// err turns a failed Send or Recv into what the caller sees: its
// context's error when that ended the stream, the plugin ending the
// stream as Unavailable (the supervisor then checks whether it died).
func (cs *callStream) err(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, io.EOF):
		return status.Error(codes.Unavailable, "the plugin ended its calls stream")
	}
	return err
}

// Calls serves the plugin's side of a Calls stream: it sends ready, then
// runs each call it receives, in turn, with the deadline its timeout_ms
// gives and a context that ends with the stream (the host cancels a call
// by cancelling its stream).
func (s *toolServer) Calls(stream grpc.BidiStreamingServer[pb.CallsRequest, pb.CallsResponse]) error {
	var mu sync.Mutex // Send is not safe for concurrent use; a tool may report from several goroutines
	send := func(r *pb.CallsResponse) {
		mu.Lock()
		defer mu.Unlock()
		_ = stream.Send(r) // a failed send means the host is gone; ctx ends the call
	}
	send(&pb.CallsResponse{Ready: true})
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // the host closed or cancelled the stream
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if ms := req.GetTimeoutMs(); ms > 0 {
			cctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		}
		s.run(cctx, req.GetRequest(), func(r *pb.InvokeResponse) { send(&pb.CallsResponse{Event: r}) })
		cancel()
	}
}
