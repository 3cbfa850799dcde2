// Package mcp makes configured Model Context Protocol servers a tool
// source of the engine: Toolset is an engine.Toolset over their tools, so
// the engine lists, describes, judges by policy, approves and invokes MCP
// tools through the same path as tool plugins. It is a client of the
// official SDK, github.com/modelcontextprotocol/go-sdk.
//
// Configuration (LoadConfig, ParseConfig) is a JSON file in the shape
// Claude Desktop and VS Code use:
//
//	{"mcpServers": {
//	  "fs":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/work"],
//	          "env": {"K": "V"}, "cwd": "/work", "timeout": "60s"},
//	  "web": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer T"}}
//	}}
//
// A server has "command" (stdio: the SDK's CommandTransport, newline-
// delimited JSON-RPC on the server's stdin and stdout) or "url" (the SDK's
// StreamableClientTransport), never both. Decoding is strict: unknown keys,
// wrong types, both or neither of command and url, a bad URL or duration
// are *ConfigError values naming the field ("mcpServers.fs.args"). Server
// names match ^[a-z0-9][a-z0-9_-]*$, have at most 24 bytes and no "__".
// A stdio server gets the environment plugins get (plugins.DefaultEnv,
// plus Options.Env: the names in $PLEXUS_PLUGIN_ENV for plexus), so the
// engine's API keys do not reach it, plus its "env". In "env" and
// "headers" values, and nowhere else, ${env:NAME} is replaced by the
// engine's variable NAME (VS Code's syntax; unset is empty, and logged),
// so a server gets the one secret it needs ("GITHUB_TOKEN":
// "${env:GITHUB_TOKEN}") without it being written in the file. A relative
// "cwd" is relative to the file's directory. The deprecated HTTP+SSE
// transport is refused.
//
// Tool names: the engine name of tool T of server S is S__T, valid for
// OpenAI-style APIs (^[a-zA-Z0-9_-]{1,64}$). Characters of T outside that
// set become '_'; when that happens, or the name would exceed 64 bytes,
// it is cut to fit and suffixed with '_' and 8 hex digits of the SHA-256
// of T (ToolName). Server names cannot contain "__", so names of
// different servers never collide; Invoke maps a name back through the
// table built by the last Tools call, not by parsing. A collision that is
// left (two hash suffixes alike) is reported in Tools' error. Collisions
// with plugin tools are the combinator's to report (plugins.Union).
//
// Policy: MCP tool annotations set the spec, with the MCP defaults
// (readOnlyHint false, destructiveHint true, openWorldHint true):
//   - readOnlyHint true: ReadOnly, no approval, risk low (medium when
//     openWorldHint is not false: it reaches outside the machine);
//   - otherwise NeedsApproval, risk high when destructive or open-world,
//     medium for an additive tool of a closed world.
//
// The engine's policy then judges the call as it judges a plugin's;
// nothing MCP-specific enters the engine. Path arguments named "path"
// reach the policy as the engine sees them: give a filesystem server
// workspace-relative paths (server-filesystem resolves them against its
// first allowed directory).
//
// Calls: each call has the server's "timeout" (default Options.CallTimeout,
// 60 s; plexus passes its --tool-timeout), never beyond its context's
// deadline, and the server's tool specs carry it (engine.ToolSpec.Timeout)
// so that the engine's deadline is the same; on timeout or cancellation
// the SDK sends notifications/cancelled. A call carries a progress token;
// notifications/progress become engine.ToolProgress updates (percentage
// when the server gives a total). The result the model sees is a JSON
// object {"text": joined text blocks, "structured": structuredContent
// verbatim, "attachments": [summaries of images, audio, resource links and
// embedded resources (a text resource keeps its text; binary data is
// reduced to its size)]}. An isError result is a *engine.ToolError (code
// failed) carrying the tool's text, so the model can correct itself; a
// JSON-RPC invalid-params error is code invalid_input.
//
// Lifecycle: servers start on first use (Tools, Invoke or Describe),
// concurrently, within Options.StartTimeout including the first
// tools/list. A server that fails to start is left out with an error that
// says what to fix (command not found, the tail of its stderr when it
// exited, a refused HTTP connection), without affecting the other
// servers. A stdio server that exits, or an HTTP session that is lost, is
// noticed by the SDK's connection; a call it interrupts returns a
// *engine.ToolError with code plugin_crashed (errors.Is
// engine.ErrPluginCrashed), and the next call reconnects after an
// exponential backoff (Options.MinBackoff doubling to MaxBackoff; a
// connection that lasted HealthyAfter resets it). After a failed start,
// calls get that error at once until the backoff has passed. The client
// announces no roots, sampling or elicitation capability. A
// notifications/tools/list_changed makes the next Tools call list the
// server's tools again.
//
// Processes: a stdio server is contained as the plugin host contains a
// third-party plugin (package plugins/contain): the first process of a PID
// namespace of its own where the system allows one, so that everything it
// starts (npx's node, a daemon that calls setsid) ends when it exits, when
// Close stops it and when the engine dies, even by SIGKILL; otherwise it
// leads a session of its own, killed as a whole by Close. Its stdin and
// stdout carry the protocol. Close ends each session as the SDK's
// CommandTransport does (close stdin, wait, SIGTERM, wait, SIGKILL to the
// server process, each wait Options.TerminateTimeout; as its namespace's
// first process a server only receives the SIGTERM if it handles it, so
// one that ignores its closed stdin is killed after the second wait) and
// then kills what is left. The HTTP client sends
// DELETE for the session. A stdio server's stderr goes to the logger, one
// record per line, and its last lines into start and crash errors; never
// to the engine's stdout.
package mcp
