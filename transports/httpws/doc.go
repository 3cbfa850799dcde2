// Package httpws is the HTTP + WebSocket front-end of protocols/
// http-websocket-sessions.md: the desktop-host server on port 3199 that
// the VS Code extension talks to. plexus serve --transport http runs it.
//
// The REST part (workspaces, policies, index, sessions, models under /v1)
// is described by schemas/openapi.json (OpenAPI 3.1); every WebSocket
// message has a JSON Schema in schemas/ws/. Request bodies and client
// messages are validated against those schemas, so a 400 or a server.error
// names the offending member as a JSON pointer in details.field.
//
// # Choices the contract leaves open
//
//   - Authentication: every endpoint, /v1/health included, and the
//     WebSocket upgrade need Authorization: Bearer TOKEN; anything else is a
//     401 with WWW-Authenticate: Bearer. The token is compared in constant
//     time. LoadOrCreateToken generates it on first start (32 random bytes,
//     base64url) into a 0600 file.
//   - Error bodies: {"error": {"code", "message", "details"}}, the
//     server.error shape without recoverable. Codes: UNAUTHORIZED,
//     INVALID_REQUEST, NOT_FOUND, CONFLICT, PAYLOAD_TOO_LARGE, MODEL_ERROR,
//     MODEL_UNAVAILABLE, INDEX_FAILED, INTERNAL; WebSocket errors add
//     INVALID_MESSAGE, SESSION_BUSY and the engine's codes (MODEL_ERROR,
//     TOOL_ERROR, POLICY_VIOLATION, RETRIEVAL_FAILED, CANCELLED, ...).
//     File watcher events (POST .../index/incremental and
//     client.file_changes) go through one schema and one check: a path
//     outside the workspace is the client's error (400 INVALID_REQUEST
//     naming the field; POLICY_VIOLATION on the stream) and nothing is
//     indexed; INDEX_FAILED is the index's own failure. A workspace_id
//     query parameter naming no workspace (GET /v1/sessions) is 400.
//   - Search (beyond the contract): POST /v1/workspaces/{id}/search
//     answers text searches (mode text: a literal or an RE2 expression,
//     line by line; limit 0 for every match, truncated exactly when the
//     limit cut matches) and symbol searches (mode symbols) from the
//     engine's code index (engine.Engine.Searcher), the code path of the
//     search tools and of the Unix socket's search.text. With Accept:
//     application/x-ndjson a text search streams a line per match, then
//     {"done": ...}.
//   - Models (beyond the contract): PUT /v1/models/current switches the
//     server's current model, which sessions without a model of their own
//     use; with "session_id" in the body it switches only that session's
//     later turns (kept in plexus.db), and GET /v1/models/current?session_id=
//     answers for that session, as does its server.hello. The model must be
//     listed by its provider and, when the provider reports capabilities,
//     chat and call tools (natively or, for Ollama, through constrained
//     decoding); otherwise the 400 MODEL_ERROR names /model_name and the
//     missing capability. A provider that is not configured is a 400
//     MODEL_ERROR naming /provider.
//   - Model listings: GET /v1/models asks every provider at once
//     (engine.AllModels); "errors" holds the providers that failed and
//     "not_configured" those that lack configuration (OpenAI without an
//     API key or a base URL, replay without scripts), which are not
//     contacted. A model's capabilities are the provider's words
//     (completion, tools, embedding, constrained_tools, vision, ...; none
//     when the provider does not say, as OpenAI's API does not), the same
//     in GET /v1/models, GET /v1/models/current and server.hello's
//     server_info.model (where the contract's example shows "chat"). The
//     replay model in use is listed like any other.
//   - Streamed text: a turn makes one model call per step, and each call
//     writes one assistant message (the ones GET /v1/sessions/{id} lists,
//     between the tool calls). assistant.token's cumulative_text is the
//     text of the message being written: it starts again with the first
//     token of each model call, so a client shows each message as its
//     own block, before the tool calls it made, and never glues two
//     together. assistant.message_final's message is the turn's last
//     message, the answer: the last token's cumulative_text, exactly
//     (or, for a turn that did not complete, what ended it).
//   - Handshake: the client speaks first with client.hello (within 30 s);
//     other messages before it get server.error. The server answers
//     server.hello, then replays (see below), then session.state, then
//     live messages.
//   - Sequence numbers (beyond the contract): every server message has
//     "seq". A message made from an engine event carries the event's
//     session-wide sequence number and "turn_id"; one event may become
//     several messages with the same seq (patch.proposed is one message per
//     file). Other messages (server.hello, session.state, errors about the
//     client's own messages, index.updated) carry the seq of the last event
//     sent on that connection, so the highest seq a client has seen is
//     always its resume point.
//   - Resumption (beyond the contract): connect to
//     /v1/sessions/{id}/stream?since=N, N the last seq seen, to receive
//     every stored event after N in order before the live ones, with
//     nothing missed or repeated: events are stored before they are
//     delivered, and the connection subscribes before it reads the store.
//     assistant.token's cumulative_text is rebuilt for a message resumed
//     in its middle (the session's earlier events are read for it). Without
//     since, the stream starts at the moment of connecting. A since beyond
//     the session's last event is a 400 naming the last one.
//   - One turn per session at a time: a client.user_message while a turn
//     runs gets server.error SESSION_BUSY (recoverable); the contract's
//     client shows one conversation per session, and a queued message
//     would run a turn the user may be about to cancel. Turns of different
//     sessions run concurrently.
//   - Several clients per session all receive the stream; any of them may
//     answer an approval (approval.resolved tells the others), send
//     client.cancel, or send results.
//   - Approvals: tool.request_approval for tools and patch sets (a patch
//     set is asked about as write_file, or delete_file when it only
//     deletes, with patch_set_id and patch_ids); command.request_approval
//     with requires_approval true for commands. client.approval_response
//     answers by request_id (for a command, its command_id works too).
//     scope "file" approves file_path (and file_paths); scope "hunk"
//     approves hunks (0-based indexes into patch.proposed's hunks) of
//     file_path, or hunks_by_file; anything else approves all.
//     remember_choice and apply_to_similar store the decision as a policy
//     rule. The engine's critical risk is reported as high.
//   - Patch approvals outlive their turn: after a restart (or when the
//     turn ended while the question was open) session.state still lists
//     them, and approving one applies the chosen part of the patch set on
//     the server with the same conflict checks; a second answer to the
//     same request is a CONFLICT or NOT_FOUND. Tool and command approvals
//     end with their turn. A scope of file or hunk that names nothing is
//     refused by the schema; an approval never covers more than it names.
//   - A turn whose session has had no client connected for
//     Options.OrphanTimeout (10 minutes by default) is cancelled, so a
//     question nobody can answer does not hold the session; its patch
//     approvals stay answerable.
//   - Client capabilities (client.hello): "terminal_exec" makes the
//     client run commands in its terminal when the workspace policy says
//     local_terminal: the server sends command.request_approval with
//     requires_approval false (after the approval, if one was needed) and
//     waits for client.command_result with that command_id. "patch_apply"
//     makes the client apply approved patches itself: the server waits
//     (up to ClientApplyTimeout) for one client.patch_apply_result per
//     approved file and checks its applied_hash against what the approved
//     hunks produce. Without these capabilities the server runs commands in
//     its sandbox and applies patches itself.
//   - Extensions the contract does not list: approval.resolved,
//     patch.result (applied, partially_applied, rejected, conflict or
//     failed, with the files), index.updated (the answer to
//     client.file_changes), tool.execute's call_id and progress (a running
//     tool's output goes out as status "started" with progress), the
//     metadata of assistant.message_final beyond the contract's four
//     members.
//   - Context: client.user_message's context is merged into what earlier
//     messages and client.context_update sent (members present replace the
//     old ones); the slash command applies to its own message only. The
//     engine gathers context by the command (engine.TurnContext).
//   - Limits: one client message or request body may be at most
//     Options.MaxMessageBytes (1 MiB by default); a larger WebSocket
//     message closes the connection with 1009 (message too big), a larger
//     body is a 413. A client that does not read its stream fast enough
//     (Options.SendQueue messages or Options.MaxQueueBytes bytes behind)
//     is disconnected with 1013 (try again later) and can resume with
//     ?since. At most Options.MaxConnections WebSockets are open at once
//     (256 by default; more get 503). client.file_changes runs in the
//     background, one update at a time per connection (another one meanwhile
//     gets CONFLICT), for up to 5 minutes. A turn waits up to
//     ClientCommandTimeout for a client.command_result and
//     ClientApplyTimeout for client.patch_apply_result.
//   - Shutdown: Shutdown stops accepting, lets running turns finish for
//     Options.ShutdownGrace, cancels the rest (they end cancelled, with
//     their events stored), writes what each stream has queued and closes
//     every WebSocket, greeted or not, with 1001 (going away). Deleting a
//     session cancels its turn and closes its streams with 1000.
//   - Logging: one slog line per request (method, path without the query,
//     status, duration) and per stream.
package httpws
