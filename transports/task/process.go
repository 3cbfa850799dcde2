package task

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// Response is the body of a 200 response.
type Response struct {
	Result *Result `json:"result"`
	// ReceiptPath is the absolute path of the month file holding the
	// task's receipt: {ZU_ROOT}/ide/receipts/{repoId}/{yyyy}/{mm}/receipts.jsonl.
	ReceiptPath string `json:"receiptPath"`
}

// Result is the result of a processed task: the result member of a 200
// response and the data of its receipt.
type Result struct {
	// TaskID is task.id of the request.
	TaskID string `json:"taskId"`
	// Success is true: failed tasks get an error response instead.
	Success bool `json:"success"`
	// ProcessingTime is the time from a worker taking the task to the end
	// of its last engine turn, in whole milliseconds (queueing excluded).
	ProcessingTime int64 `json:"processingTime"`
	// Type is task.type.
	Type string `json:"type"`
	// Output is the model's final answer.
	Output string `json:"output"`
	// Verdict, for a validation task only, is "pass", "fail" or "unknown",
	// read from the "VERDICT: ..." line the model is asked to start with.
	Verdict string `json:"verdict,omitempty"`
	// Model is the model that answered, PROVIDER:MODEL.
	Model string `json:"model"`
	// ToolsUsed lists the tools the model called, in first-call order.
	ToolsUsed []string `json:"toolsUsed"`
	// Tokens counts the turn's tokens; absent when the provider reported
	// none.
	Tokens *Tokens `json:"tokens,omitempty"`
	// Attempts is the number of engine turns run: 1 plus the retries.
	Attempts int `json:"attempts"`
}

// Tokens counts the tokens of a task's successful turn.
type Tokens struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
}

// Retry backoff: the pause before retry n is retryBackoff·2^(n-1), at most
// maxRetryBackoff, cut short by the task's deadline.
const (
	retryBackoff    = 100 * time.Millisecond
	maxRetryBackoff = time.Second
)

// outcome is what processing a job came to.
type outcome struct {
	// result is set when the task succeeded.
	result *Result
	// err is the last attempt's failure when result is nil.
	err      error
	attempts int
	// panicked is set when processing panicked (a bug); err says where.
	panicked bool
	// session and turn identify the last engine turn, for the receipt.
	session, turn string
}

// worker processes jobs until the queue closes.
func (s *Server) worker() {
	defer s.workers.Done()
	for {
		j, ok := s.queue.pop()
		if !ok {
			return
		}
		j.done <- s.process(j)
	}
}

// process runs the job's engine turn, trying again after a failed turn
// while retries remain and the job's context lives.
func (s *Server) process(j *job) (out outcome) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("task: processing panicked", "task", j.task.Task.ID, "panic", p, "stack", string(debug.Stack()))
			out = outcome{err: fmt.Errorf("internal error: %v", p), attempts: out.attempts, panicked: true}
		}
	}()
	ctx := j.ctx
	for {
		if ctx.Err() != nil {
			out.err = context.Cause(ctx)
			return out
		}
		if s.pastDeadline(ctx) {
			out.err = errTaskTimeout
			return out
		}
		out.attempts++
		res, err := s.runTurn(ctx, j.in, &out)
		if err == nil && res.Status == engine.TurnCompleted {
			out.result = newResult(j.task, res, time.Since(start), out.attempts)
			return out
		}
		if err == nil {
			err = errors.New(res.Error)
			if res.Error == "" {
				err = fmt.Errorf("the turn ended with status %s", res.Status)
			}
		}
		out.err = err
		if ctx.Err() != nil || s.pastDeadline(ctx) || out.attempts > j.task.retries {
			return out
		}
		s.log.Warn("task: turn failed, retrying", "task", j.task.Task.ID, "attempt", out.attempts, "err", err)
		pause := min(retryBackoff<<(out.attempts-1), maxRetryBackoff)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// runTurn runs one engine turn of in in a fresh session, without a Host:
// tools that need approval are denied.
func (s *Server) runTurn(ctx context.Context, in engine.TurnInput, out *outcome) (engine.TurnResult, error) {
	sess, err := s.opts.Engine.NewSession(s.opts.Workspace, "")
	if err != nil {
		return engine.TurnResult{}, err
	}
	out.session = sess.ID()
	// One turn per session: forget it afterwards, so a long-running
	// server does not keep every task's history.
	defer s.opts.Engine.CloseSession(context.Background(), sess.ID())
	res, err := sess.Run(ctx, in, engine.TurnOptions{})
	out.turn = res.TurnID
	return res, err
}

func newResult(d *decoded, res engine.TurnResult, elapsed time.Duration, attempts int) *Result {
	m := res.Metadata
	r := &Result{
		TaskID: d.Task.ID, Success: true, ProcessingTime: elapsed.Milliseconds(), Type: d.Task.Type,
		Output: res.Message, Model: m.Model, ToolsUsed: m.ToolsUsed, Attempts: attempts,
	}
	if r.ToolsUsed == nil {
		r.ToolsUsed = []string{}
	}
	if m.TokensUsed > 0 {
		r.Tokens = &Tokens{Prompt: m.PromptTokens, Completion: m.CompletionTokens, Total: m.TokensUsed}
	}
	if d.Task.Type == TypeValidation {
		r.Verdict = verdict(res.Message)
	}
	return r
}
