// Package acp serves the engine over the Agent Client Protocol, version 1
// (agentclientprotocol.com; schema/v1 of agentclientprotocol/
// agent-client-protocol): JSON-RPC 2.0 on the agent's stdin and stdout,
// one message per line, the agent spawned by the editor. Zed, the
// JetBrains IDEs, Neovim (CodeCompanion, avante.nvim) and Emacs
// (agent-shell) are such editors.
//
// Usage (what `plexus serve --transport acp` does):
//
//	srv := acp.New(acp.Options{Engine: eng, Logger: logger}) // and Patches, MCP: see Options
//	err := srv.Serve(ctx, os.Stdin, os.Stdout)
//
// The JSON-RPC connection, the wire types and their validation are
// github.com/coder/acp-go-sdk's (types generated from the ACP schema).
// The SDK logs and drops input lines it cannot parse, and ends the
// connection on a line longer than its 10 MiB buffer, so every line passes
// this package's guard first (framing.go), which answers those itself.
// The engine's events become session/update notifications in one place,
// mapper.updates (mapping.go); the engine asks the client for things
// through the engine.Host of host.go.
//
// # Initialization
//
// initialize answers protocolVersion 1 (whatever the client asks; a client
// that cannot speak 1 closes the connection), agentInfo {name: "plexus",
// title: "Plexus", version}, no authMethods, and agentCapabilities:
// loadSession true when the engine stores sessions (the CLI always does,
// in DATA_DIR/plexus.db), promptCapabilities {embeddedContext: true}
// (text and resource links are the baseline; images and audio are not
// accepted), mcpCapabilities {http: true} (stdio is the baseline; SSE,
// deprecated by MCP, is not offered), sessionCapabilities {list, close,
// resume (with a session store)}. The client's capabilities decide which
// client methods are used: fs.readTextFile, fs.writeTextFile, terminal.
// authenticate is refused with -32602 saying that no authentication is
// needed (the agent runs locally with the user's own model
// configuration); logout is not offered (-32601).
//
// # Sessions
//
// session/new {cwd, mcpServers} opens the workspace at cwd (an absolute
// path of a directory; symlinks resolved; -32602 otherwise) and starts an
// engine session in it. additionalDirectories is not supported (-32602).
// mcpServers (stdio and http) become the session's own tool source
// through Options.MCP (plugins/mcp in the CLI: server S's tool T is the
// tool S__T, judged by the workspace policy like any tool, its call shown
// as a tool call), started on first use and stopped when the session
// closes or the connection ends. The answer carries the session's modes
// and configOptions; available_commands_update follows it (after the
// response, so that the client knows the session).
//
// session/load {sessionId, cwd, mcpServers} makes a stored session active
// on the connection (after a restart too) and replays it before answering:
// each turn's user message as user_message_chunk (from the stored
// history: the message as the model saw it, with the context the engine
// added), then the turn's stored events through the same mapping as a
// live turn (agent_message_chunk, agent_thought_chunk, plan, tool_call
// and tool_call_update with diffs and outcomes). cwd must be the
// session's workspace (-32602 naming it otherwise). session/resume does
// the same without the replay. An unknown session id is -32002 (ACP's
// "Resource not found"), as is a request naming a session that is not
// open on this connection (load it first).
//
// session/list lists the stored sessions, newest first, 100 per page
// (nextCursor is opaque; a cursor this agent did not give is -32602),
// those of cwd's workspace when cwd is given. title (the first prompt's
// first line) and updatedAt are known for sessions that ran a prompt in
// this process; _meta.created is the session's creation time.
// session/close cancels the session's prompt, stops its MCP servers and
// forgets it on the connection (it stays stored).
//
// # Prompts
//
// session/prompt runs one engine turn. Its content blocks become the
// turn's input (turnInput in prompt.go): text is the message; a message
// starting with /fix, /test, /explain or /refactor (the commands of
// available_commands_update) sets the turn's slash command
// (engine.TurnContext.Command); a resource_link to a file inside the
// workspace is an @-mention whose content the engine adds within its
// context budget, one outside is an attachment; an embedded text resource
// (the editor's text, unsaved changes included) is added to the message,
// fenced, cut at 256 KiB; images and audio are -32602. A prompt that
// arrives while one runs cancels that one (it answers cancelled) and runs
// after it.
//
// The answer is stopReason end_turn (the model answered), cancelled
// (session/cancel, a cancelled permission request, or a newer prompt;
// the answer comes once every update of the turn has been sent) or
// max_turn_requests (the engine's step limit, --max-steps). A turn that
// fails (the model's provider failed, a timeout) answers -32603 with the
// engine's reason and data {status, turn_id}.
//
// # The event mapping (mapping.go)
//
//   - token: agent_message_chunk.
//   - thinking and retrieval: agent_thought_chunk, one line each ("Reading
//     the request", "text_search: 40 chunks match ...").
//   - plan (update_plan): plan, every entry with priority medium (the
//     engine's steps have none) and its status; the files a step involves
//     follow its description.
//   - tool_call: a tool_call when the call is first seen (pending when it
//     waits for approval, else in_progress), then tool_call_update.
//     title says what the call does and names what it touches ("Read
//     README.md (lines 1-40)", "Edit args.go", "Run `go test ./...`");
//     rawInput is the model's arguments; locations are the absolute paths
//     its "path", "file_path", "paths" and "cwd" arguments name (with the
//     start line), and for a search the files it found; kind is read,
//     edit, delete, search, execute, fetch, think (update_plan) or other,
//     from the tool's spec and name; _meta.tool_name is the tool's name
//     (ACP v1 has no field for it). Streamed output and progress show as
//     the call's text content (the last 16 KiB); a completed call shows
//     its summary and has the result as rawOutput; a failed or denied one
//     says why.
//   - Edit calls (write_file, edit_file, delete_file) propose: their
//     proposal does not end them. When the response's patch set is
//     proposed, each edit call shows its diffs (content of type diff, with
//     the absolute path and the whole old and new text) and is pending;
//     the patch's result ends it, completed when a file it proposed was
//     applied, failed otherwise.
//   - Every call the turn leaves open is ended failed when the turn ends,
//     saying why: no tool call is left pending or in progress.
//   - error: recoverable errors without a tool call (retrieval failed, a
//     store failure) are a "Warning: ..." thought; those of a tool call or
//     patch show on it; the error that ends a turn is the prompt's answer.
//   - usage_update: after a turn whose provider reported tokens, when the
//     model's context window is known (the provider lists its context
//     length): used is the turn's prompt and completion tokens as the
//     engine sums them over the turn's model calls, size the window.
//
// # Approvals, modes and remembered rules
//
// What the workspace policy asks about goes to the client as
// session/request_permission with the options allow_once, allow_always,
// reject_once and reject_always, on the tool call it is about (title,
// kind, locations, rawInput, and the command line or preview). A patch
// set is asked about file by file, on the edit call that proposed each
// file, with its diff: the files allowed are applied (an approval of
// scope "file"), the others not. allow_always and reject_always become
// remembered policy rules, as on the other front-ends; for a patch set
// the rule is remembered when every file's answer was "always" of the
// same kind (the engine remembers one rule per decision). The "cancelled"
// outcome cancels the prompt. With serve --approve-all nothing is asked.
//
// The modes (session/set_mode, and the "mode" config option, category
// mode; current_mode_update confirms a change made through the config
// option): ask (the default: the policy decides, then the editor is
// asked), accept_edits (patch sets are applied without asking; commands
// and other changes still ask), read_only (every change is refused,
// whatever the policy allows: engine.TurnOptions.ReadOnly). A session's
// mode lives on the connection: a loaded session starts in ask. The "model"
// config option (category model) lists the models of the loaded providers
// that can chat and call tools (or do not say), and the current one;
// setting it checks the model (engine.Session.SetModel) and refuses one
// the provider does not list with -32602 saying why.
//
// # Client methods
//
//   - fs/read_text_file, when the client offers it: read-only tool calls
//     read the editor's buffers of the files they name (engine.BufferReader:
//     read_file, the edit tools computing their proposal), so the model
//     sees unsaved changes. Files over 4 MiB and binary files are read from
//     the disk.
//   - fs/write_text_file, when offered: approved patches are written by the
//     editor (engine.PatchApplier), so its buffers and undo stay in step.
//     Each file must still hold what the patch was computed from (read
//     through fs/read_text_file when offered), else nothing is written and
//     the patch reports a conflict; a deleted file is removed from the
//     disk (ACP cannot delete). The undo record is kept in Options.Patches
//     either way, so `plexus undo` takes the change back. Applying single
//     hunks through the editor is refused (the permission prompts approve
//     whole files).
//   - terminal/*, when offered: in a workspace whose policy runs commands
//     in the local terminal ("commands": {"mode": "local_terminal"}),
//     approved commands run in the editor's terminal (terminal/create with
//     /bin/sh -c COMMAND in the command's directory, the terminal shown on
//     the tool call, terminal/wait_for_exit, terminal/output,
//     terminal/release; terminal/kill when the turn is cancelled).
//     Otherwise (the default, server_runner) they run in Plexus's sandbox.
//
// # Errors and bad input
//
// A line that is not JSON gets -32700 (id null); a line over
// Options.MaxMessageBytes (8 MiB) gets -32600 (id null) and is skipped
// without being held in memory; JSON that is not one JSON-RPC 2.0 message
// gets -32600 naming the problem. The SDK answers an unknown method with
// -32601 (an unknown notification is logged), params that do not decode
// into the method's type with -32602. Requests before initialize get
// -32600. The connection keeps serving after each of these.
//
// # Shutdown
//
// The end of the input (the editor closed the pipe) or of Serve's context
// cancels the running prompts, waits up to 10 s for their answers, and
// stops the sessions' MCP servers.
package acp
