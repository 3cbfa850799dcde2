package lspstdio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// ticket is an executeTask's place in the queue; ready is closed when it
// is first. The other fields are guarded by conn.mu: reqID is the request
// id ("" for a notification), cancel cancels the task once it has a
// context, cancelled records a $/cancelRequest that came before.
type ticket struct {
	ready     chan struct{}
	reqID     string
	cancel    context.CancelCauseFunc
	cancelled bool
}

// assignTask queues an executeTask in arrival order (Assign runs in the
// order messages arrive; handlers may start in any order) and returns its
// handler. The place is released once the result is written (see below).
func (c *conn) assignTask(ctx context.Context) jrpc2.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return func(context.Context, *jrpc2.Request) (any, error) {
			return nil, jrpc2.Errorf(CodeTaskError, "the backend is shutting down; the task was not started")
		}
	}
	if waiting := len(c.queue) - 1; waiting >= c.s.opts.MaxQueuedTasks {
		return func(context.Context, *jrpc2.Request) (any, error) {
			return nil, jrpc2.Errorf(CodeTaskError, "%d tasks are already waiting behind the running one (the limit); wait for a result before sending more", waiting)
		}
	}
	t := &ticket{ready: make(chan struct{})}
	if req := jrpc2.InboundRequest(ctx); req != nil && !req.IsNotification() {
		t.reqID = req.ID()
		c.byReq[t.reqID] = t
	}
	c.queue = append(c.queue, t)
	if len(c.queue) == 1 {
		close(t.ready)
	}
	c.tasks.add(1)
	release := sync.OnceFunc(func() {
		c.dequeue(t)
		c.tasks.add(-1)
	})
	// A request's place is released when jrpc2 cancels its context, which
	// it does holding its lock while it writes the response: the next
	// task's first notification waits for that lock, so it follows this
	// task's result on the wire. (jrpc2 also cancels it when the server
	// stops.) $/cancelRequest does not cancel that context but the task's
	// own (see cancelRequest). A notification has no response: its place is
	// released when its task ends.
	context.AfterFunc(ctx, release)
	return func(hctx context.Context, req *jrpc2.Request) (any, error) {
		if req.IsNotification() {
			// jrpc2 handles no later message until a notification's
			// handler has returned, so the task runs on its own: else
			// toolResponse, $/cancelRequest, shutdown and everything else
			// would wait for the whole task. Its place in the queue is
			// already taken; Serve waits for it through c.tasks.
			go func() {
				defer release()
				c.executeTask(context.WithoutCancel(hctx), req, t)
			}()
			return nil, nil
		}
		return c.executeTask(hctx, req, t)
	}
}

// dequeue removes t from the queue and lets the next task run.
func (c *conn) dequeue(t *ticket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.reqID != "" && c.byReq[t.reqID] == t {
		delete(c.byReq, t.reqID)
	}
	for i, q := range c.queue {
		if q != t {
			continue
		}
		c.queue = append(c.queue[:i], c.queue[i+1:]...)
		if i == 0 && len(c.queue) > 0 {
			close(c.queue[0].ready)
		}
		return
	}
}

// executeTask validates the request, waits for the tasks queued before it
// and runs it.
func (c *conn) executeTask(hctx context.Context, req *jrpc2.Request, t *ticket) (any, error) {
	var p executeTaskParams
	if err := unmarshalParams(req, &p); err != nil {
		return c.fail(req, err)
	}
	switch {
	case p.TaskID == "":
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "executeTask: taskId must be a non-empty string"))
	case strings.TrimSpace(p.Prompt) == "":
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "executeTask %s: prompt must be a non-empty string", p.TaskID))
	}
	c.mu.Lock()
	sess, initErr, closing, dup := c.session, c.initErr, c.closing, c.taskIDs[p.TaskID]
	ok := sess != nil && !closing && !dup
	if ok {
		c.taskIDs[p.TaskID] = true
	}
	c.mu.Unlock()
	switch {
	case closing:
		return c.fail(req, jrpc2.Errorf(CodeTaskError, "the backend is shutting down; task %s was not started", p.TaskID))
	case sess == nil && initErr != nil:
		return c.fail(req, jrpc2.Errorf(CodeInitError, "the backend failed to initialize (%v); send initialize again", initErr))
	case sess == nil:
		return c.fail(req, jrpc2.Errorf(CodeInitError, "the backend is not initialized: send initialize first"))
	case dup:
		return c.fail(req, jrpc2.Errorf(jrpc2.InvalidParams, "taskId %q is already running or queued; use a new taskId for every task", p.TaskID))
	}
	defer func() {
		c.mu.Lock()
		delete(c.taskIDs, p.TaskID)
		c.mu.Unlock()
	}()
	in, err := turnInput(sess.Workspace(), p)
	if err != nil {
		return c.fail(req, jrpc2.Errorf(CodeContextError, "executeTask %s: %v", p.TaskID, err))
	}

	ctx, cancel := context.WithCancelCause(hctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(errShuttingDown) })
	defer stop()
	c.mu.Lock()
	t.cancel = cancel
	cancelled := t.cancelled
	c.mu.Unlock()
	if cancelled {
		cancel(errCancelledByClient)
	}

	select {
	case <-t.ready:
	default:
		c.notify(methodStatusUpdate, statusUpdate{Message: fmt.Sprintf("Task %s is queued until the running task ends", p.TaskID)})
		select {
		case <-t.ready:
		case <-ctx.Done():
			return c.taskFailed(p.TaskID, cancelText(ctx, "before it started"), "cancelled", "", nil), nil
		}
	}
	// The configuration is the one in force when the task starts, not when
	// it was queued (updateConfiguration applies to the tasks that start
	// after it).
	c.mu.Lock()
	cfg := c.cfg
	c.mu.Unlock()
	in.Model = cfg.model
	return c.runTask(ctx, req, sess, p.TaskID, in, cfg)
}

