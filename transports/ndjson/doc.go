// Package ndjson serves the engine over stdio as newline-delimited JSON, the
// protocol of the Tauri desktop shell (protocols/ndjson-stdio.md): one
// request object per input line, one response object per output line.
//
// Usage (what `plexus serve --transport ndjson` does):
//
//	srv := ndjson.New(ndjson.Options{Engine: eng, Workspace: ws, Logger: logger})
//	err := srv.Serve(ctx, os.Stdin, os.Stdout)
//
// The transport is a mapping of the engine's event stream onto the wire; the
// mapping lives in one function (turnMapper.wire in response.go). It
// implements the contract's requests user_message, clear_history and
// get_status and its responses ready, token, tool_use, tool_result, done,
// error and status with the field names and types the contract states.
//
// # Choices where the contract is silent
//
// Handshake. Serve writes one ready line before it reads anything:
// {"type":"ready","version":"1.0.0","capabilities":["streaming","tools","attachments"],"timestamp":...}.
// The version is ProtocolVersion, the version of the wire contract (the
// contract's own handshake example), not the Plexus release: the field exists
// so a client can tell protocol revisions apart. The ready line has no id, as
// the contract's ReadyResponse type has none.
//
// Timestamps. Every response carries timestamp, Unix milliseconds taken when
// the line is written, so timestamps never decrease in output order.
//
// Conversations. A user_message whose metadata.conversationId is a non-empty
// string runs in that conversation; the first message of a conversation
// starts an engine session for it in Options.Workspace. A message without
// one (absent, null or "") runs in one default conversation. Conversations
// live in memory for the Server's lifetime. Other metadata keys (userId, ...)
// are accepted and ignored. clear_history and get_status have no metadata in
// the contract; they accept the same metadata.conversationId and act on the
// default conversation without it.
//
// Ordering and concurrency. Requests of one conversation (user_message and
// clear_history) run one after another in the order they were read; requests
// of different conversations run concurrently, so their responses interleave
// and may arrive out of order, which the contract allows ("use id to
// correlate"). Every response line carries its request's id and is written
// whole with one Write call (then Flush, when the writer has one), so lines
// of concurrent requests never mix. get_status and requests that fail
// validation are answered at once by the reading loop, even while turns run.
//
// Responses per request. A user_message gets token, tool_use and tool_result
// lines in event order, then exactly one done or one error. clear_history
// waits for the conversation's running and queued turns, clears its history
// and answers with done (the contract names no response for it; done is
// "sent when request processing is complete"). get_status answers with one
// status: state is "busy" while a user_message of that conversation has been
// accepted and has not had its done or error yet (queued turns included),
// otherwise "idle"; conversationLength counts the user and assistant messages
// of the conversation's history (an assistant message that only calls tools
// counts too); uptime is milliseconds since the engine started. The done or
// error of a turn is written after the engine has saved the turn to the
// history, so a get_status sent after it sees the new length.
//
// Engine events. TokenEvent becomes token. A ToolCallEvent with status
// started becomes tool_use {toolId, toolName, input}; completed becomes
// tool_result whose result is the tool's JSON result; failed and denied
// become tool_result whose result is {"error": message, "code": code} with
// the engine's tool error code (invalid_input, not_found, permission_denied,
// timeout, cancelled, failed, unknown_tool, plugin_crashed). The contract's
// rule "tool execution failure → send error response" is met by that
// tool_result, not by an error line: the contract allows only one done or
// error per request, and the turn goes on after a failed call (the model sees
// the failure and can recover). A call the engine refuses before it starts
// (unknown tool, arguments that are not JSON, approval denied) has no started
// event; its tool_use is written just before its tool_result, so every
// tool_result follows a tool_use with the same toolId. Arguments that are not
// valid JSON are sent as input in a JSON string. running events (progress,
// output) are dropped. The engine's update_plan is a tool call like any
// other, so a plan reaches the client as its tool_use input. ThinkingEvent,
// PlanEvent, RetrievalEvent and ApprovalEvent are dropped (the contract has no message for
// them), as are ErrorEvents: recoverable ones repeat a tool_result, and the
// last unrecoverable one repeats the FinalEvent's error. FinalEvent completed
// becomes done; error and timeout become error with the engine's message;
// cancelled becomes error "request cancelled: the agent is shutting down".
//
// Approvals. The protocol has no way to ask the user, so turns run with no
// engine.Host: a tool call that needs approval is denied (reported in its
// tool_result with code permission_denied) unless Options.ApproveAll is set,
// which approves every such call without asking.
//
// Invalid input. A line that is not JSON is logged (with its line number) and
// skipped; no response is written because no id can be read. Blank lines are
// skipped; a trailing "\r" is ignored. A line longer than Options.MaxLineBytes
// (default DefaultMaxLineBytes, 16 MiB) is logged and skipped without reading
// it into memory, and the loop goes on. JSON that is not a valid request (not
// an object, no id or an id that is not a non-empty string, no kind, a field
// of the wrong type, a user_message without message text, an unknown kind)
// gets one error response naming the problem; its id is the request's id, or
// "" when the request has no string id. An unknown kind is answered with
// `unknown request kind "x"; expected user_message, clear_history or
// get_status`. A request that reuses the id of a request that has not
// finished gets an error response with that id and is not run. Unknown
// top-level fields are ignored. In attachments, path is required; mime may
// be left out, and is then guessed from the file extension
// (application/octet-stream when unknown). Relative attachment paths are
// relative to the workspace root; a file that cannot be read does not fail
// the turn (the engine tells the model it was left out).
//
// Shutdown. When the input ends (stdin closed), Serve stops reading, waits
// for every accepted request to write its last response and returns nil, so
// `echo '{"id":"1","kind":"user_message","message":"hi"}' | plexus serve
// --transport ndjson` prints the whole turn. When ctx is cancelled (SIGTERM
// in the CLI), Serve stops reading, cancels running and queued requests,
// waits for each to write its one error response and returns nil. A failed
// write to the output cancels everything the same way and Serve returns that
// error; a failed read returns the read error after in-flight requests end.
// Logs go only to Options.Logger, never to the output.
package ndjson
