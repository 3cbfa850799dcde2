#!/usr/bin/env node
// fix-turn.mjs: runs one /fix turn against `plexus serve --transport http`
// with the `ws` WebSocket library, approving every patch the agent proposes.
//
//   node fix-turn.mjs --url http://127.0.0.1:3199 --token TOKEN \
//     --session ses_... [--message "Fix the failing test"]
//
// The token may come from PLEXUS_TOKEN instead of --token. Each server
// message type is printed on stderr as it arrives; at the end one JSON line
// on stdout sums the turn up:
//
//   {"types": [...], "final": {...}, "state": {...}, "patch_result": {...}}
//
// The exit status is 0 after the turn's assistant.message_final and the
// session.state that follows it, else 1 (unrecoverable server.error, the
// connection closing early, a seq going backwards, or no answer in 60 s).

import { parseArgs } from "node:util";
import WebSocket from "ws";

const TIMEOUT_MS = 60_000;

const { values: args } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:3199" },
    token: { type: "string", default: process.env.PLEXUS_TOKEN ?? "" },
    session: { type: "string" },
    message: { type: "string", default: "Fix the failing test" },
  },
});
if (!args.token || !args.session) {
  console.error("usage: node fix-turn.mjs --url URL --token TOKEN --session SESSION_ID [--message TEXT]\n" +
    "(the token may also be given as PLEXUS_TOKEN)");
  process.exit(2);
}

// http://host:port -> ws://host:port/v1/sessions/{id}/stream (https -> wss).
const base = args.url.replace(/^http(s?):\/\//, "ws$1://").replace(/\/+$/, "");
const streamURL = `${base}/v1/sessions/${encodeURIComponent(args.session)}/stream`;

// The /fix message with the context an editor gathers: the diagnostic, the
// failing test run and where the cursor is.
const fixMessage = {
  type: "client.user_message",
  message: args.message,
  context: {
    active_editor: {
      file_path: "calc.go",
      language: "go",
      selection: { start: { line: 5, character: 0 }, end: { line: 5, character: 13 } },
      visible_range: { start: 0, end: 7 },
    },
    diagnostics: [
      {
        file_path: "calc_test.go",
        severity: "error",
        message: "Add(2, 3) = -1, want 5",
        line: 6,
        character: 2,
        source: "go test",
      },
    ],
    terminal_output: {
      command: "go test ./...",
      exit_code: 1,
      stdout: "--- FAIL: TestAdd\n    calc_test.go:7: Add(2, 3) = -1, want 5\nFAIL",
      stderr: "",
      timestamp: "2026-11-21T10:30:45Z",
    },
    command: "/fix",
  },
};

const types = []; // every server message type, in order
let lastSeq = 0;
let helloSeen = false;
let final = null; // assistant.message_final
let patchResult = null; // the last patch.result
let done = false;

const ws = new WebSocket(streamURL, {
  headers: { Authorization: `Bearer ${args.token}` },
});

const timer = setTimeout(() => {
  fail(`timed out after ${TIMEOUT_MS / 1000}s waiting for the turn to end (saw ${types.join(", ")})`);
}, TIMEOUT_MS);

const send = (msg) => ws.send(JSON.stringify(msg));

ws.on("open", () => {
  send({
    type: "client.hello",
    client_info: { name: "plexus-ws-node-example", version: "1", capabilities: [] },
  });
});

ws.on("unexpected-response", (_req, res) => {
  fail(`the server refused the WebSocket upgrade: HTTP ${res.statusCode} ${res.statusMessage}`);
});

ws.on("error", (err) => fail(`WebSocket error: ${err.message}`));

ws.on("close", (code, reason) => {
  if (!done) {
    fail(`connection closed before the turn ended (code ${code}${reason.length ? `, ${reason}` : ""}); saw ${types.join(", ")}`);
  }
});

ws.on("message", (data) => {
  if (done) return;
  let msg;
  try {
    msg = JSON.parse(data.toString());
  } catch {
    return fail(`the server sent something that is not JSON: ${data}`);
  }
  types.push(msg.type);
  console.error(`<- ${msg.type}`);

  // seq only grows: it is the resume point after a reconnect.
  if (typeof msg.seq === "number") {
    if (msg.seq < lastSeq) return fail(`seq went back from ${lastSeq} to ${msg.seq} at ${msg.type}`);
    lastSeq = msg.seq;
  }

  switch (msg.type) {
    case "server.hello":
      // The session is ready: ask for the fix.
      helloSeen = true;
      send(fixMessage);
      break;
    case "tool.request_approval":
      console.error(`   approving ${msg.tool_name} (${msg.description ?? msg.request_id})`);
      send({ type: "client.approval_response", request_id: msg.request_id, approved: true, scope: "all" });
      break;
    case "patch.result":
      patchResult = msg;
      break;
    case "server.error":
      console.error(`   ${msg.error?.code}: ${msg.error?.message}`);
      if (msg.error?.recoverable === false) return fail(`unrecoverable server error ${msg.error.code}: ${msg.error.message}`);
      break;
    case "assistant.message_final":
      final = msg;
      break;
    case "session.state":
      // The state sent after the final message is the turn's outcome (the
      // one right after server.hello is the state before the turn).
      if (helloSeen && final) finish(msg.state);
      break;
  }
});

// finish prints the summary line and closes the connection cleanly.
function finish(state) {
  done = true;
  clearTimeout(timer);
  const summary = { types, final, state, patch_result: patchResult };
  process.stdout.write(JSON.stringify(summary) + "\n", () => {
    ws.once("close", () => process.exit(0));
    ws.close(1000, "turn done");
    setTimeout(() => process.exit(0), 2000).unref(); // if the close handshake stalls
  });
}

// fail reports why the turn did not complete and exits with status 1.
function fail(why) {
  if (done) return;
  done = true;
  clearTimeout(timer);
  process.stderr.write(`fix-turn: ${why}\n`, () => process.exit(1));
}
