// Package lspstdio serves the engine over stdio as JSON-RPC 2.0 with LSP
// base-protocol framing (Content-Length headers), the protocol of the VS
// Code extension in protocols/jsonrpc-stdio-lsp-framing.md. The extension
// spawns `plexus serve --transport lsp-stdio` and talks to it with
// vscode-jsonrpc's StreamMessageReader and StreamMessageWriter.
//
// Usage (what `plexus serve --transport lsp-stdio` does):
//
//	srv := lspstdio.New(lspstdio.Options{Engine: eng, Workspace: ws, Logger: logger})
//	err := srv.Serve(ctx, os.Stdin, os.Stdout)
//
// JSON-RPC is github.com/creachadair/jrpc2: its server dispatches the
// methods, sends the notifications and the server-to-client
// $/requestToolExecution requests (ServerOptions.AllowPush, Callback), and
// its channel.LSP framing writes every message. Reading is this package's
// (framing.go), with limits jrpc2's reader lacks. The event mapping lives
// in one function (taskMapper.notes in mapping.go).
//
// # Methods
//
// Client to server: initialize, executeTask, updateConfiguration,
// toolResponse and shutdown, as the contract states them; also exit (LSP's,
// handled as shutdown) and $/cancelRequest {id} (vscode-jsonrpc's, sent
// when a CancellationToken fires: the executeTask with that request id,
// running or queued, ends with status error "the task was cancelled by the
// client"). The contract's notifications (initialize, updateConfiguration,
// shutdown, toolResponse) are also accepted as requests: the response is
// then the method's result, or its error with the contract's code. A
// notification has no response, so the error of a failed one goes out as
// $/logMessage {type: "error", message: "initialize failed (-32000): ..."}.
//
// Server to client: $/logMessage, $/statusUpdate, $/partialResult,
// $/taskError (notifications) and $/requestToolExecution (a request).
//
// # initialize and the configuration
//
// initialize {initialConfig, workspaceRoot, environment} opens workspaceRoot
// (a path or a file:// URI; null, "" or absent means Options.Workspace, the
// directory `plexus serve` was given) and starts the connection's engine
// session: every task of the connection runs in it, so a task sees the
// conversation of the earlier ones. environment is accepted and logged at
// debug level; it changes nothing. As a request, initialize answers
// {serverInfo: {name: "plexus", protocol}, workspaceRoot, model, hostTools:
// [names]}. A second initialize after one succeeded is refused (-32000; use
// updateConfiguration); after one failed it is tried again. On success the
// server sends $/logMessage info "Plexus is ready: workspace ..., model
// ..., host tools: ...".
//
// initialConfig and updateConfiguration's updatedConfig are objects of which
// these members are read; other members are ignored (an extension's
// settings object may carry its own), and a member that is null returns to
// its default:
//
//   - model: "PROVIDER:MODEL", the model of later tasks (default: the
//     engine's current model, `plexus serve --model`), so a host switches
//     models at run time with updateConfiguration. Its provider must be
//     loaded. The provider is then asked in the background (a slow one
//     must not hold up the connection): a model it does not list, or that
//     cannot chat and call tools (engine.CheckModel), gets a $/logMessage
//     warn "Tasks with model ... will fail: why"; an unreachable provider
//     is left for a task to report.
//   - hostTools: [{name, description, inputSchema, readOnly, needsApproval,
//     risk}], the tools the host runs (see Host tools). name is 1 to 64
//     letters, digits, _ or -, unique, not "approve"; inputSchema defaults
//     to {"type":"object"}; readOnly defaults to false; needsApproval
//     defaults to !readOnly; risk is low, medium, high or critical
//     (default low when readOnly, else medium).
//   - hostToolTimeoutMs: how long a host tool call waits for its answer,
//     1 ms to 1 hour (default Options.HostToolTimeout, 2 minutes). The
//     engine bounds every tool call by its tool deadline
//     (engine.Options.ToolTimeout, 11 minutes by default), so the wait is
//     cut to end before that deadline, by a tenth of the time left (at
//     most 1 s): the model then gets the timeout message below, with the
//     effective wait.
//   - approvalTimeoutMs: how long an approval waits (default
//     Options.ApprovalTimeout, 10 minutes).
//
// updateConfiguration applies to tasks that start after it, queued ones
// included (a task reads the configuration when its turn comes; a running
// task keeps the model and tools it started with) and is confirmed with
// $/logMessage info "Configuration updated: ...".
//
// # executeTask
//
// executeTask {taskId, prompt, context} runs one engine turn. taskId must
// be a non-empty string not used by a running or queued task, prompt a
// non-empty string (else -32602). context (null or absent for none) maps
// onto the turn as follows:
//
//   - activeEditorPath, openFiles and relevantFiles are paths (absolute,
//     workspace-relative or file:// URIs) that must lie inside the
//     workspace; one that does not is a context error (-32004) naming it,
//     as is a member of the wrong type. activeEditorPath becomes the
//     engine's TurnContext.ActiveEditor, openFiles its OpenEditors and
//     relevantFiles its Mentions (files): the engine adds a context section
//     to the user message (the active file, the open editors, the mentioned
//     files' contents, within its budget).
//   - activeEditorContent is the editor's text: its SHA-256 becomes
//     ActiveEditor.ContentHash (the engine then notes when the editor has
//     unsaved changes), and the text itself is added to the user message,
//     fenced, as "Content of the active editor (PATH) as the editor holds
//     it (unsaved changes included)", cut at 32 KiB.
//   - selection is the selected text (the contract sends text, not a
//     range): it is added to the user message as "Selected text in the
//     active editor (PATH)", cut at 16 KiB.
//
// Tasks run one at a time, as the contract assumes ("serial processing of
// executeTask requests"): a second executeTask while one runs is queued,
// not refused, and runs when the first has been answered, in arrival
// order; it is told with $/statusUpdate "Task T is queued until the
// running task ends". Queueing is what "serial processing" means for a
// client that sends requests without waiting, and it spares the extension
// a queue of its own. At most Options.MaxQueuedTasks (default 8) wait;
// one more is refused with -32001. A queued task can be cancelled with
// $/cancelRequest.
//
// executeTask sent as a notification is accepted too: it takes its place
// in the queue in arrival order like a request and runs without holding up
// the messages after it (toolResponse, $/cancelRequest, shutdown, ...); it
// has no result (follow it by its $/statusUpdate "Task T completed" or
// "failed"), and its errors go out as $/logMessage error. It cannot be
// cancelled with $/cancelRequest, which names a request id.
//
// While a task runs, the engine's events become notifications
// (taskMapper.notes):
//
//   - assistant text: $/partialResult {taskId, content, type: "text"}, one
//     per token, in order. The text of a model call that follows tool
//     calls starts with a blank line ("\n\n"), so the stream reads as
//     paragraphs; the last paragraph is the answer (the result's message).
//   - plan (update_plan) and tool calls: $/partialResult type "thought",
//     each a whole line: "Plan:\n1. ...", "Calling NAME {args}" (arguments
//     cut at 200 bytes), "NAME: summary", "NAME failed (code): error",
//     "NAME was not run: reason", "Changes applied; applied: a.go".
//   - proposed patches: $/partialResult type "code", one unified diff per
//     file.
//   - what the agent is doing (reading the request, retrieval stages,
//     running a tool, tool progress, waiting for approval), and each task's
//     start (progress 0) and end (progress 100): $/statusUpdate {message,
//     progress}; progress is a percentage in [0, 100], sent when known.
//   - recoverable errors (a failed tool call, a refused context path):
//     $/logMessage {type: "warn", message: "task T: ..."}.
//
// The result is {status: "completed", message: the answer} or {status:
// "error", message: why}, plus metadata {model, promptTokens,
// completionTokens, tokensUsed, modelCalls, toolsUsed, filesModified,
// durationMs} (an addition to the contract's fields). It is the last
// message of the task: every notification of a task precedes its result,
// and the next queued task's first notification follows it. A task that
// ran and did not complete (the model failed, the step limit, a timeout,
// cancelled) answers status "error" and is preceded by $/taskError
// {taskId, message, details: {status, code}}, where status is the engine's
// (error, timeout, cancelled) and code the last engine error code
// (MODEL_ERROR, ...). A task that could not start at all (the model's
// provider refused it) gets $/taskError and the error -32001.
//
// # Error codes
//
//   - -32700 parse error: a message that is not JSON, and framing errors.
//   - -32600 invalid request: see Framing and invalid input.
//   - -32601 method not found.
//   - -32602 invalid params: params that are not an object or have a
//     member of the wrong type, a missing taskId or prompt, a taskId in
//     use, a toolResponse whose toolCallId matches no pending
//     $/requestToolExecution (or one already answered or timed out).
//   - -32000 backend initialization error: initialize failed (workspaceRoot
//     cannot be opened, no workspace at all, an invalid initialConfig, the
//     session cannot start); executeTask or updateConfiguration before a
//     successful initialize.
//   - -32001 task execution error: the task could not start, the queue is
//     full, or the backend is shutting down.
//   - -32002 configuration error: an invalid updatedConfig (not an object,
//     an unknown model provider, a bad hostTools declaration or timeout).
//   - -32003 tool execution error: reported by the host, in toolResponse's
//     error or as the error of its response to $/requestToolExecution.
//   - -32004 context error: executeTask's context is not an object, has a
//     member of the wrong type, or names a path outside the workspace.
//
// # Host tools ($/requestToolExecution)
//
// The server is an engine.ClientToolHost: the host's tools are offered to
// the model beside the engine's own (an engine tool of the same name wins),
// judged by the workspace policy like any tool, and run by the host. The
// contract names no tools, so the host declares its own in
// initialConfig.hostTools (for example apply_edit through a WorkspaceEdit,
// run_in_terminal in the integrated terminal). Without a hostTools member
// the server offers one default, read_buffer {path} (ReadBufferTool): the
// file as the editor holds it, unsaved changes included, which the engine
// cannot read itself; its answer is {content, ...}. hostTools: [] offers
// none. No default for edits or commands: the engine already proposes
// edits as patches (with approval and undo) and runs commands in its
// sandbox.
//
// To run one, the server sends the request $/requestToolExecution
// {toolCallId, toolName, toolInput, taskId} (taskId is an addition).
// toolCallId is "tc_" and 16 hex digits, unique per call; toolInput is the
// model's arguments, a JSON object. The host answers, as the contract words
// it, with toolResponse {toolCallId, result, error} (a request, answered
// null, or a notification), or by answering the request itself; whichever
// comes first is the answer. The response to the request is the answer
// when it carries an error or a result other than null; a null result is
// an acknowledgement (vscode-jsonrpc answers every request, and a handler
// that answers through toolResponse returns null), and the answer is then
// awaited as toolResponse. toolResponse's result may be null; its error
// (an object {code, message, data}, or a string) wins over result. An
// error becomes a failed tool call the model sees: "the editor reported an
// error running NAME (code C): message", with the tool error code
// unknown_tool for -32601, invalid_input for -32602, cancelled for -32800
// and failed for the rest (-32003 among them). No answer within the host
// tool timeout fails the call with code timeout ("the editor did not
// answer NAME within 2m0s"); a toolResponse after that is refused like an
// unknown toolCallId (-32602 "no longer pending"). A toolResponse whose
// toolCallId matches nothing is -32602 as a request and a $/logMessage
// error as a notification. The request itself stays pending on the server
// for 10 s after its call ended (answered, timed out, or its task ended),
// so that the acknowledgement following a toolResponse, or an answer a
// little late, is taken and ignored; then it is given up (nothing of it is
// kept), and a response to it is dropped and logged like any response to
// no pending request (see Framing and invalid input).
//
// # Approvals
//
// The contract has no approval message, so approvals go through the same
// request with the reserved toolName "approve" (ApproveToolName): toolInput
// is {requestId, callId, tool, description, args, risk: {level, reasons,
// reversible}, preview: {type, content}, patchSet: {id, rationale,
// acceptanceCriteria, files: [{path, op, diff, hunks}]}, command: {command,
// workingDirectory}} (preview, patchSet and command when they apply), and
// the answer is {approved: boolean, reason, scope, files, hunks, remember,
// applyToSimilar} (scope "all", "file" or "hunk" with files or hunks {path:
// [indexes]} approves part of a patch set; remember and applyToSimilar
// store the decision as a policy rule). Tools that need approval (the
// engine's edits and commands, host tools with needsApproval) are asked
// about this way unless the workspace policy allows or denies them first
// or Options.ApproveAll is set (`plexus serve --approve-all`). A host that
// does not answer approve (an error, no boolean approved, no answer within
// approvalTimeoutMs) denies the call; the model is told why, and so is the
// user through the "NAME was not run: ..." thought.
//
// # Framing and invalid input
//
// Output: every message is written with one Write call as
// "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length:
// N\r\n\r\n" and N bytes of JSON (jrpc2's channel.LSP). Nothing else is
// written to the output; logs go only to Options.Logger (stderr in the
// CLI). The contract's extension treats stderr output as errors, so the CLI
// should log at warn level by default.
//
// Input: header lines end with "\r\n" ("\n" alone is accepted); header
// names are case-insensitive; Content-Length is required, Content-Type
// optional (any type; a charset other than utf-8 or utf8 gets -32700 and
// the message is skipped); other headers are ignored; blank lines between
// messages, and before the end of the input, are skipped. Input that breaks the framing gets one -32700
// error (id null) naming the problem, after which the server stops as on
// shutdown and Serve returns a *FramingError: a header line without a
// colon or not starting with a header name, a Content-Length that is not a
// byte count, two that disagree, none, a header block over 8 KiB, the input
// ending inside a header or a body ("the input ended 11 bytes into a
// message of 100 bytes"). A Content-Length that is wrong but parses shifts
// the boundaries: the body read gets its own error (usually -32700) and the
// next header block usually breaks the framing. A body over
// Options.MaxMessageBytes (default 32 MiB) is skipped without being held in
// memory and answered with -32600 (id null); reading goes on. A message
// within the limit is held about three times over at the peak, briefly
// (the body, and jrpc2's copy of it and its parse of that copy), and about
// twice while its handler runs (jrpc2's copy of the params, and the
// strings decoded from them); this package's checks copy no object or
// array member, and the params are decoded where jrpc2 holds them.
//
// Messages: a body that is not JSON gets -32700 (id null) naming the
// syntax error ("the message is not valid JSON: invalid character 'X'
// after top-level value"). Valid JSON that
// is not a JSON-RPC message gets -32600, with the message's id when it has
// a valid one: a scalar, a batch (the LSP base protocol carries one message
// per frame, and vscode-jsonrpc sends none), a request or notification with
// a "jsonrpc" other than "2.0", an id that is not a string or number, a
// method that is not a non-empty string, params that are not an object or
// array, a result or error beside the method, or any other member; an
// object with neither a method nor a result or error. An unknown method
// gets -32601 (a request) or nothing (a notification, like $/setTrace). A
// response is passed on only when it is the first response to a request
// of the server still pending; any other (an unknown id, a second answer
// to the same request, an answer to a request given up) is dropped and
// logged: a server never answers a response. Requests reusing the id of a request in
// flight get -32600 "duplicate request ID" (jrpc2's check).
//
// # Shutdown
//
// shutdown (or exit), the end of the input, a framing error, a failed
// write, or the end of Serve's context stop the server gracefully: new
// tasks are refused (-32001), the running and queued ones are cancelled and
// answered (status "error", "the task was cancelled: the backend is
// shutting down", after their $/taskError), every request already read is
// answered (shutdown sent as a request is answered null), and Serve returns
// — after at most Options.ShutdownGrace (10 s) of waiting for all that. The
// end of the input is the host closing the pipe (or dying), so tasks are
// cancelled rather than finished. Serve forgets the connection's session
// from the engine's memory.
package lspstdio