// runTask runs the turn, streaming its events, and returns the result.
func (c *conn) runTask(ctx context.Context, req *jrpc2.Request, sess *engine.Session, taskID string, in engine.TurnInput, cfg config) (any, error) {
	c.log.Info("task started", "task", taskID, "session", sess.ID())
	c.notify(methodStatusUpdate, statusUpdate{Message: "Task " + taskID + " started", Progress: percent(0)})
	m := newTaskMapper(taskID)
	host := &taskHost{c: c, taskID: taskID, tools: cfg.hostTools, toolTimeout: cfg.hostToolTimeout, approvalTimeout: cfg.approvalTimeout}
	res, err := sess.Run(ctx, in, engine.TurnOptions{
		Host:       host,
		ApproveAll: c.s.opts.ApproveAll,
		OnEvent: func(ev engine.Event) {
			for _, n := range m.notes(ev) {
				c.notify(n.method, n.params)
			}
		},
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return c.taskFailed(taskID, cancelText(ctx, "before it started"), string(engine.TurnCancelled), "", nil), nil
	case err != nil:
		msg := fmt.Sprintf("task %s could not start: %v", taskID, err)
		c.notify(methodTaskError, taskError{TaskID: taskID, Message: msg, Details: map[string]any{"code": CodeTaskError}})
		return c.fail(req, jrpc2.Errorf(CodeTaskError, "%s", msg))
	}
	md := metadataOf(res.Metadata)
	if res.Status == engine.TurnCompleted {
		c.log.Info("task completed", "task", taskID, "tokens", res.Metadata.TokensUsed, "duration", res.Metadata.Duration)
		c.notify(methodStatusUpdate, statusUpdate{Message: "Task " + taskID + " completed", Progress: percent(100)})
		return taskResult{Status: statusCompleted, Message: res.Message, Metadata: md}, nil
	}
	msg := res.Error
	if res.Status == engine.TurnCancelled {
		msg = cancelText(ctx, "")
	}
	if msg == "" {
		msg = "the task ended with status " + string(res.Status)
	}
	code := ""
	if m.lastErr != nil {
		code = string(m.lastErr.Code)
	}
	return c.taskFailed(taskID, msg, string(res.Status), code, md), nil
}

// taskFailed sends $/taskError and $/statusUpdate for a task that ended
// without completing and returns its result.
func (c *conn) taskFailed(taskID, msg, status, code string, md *taskMetadata) taskResult {
	c.log.Info("task failed", "task", taskID, "status", status, "err", msg)
	details := map[string]any{"status": status}
	if code != "" {
		details["code"] = code
	}
	c.notify(methodTaskError, taskError{TaskID: taskID, Message: msg, Details: details})
	c.notify(methodStatusUpdate, statusUpdate{Message: "Task " + taskID + " failed: " + msg, Progress: percent(100)})
	return taskResult{Status: statusError, Message: msg, Metadata: md}
}

// cancelText says why ctx was cancelled.
func cancelText(ctx context.Context, when string) string {
	msg := "the task was cancelled"
	if when != "" {
		msg += " " + when
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errShuttingDown):
		msg += ": the backend is shutting down"
	case errors.Is(cause, errCancelledByClient):
		msg += " by the client ($/cancelRequest)"
	}
	return msg
}

func percent(p float64) *float64 { return &p }

