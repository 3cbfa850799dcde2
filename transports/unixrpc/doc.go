// Package unixrpc is the Unix-socket front-end of
// protocols/jsonrpc-unix-socket.md: JSON-RPC 2.0, one message per line,
// on a 0600 socket, for the terminal UI. plexus serve --transport unix
// [--socket PATH] runs it:
//
//	ln, err := unixrpc.Listen(path) // path from --socket, else unixrpc.DefaultSocketPath()
//	srv, err := unixrpc.New(unixrpc.Options{Engine: eng, Workspace: ws, Logger: logger})
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx) // on SIGTERM: removes the socket file
//
// Each connection is a github.com/creachadair/jrpc2 server over
// channel.Line. Every line is checked before jrpc2 sees it (see Framing),
// so that every error carries the contract's code. Engine events become
// notifications in one function (mapper.notes in mapping.go). Field names
// are the contract's; members beyond it are marked below.
//
// # Choices the contract leaves open
//
// Names. The socket is $XDG_RUNTIME_DIR/plexus-{pid}.sock, else
// /tmp/plexus-{pid}.sock (DefaultSocketPath). initialize's server_info is
// {"name": "plexus", "version": Options.Version}, the version defaulting
// to the binary's module version ("dev" for a development build).
//
// Socket. Listen makes the socket in a private directory beside the path,
// gives it mode 0600 and links it into place, so it is never reachable
// with a wider mode. An existing socket file nobody answers on is stale
// and removed; one that answers is refused (ErrServerRunning); anything
// else at the path (a file, a symlink) is refused and left alone. The
// check, the removal and the link run under an exclusive flock on
// PATH.lock (mode 0600), so two servers starting on one path never remove
// each other's live socket; the lock file is kept while the server
// listens (one that dies leaves it, to be reused) and removed, under the
// lock, when it stops. Closing the listener (Shutdown, Close) removes the
// socket file if it is still this server's.
//
// Framing. UTF-8 JSON, one message per line; a "\r" before the newline is
// accepted and blank lines are skipped. A line is at most
// Options.MaxMessageBytes (10 MiB, 10485760 bytes, the newline not
// counted): a longer one is answered with -32600 (id null, data.reason
// "message_too_large") and the connection is closed, since the rest of
// the line cannot be read as a message and the request's id is unknown;
// the server never buffers more than the limit. Batches (a JSON array)
// are refused with -32600 (data.reason "batch_not_supported"): the
// contract frames one message per line. A line that is not JSON gets
// -32700; JSON that is not a JSON-RPC 2.0 request or notification (not an
// object, jsonrpc not "2.0", no method or not a string, an id that is not
// a string, number or null, params that are not an object or array, an
// unknown member, a response object) gets -32600 with the request's id
// when it can be read, else null. A request whose id is that of a request
// still in progress on the connection (not yet answered) gets -32600
// (data {reason: "duplicate_id", id}); an answered request's id may be
// used again. A connection that ends inside a line
// gets -32700 for it and is closed. The server answers with responses and
// sends notifications; it sends no requests.
//
// Handshake. initialize must come first (anything else gets -32600, data
// .reason "not_initialized"; notifications are dropped) and once (again:
// -32600). protocol_version is required and is a semantic version
// (MAJOR[.MINOR[.PATCH]] with optional -pre-release and +build parts).
// A major version other than 1 is refused with -32602, whose message
// names both versions and whose data is {"reason":
// "unsupported_protocol_version", "requested", "supported": "1.x",
// "server_version"}; the connection stays open for another initialize.
// The result adds protocol_version (the lower of the client's and the
// server's, ProtocolVersion) and limits {max_message_bytes,
// max_requests_per_second, max_concurrent_queries}. models lists every
// model of every loaded provider as "PROVIDER:MODEL", type "embedding"
// (embeds only), "code" (a name with code/coder in it) or "chat", loaded
// as the provider reports it, and current: true for the engine's current
// model; the list is cached for 30 s, and a provider that does not answer
// within 2 s (or fails) is left out, and the list then not cached; one
// that is not configured (OpenAI without an API key or a base URL) is
// left out without being contacted. Client capabilities: "streaming" and
// "tool_approval" are honoured (without tool_approval, calls that need
// approval are denied by policy); a client that sends no capabilities
// array gets everything. terminal_size is kept; config is accepted and
// ignored.
//
// Sessions. Each connection has its own engine session, started in
// Options.Workspace by its first agent.query or session.save; clients never
// share one. The queries of a connection are one conversation: they run
// one after another in the order they were accepted; different
// connections run concurrently. When the connection closes its queries
// are cancelled and its sessions are closed in the engine (a session
// store keeps them).
//
// agent.query. The result {query_id: "q-" and 12 hex digits, status:
// "processing"} is written before any notification of the query (the
// query waits for it). message is required. context is merged into the
// connection's terminal context (context.update's too: members present
// replace the old ones) and reaches the model as a "[Terminal context]"
// section after the message: the working directory, the shell, the last
// 10 recent_commands with exit codes and the last 8 KiB of recent_output.
// env is never sent to the model (it may hold secrets). open_files,
// relative to cwd, become the engine's open editors (files outside the
// workspace are left out). options.stream false (or a client without
// "streaming") sends no tokens; the answer comes as one text block
// instead. options.model (beyond the contract) picks PROVIDER:MODEL for
// the query. max_tokens, temperature and tools_enabled are accepted and
// not applied: the engine has no per-turn sampling options or tool
// switch. require_approval: false does not skip approvals; the workspace
// policy decides. A query runs at most Options.QueryTimeout (30 minutes)
// and then ends with status timeout.
//
// Notifications. Each carries query_id (tool.progress and tool.complete
// too, beyond the contract). ThinkingEvent becomes agent.thinking (the
// engine's retrieving phase, and retrieval progress, are reported as
// analyzing; a plan as planning). TokenEvent becomes stream.token
// {query_id, token, index, metadata: {type: "text"}}; index counts the
// query's tokens from 0; confidence is left out (models do not report
// it). stream.block's types: code (a fenced block of the answer, sent as
// soon as its closing fence streams; an unterminated one at the end of a
// reply, with metadata.unterminated), diff (a patch the edit tools
// propose, one block per file with metadata {file, op, patch_id,
// patch_set_id, requires_approval}, and ```diff fences), text (the plan,
// a patch's outcome, and the answer when not streaming), error (a
// recoverable engine error that is not a tool call's, e.g. a store
// failure), tool_output (a completed call's output: a file's content,
// stdout and stderr, else the result JSON; at most 64 KiB) and
// interactive (each approval request, beside tool.request_approval).
// block_id is "block-N", counted per connection. A tool call goes out as
// tool.progress {status "started", percentage 0}, then "processing" with
// its percentage and message (and output chunks as progress.output
// {stream, text}, beyond the contract), then tool.complete {status
// "success", result {output, files_modified, duration_ms, summary}} or
// {status "error" | "denied" | "cancelled" | "timeout", result {error:
// {code, message, details}}} with the codes below. An unrecoverable
// engine error becomes stream.error {error: {code, message: the table's
// description, details: the engine's message}}. Every query ends with
// exactly one stream.complete: status success, error, cancelled or
// timeout, metadata {total_tokens (the model's completion count, else the
// tokens streamed), tokens_per_second, tools_executed, model_used,
// duration_ms} plus prompt_tokens, completion_tokens, files_modified and,
// unless successful, error. A query the engine refuses to start (an
// unknown model) gets stream.error then stream.complete error.
//
// Approvals. execution_id is the tool call's id, the same in
// tool.request_approval, tool.progress and tool.complete; an approval of
// no single call (a patch set, tool "apply_patch" with arguments
// {patch_set_id, files, rationale} and a diff preview) uses the
// engine's request id. tool.category is file_system, shell, search,
// network, planning or other; risk_assessment is the engine's (low,
// medium, high, critical); timeout is Options.ApprovalTimeout in seconds
// (5 minutes), after which the call is denied. tool.approve answers it:
// approved true or false (required), options.remember_choice and
// apply_to_similar are stored as workspace policy rules (the engine's
// ApprovalDecision.Remember and ApplyToSimilar), reason (beyond the
// contract) is shown to the model on a rejection. Its result {status:
// "approved" | "rejected", execution_id} is written before the call goes
// on. Answering an unknown execution is -32602, an answered one -32602
// (data.reason "already_answered"), one whose query was cancelled -32004,
// one that timed out -32003.
//
// Cancellation. agent.cancel cancels a running or waiting query: {cancelled:
// true, query_id}, written before the query's stream.complete {status:
// cancelled}. A query that is not in progress (completed, or unknown)
// gives {cancelled: false, query_id, reason}.
//
// Batching. Notifications wait in a per-connection queue written by one
// goroutine, so the engine never waits for the client. When tokens queue
// up (the client, or the socket, is slower than tokens arrive), adjacent
// tokens of one query go out as one stream.tokens {query_id, tokens:
// [{token, index}]} (at most 1024 tokens or about 1 MiB of text each),
// in order with the other notifications; a token that finds the queue
// empty goes out alone as stream.token. A client more than
// Options.MaxQueueBytes (64 MiB) behind, or one whose socket accepts
// nothing for Options.WriteTimeout (1 minute), is disconnected: any write
// that fails (a response's or a notification's) closes the connection at
// once, and nothing is written after it, so a message cut by the failure
// is the last thing the client reads (without its newline) before the
// connection ends. A notification over the message limit is dropped and
// logged, except tool.request_approval: its arguments become
// {"truncated": true, "bytes", "excerpt"}, its preview and tool
// description are cut (preview.truncated, beyond the contract) to fit;
// one that still cannot fit is not sent and the call is denied at once.
//
// Limits and codes. The contract's limits are the defaults: messages of 10
// MiB (above), 100 requests per second per connection (a token bucket of
// 100 refilled at 100 per second; every line counts; a request over it
// gets -32000 with data {reason: "rate_limited", limit_per_second,
// retry_after_ms}, a notification over it is dropped), 3 concurrent
// queries per connection (queries accepted and without their
// stream.complete; a fourth gets -32000 with data {reason:
// "too_many_queries", limit: 3}). Both limits are applied to requests in
// the order they arrive, as each line is read (before the requests are
// handled concurrently, see Concurrency): of queries sent back to back
// the first three are accepted and the fourth refused, every time, and
// accepted queries run one after another in that order. The table's codes are used thus: -32700
// invalid JSON; -32600 invalid JSON-RPC, batches, an oversized message,
// before or repeated initialize, a duplicate request id; -32601 unknown
// methods; -32602 invalid params (a missing or mistyped member, named in
// the message and data.field), an unsupported protocol version, a refused
// session path or file; -32603 server failures (a session store, a session
// file write); -32000 limits, shutdown, a busy connection, and engine
// errors without a closer code; -32001 model errors; -32002 tool failures;
// -32003 timeouts; -32004 cancelled operations; -32005 permission denied
// (a denied tool call, a session path outside the allowed directories, a
// save over a file that is not a session file). Error responses' messages
// start with the table's message ("Invalid params: ..."); data is an
// object, with reason where codes are shared.
//
// session.save and session.load. A path is required for load; save
// without one writes Options.SessionDir/SESSION_ID.json. A relative path
// is relative to SessionDir and may not climb out of it. A path must end
// in .json, its directory must exist (SessionDir is created, 0700), it
// must not be a symlink or anything but a regular file, and, symlinks of
// its directory resolved, it must lie inside SessionDir or one of
// Options.SessionRoots (default the user's home directory), else -32005.
// save replaces an existing file only when it reads as a session file
// envelope ({"format": "plexus-session", "version", "checksum",
// "session"} and nothing else, any version, the checksum unchecked);
// anything else there (a package.json, a settings file) is left alone and
// refused with -32005 (data.reason "not_a_session_file").
// The file is written atomically: a temporary file in the same directory
// (mode 0600), synced, renamed over the path, and the directory synced.
// It holds {"format": "plexus-session", "version": 1, "checksum":
// "sha256:HEX", "session": {id, created, saved (Unix seconds),
// workspace {id, root}, protocol_version, messages_count, history (the
// engine's messages, null without include_history), blocks (the
// connection's stream.block params, at most 2000 and 8 MiB, null without
// include_blocks), context {cwd, shell, terminal_size}}}; the checksum is
// over the session in compact form; include_history and include_blocks
// default to true. size is the file's length in bytes. load reads at most
// 64 MiB without following a symlink and refuses with -32602 (data.reason
// "corrupt_session_file") a file that is not JSON, has unknown members or
// trailing data, another format, another version (a newer one is named
// as such), a checksum that does not match, an empty id, a bad time, an
// unknown message role, a tool message without its call id, a tool call
// without id, name or JSON arguments, or an unknown block type; a
// session saved in another workspace is refused with data.reason
// "workspace_mismatch". A loaded session is a new engine session (a new
// id; source_id, beyond the contract, is the saved one; created is the
// saved time) with the saved history, and becomes the connection's
// session; the saved blocks are kept for the next save. load is refused
// (-32000, "busy") while a query is in progress. The session is started
// with engine.Engine.ImportSession (kept in the engine's session store
// when it has one); a history the engine refuses is -32602.
//
// suggestion.inline. Computed by deterministic rules, never a model call,
// when a context.update (or a query's context) shows that the last of
// recent_commands failed (a non-zero exit_code), and sent once per failed
// command: the correction the output names ("Did you mean `test`?", git's
// "most similar command"; confidence 0.9, source "command_output"); an
// earlier successful command that extends the failed one (0.87,
// "command_history"); a "command not found" program within two edits of
// one used before or a common one (0.75, "typo_correction"); a failed
// test run again with its output shown (cargo test -- --nocapture, go
// test -v, pytest -vv -s, npm test -- --verbose; 0.6, "rules"). context
// says why. Only the last 50 earlier commands are looked at, and a
// program name longer than 64 bytes is not corrected. context.update accepts every member of agent.query's context
// (recent_commands, recent_output, shell, open_files) besides cwd, env and
// terminal_size; sent as a request it is answered {"updated": true}.
//
// Search (beyond the contract). search.text and search.symbols answer
// from the engine's code index (engine.Engine.Searcher), the code path of
// the search tools and of the HTTP front-end's search endpoint.
// search.text takes {pattern (required), regex, case_insensitive, path,
// include, context_lines (0 to 20), limit, stream}: limit defaults to 100
// and 0 asks for every match; the result is {matches, match_count,
// files_searched, truncated}, truncated true exactly when the limit cut
// matches. With stream true the matches go out instead as search.matches
// notifications {request_id, matches} (at most 1000 matches or about 1
// MiB each), every one written before the result, which then leaves
// matches out. search.symbols takes {query (required), kind, path,
// include_refs, limit (1 to 1000, default 20)} and answers {symbols}.
// Both search Options.Workspace; with Options.AnyWorkspace (the per-user
// search server plexus search starts) workspace_root, an absolute
// directory, names another. A bad pattern is -32602.
//
// Shutdown. Shutdown stops accepting and removes the socket file, cancels
// every query (each ends with stream.complete cancelled), writes what is
// queued, closes the connections and returns; when its context ends first
// the rest are closed at once. Close does it all at once.
//
// Concurrency. Requests of a connection are handled concurrently (answers
// may come in any order; match them by id); notifications (context.update)
// are handled in order before the requests after them. Send a request that
// depends on another after its response.
package unixrpc
