#!/usr/bin/env node
// load.mjs: many WebSocket sessions at once against `plexus serve
// --transport http`, with the `ws` library, as many editor windows would.
//
//   node load.mjs --url http://127.0.0.1:3199 --token TOKEN \
//     --workspace ws_... --sessions 100 --turns 3 [--approve]
//
// It creates --sessions sessions in the workspace (POST /v1/sessions),
// opens one stream per session, and runs --turns turns in each, all
// sessions at once, each turn after the previous one's final message.
// Tool approvals are granted with --approve and refused otherwise.
//
// One JSON line on stdout sums it up:
//
//   {"sessions": [{"id": "ses_...", "last_seq": 57, "turns": 3}], "turns": 300,
//    "failed_turns": 0, "server_errors": 0, "seq_gaps": 0, "elapsed_ms": 8123,
//    "turns_per_s": 36.9, "first_token_ms": {"p50": 41.2, "p99": 180.3, "n": 300},
//    "problems": ["..."]}
//
// first_token_ms is, per turn, the time from sending client.user_message
// to the first assistant.token of that turn, as the client sees it.
// A seq gap is a message of a turn whose seq is more than one above the
// previous one's (every event of a session reaches its stream, in order).
// Exit status 0 when every turn completed with no server.error and no gap,
// else 1.

import { parseArgs } from "node:util";
import WebSocket from "ws";

const TURN_TIMEOUT_MS = 120_000;

const { values: args } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:3199" },
    token: { type: "string", default: process.env.PLEXUS_TOKEN ?? "" },
    workspace: { type: "string" },
    sessions: { type: "string", default: "1" },
    turns: { type: "string", default: "1" },
    approve: { type: "boolean", default: false },
  },
});
const nSessions = Number(args.sessions);
const nTurns = Number(args.turns);
if (!args.token || !args.workspace || !(nSessions > 0) || !(nTurns > 0)) {
  console.error("usage: node load.mjs --url URL --token TOKEN --workspace WORKSPACE_ID --sessions N --turns N [--approve]");
  process.exit(2);
}
const base = args.url.replace(/\/+$/, "");
const wsBase = base.replace(/^http(s?):\/\//, "ws$1://");
const headers = { Authorization: `Bearer ${args.token}` };

const problems = [];
let serverErrors = 0;
let failedTurns = 0;
let seqGaps = 0;
let turnsDone = 0;
const firstToken = [];

async function createSession() {
  const res = await fetch(`${base}/v1/sessions`, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify({ workspace_id: args.workspace }),
  });
  const body = await res.json();
  if (res.status !== 201) throw new Error(`POST /v1/sessions: ${res.status} ${JSON.stringify(body)}`);
  return body.session_id;
}

// runSession opens the session's stream and runs nTurns turns on it.
function runSession(id, index) {
  return new Promise((resolve) => {
    const out = { id, last_seq: 0, turns: 0 };
    const ws = new WebSocket(`${wsBase}/v1/sessions/${encodeURIComponent(id)}/stream`, { headers, maxPayload: 64 << 20 });
    let turn = -1;
    let sentAt = 0;
    let sawToken = false;
    let lastEventSeq = 0;
    let timer = null;
    const finish = (problem) => {
      if (problem) problems.push(`${id}: ${problem}`);
      clearTimeout(timer);
      ws.close();
      resolve(out);
    };
    const send = (msg) => ws.send(JSON.stringify(msg));
    const nextTurn = () => {
      turn++;
      if (turn >= nTurns) return finish();
      sawToken = false;
      sentAt = performance.now();
      clearTimeout(timer);
      timer = setTimeout(() => { failedTurns++; finish(`turn ${turn} got no final message in ${TURN_TIMEOUT_MS} ms`); }, TURN_TIMEOUT_MS);
      send({ type: "client.user_message", message: `session ${index} turn ${turn}: give me a tour of this repository` });
    };
    ws.on("open", () => send({ type: "client.hello", client_info: { name: "load.mjs", version: "1", capabilities: [] } }));
    ws.on("error", (err) => finish(`socket error: ${err.message}`));
    ws.on("close", () => { if (turn < nTurns) finish(`the stream closed during turn ${turn}`); });
    ws.on("message", (data) => {
      let msg;
      try {
        msg = JSON.parse(data.toString());
      } catch {
        return finish("a message that is not JSON");
      }
      if (typeof msg.seq === "number") out.last_seq = Math.max(out.last_seq, msg.seq);
      if (msg.turn_id) {
        if (lastEventSeq && msg.seq > lastEventSeq + 1) {
          seqGaps++;
          problems.push(`${id}: seq ${lastEventSeq} then ${msg.seq}`);
        }
        if (msg.seq < lastEventSeq) {
          seqGaps++;
          problems.push(`${id}: seq went back from ${lastEventSeq} to ${msg.seq}`);
        }
        lastEventSeq = Math.max(lastEventSeq, msg.seq);
      }
      switch (msg.type) {
        case "server.hello":
          lastEventSeq = msg.seq;
          nextTurn();
          break;
        case "server.error":
          serverErrors++;
          problems.push(`${id}: server.error ${JSON.stringify(msg.error)}`);
          break;
        case "assistant.token":
          if (!sawToken) {
            sawToken = true;
            firstToken.push(performance.now() - sentAt);
          }
          break;
        case "tool.request_approval":
        case "command.request_approval":
          send({ type: "client.approval_response", request_id: msg.request_id, approved: args.approve, scope: "all" });
          break;
        case "assistant.message_final":
          if (msg.metadata?.status === "completed") {
            turnsDone++;
            out.turns++;
          } else {
            failedTurns++;
            problems.push(`${id}: turn ${turn} ended ${msg.metadata?.status}: ${msg.metadata?.error ?? msg.message}`);
          }
          nextTurn();
          break;
      }
    });
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return Math.round(sorted[i] * 10) / 10;
}

const ids = await Promise.all(Array.from({ length: nSessions }, () => createSession()));
const start = performance.now();
const sessions = await Promise.all(ids.map((id, i) => runSession(id, i)));
const elapsed = performance.now() - start;
const sorted = firstToken.slice().sort((a, b) => a - b);
const summary = {
  sessions,
  turns: turnsDone,
  failed_turns: failedTurns,
  server_errors: serverErrors,
  seq_gaps: seqGaps,
  elapsed_ms: Math.round(elapsed),
  turns_per_s: Math.round((turnsDone / (elapsed / 1000)) * 10) / 10,
  first_token_ms: { p50: percentile(sorted, 50), p99: percentile(sorted, 99), n: sorted.length },
  problems: problems.slice(0, 50),
};
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(turnsDone === nSessions * nTurns && serverErrors === 0 && seqGaps === 0 && failedTurns === 0 ? 0 : 1);