func metadataOf(md engine.TurnMetadata) *taskMetadata {
	return &taskMetadata{
		Model: md.Model, PromptTokens: md.PromptTokens, CompletionTokens: md.CompletionTokens, TokensUsed: md.TokensUsed,
		ModelCalls: md.ModelCalls, ToolsUsed: nonNil(md.ToolsUsed), FilesModified: nonNil(md.FilesModified),
		DurationMS: md.Duration.Milliseconds(),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Caps of the text executeTask's context adds to the user message.
const (
	maxSelectionBytes    = 16 << 10
	maxEditorContentSize = 32 << 10
)

// turnInput maps executeTask's prompt and context onto a turn (see the
// package doc): the paths go into TurnContext, the selection and the
// editor's content into the message. A context that is not an object,
// has a member of the wrong type or names a path outside the workspace
// is an error.
func turnInput(ws *engine.Workspace, p executeTaskParams) (engine.TurnInput, error) {
	in := engine.TurnInput{Message: p.Prompt}
	switch p.Context.kind {
	case 0, 'n':
		return in, nil
	case '{':
	default:
		return in, errors.New("context must be an object")
	}
	tc := p.Context.tc
	if err := p.Context.err; err != nil {
		return in, fmt.Errorf("context: %s", jsonErrText(err))
	}
	var refused []string
	check := func(p string) string {
		rel, err := workspacePath(ws.Root, p)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%q (%v)", snippet(p, 200), err))
		}
		return rel
	}
	tctx := &engine.TurnContext{}
	var active string
	if tc.ActiveEditorPath != nil && *tc.ActiveEditorPath != "" {
		active = check(*tc.ActiveEditorPath)
		tctx.ActiveEditor = &engine.ActiveEditor{FilePath: active}
		if tc.ActiveEditorContent != nil {
			sum := sha256.Sum256([]byte(*tc.ActiveEditorContent))
			tctx.ActiveEditor.ContentHash = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	for _, f := range tc.OpenFiles {
		tctx.OpenEditors = append(tctx.OpenEditors, engine.OpenEditor{FilePath: check(f)})
	}
	for _, f := range tc.RelevantFiles {
		tctx.Mentions = append(tctx.Mentions, engine.Mention{Type: engine.MentionFile, Path: check(f)})
	}
	if len(refused) > 0 {
		return in, fmt.Errorf("context names paths outside the workspace %s: %s", ws.Root, strings.Join(refused, ", "))
	}

	var b strings.Builder
	b.WriteString(p.Prompt)
	where := "the active editor"
	if active != "" {
		where += " (" + active + ")"
	}
	if tc.Selection != nil && *tc.Selection != "" {
		fmt.Fprintf(&b, "\n\nSelected text in %s:\n%s", where, fenced(capText(*tc.Selection, maxSelectionBytes), active))
	}
	if tc.ActiveEditorContent != nil && *tc.ActiveEditorContent != "" {
		fmt.Fprintf(&b, "\n\nContent of %s as the editor holds it (unsaved changes included):\n%s",
			where, fenced(capText(*tc.ActiveEditorContent, maxEditorContentSize), active))
	}
	in.Message = b.String()
	if tctx.ActiveEditor != nil || tctx.OpenEditors != nil || tctx.Mentions != nil {
		in.Context = tctx
	}
	return in, nil
}

// workspacePath returns p (a path or a file:// URI) as a workspace-relative
// slash-separated path; the error says why it is outside root (absolute,
// symlinks resolved).
func workspacePath(root, p string) (string, error) {
	p, err := fromURI(p)
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if rel, ok := inside(root, p); ok {
		return rel, nil
	}
	// An alias of the root (a symlinked parent): resolve what exists.
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if rel, ok := inside(root, real); ok {
			return rel, nil
		}
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		if rel, ok := inside(root, filepath.Join(dir, filepath.Base(p))); ok {
			return rel, nil
		}
	}
	return "", errors.New("outside the workspace")
}

func inside(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// fromURI turns a file:// URI into a path; other strings are paths.
func fromURI(s string) (string, error) {
	if !strings.HasPrefix(s, "file:") {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Host != "" && u.Host != "localhost") {
		return "", fmt.Errorf("not a local file URI")
	}
	return filepath.FromSlash(u.Path), nil
}

// capText cuts s to at most n bytes (at a rune boundary) and says so.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… cut: %d of %d bytes shown]", cut, len(s))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// fenced puts text in a Markdown code fence longer than any backtick run
// in it, tagged with the file's extension.
func fenced(text, path string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	lang := strings.TrimPrefix(filepath.Ext(path), ".")
	return fence + lang + "\n" + strings.TrimSuffix(text, "\n") + "\n" + fence
}
