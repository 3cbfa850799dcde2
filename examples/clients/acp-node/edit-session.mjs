// An editor-like ACP client on @agentclientprotocol/sdk (its stable v1
// API: client() connected with ndJsonStream over the agent's stdio). It
// spawns `plexus serve --transport acp`, as Zed or a JetBrains IDE does,
// and runs one session the way a user would:
//
//   1. initialize (offering fs/read_text_file and fs/write_text_file) and
//      session/new in --cwd;
//   2. a prompt; each session/request_permission is answered allow_once
//      when its title ends with an --allow file, reject_once otherwise;
//      fs/read_text_file and fs/write_text_file are served from the disk;
//   3. a second prompt, cancelled with session/cancel once its text
//      streams;
//   4. plexus is stopped (stdin closed) and started again, and session/load
//      replays the conversation;
//   5. a malformed line is written to plexus, which answers with an error,
//      and a last prompt runs.
//
// It prints one JSON object with everything it saw (every session/update
// as sent, the permission requests, the file operations, the stop
// reasons, the error) for the Go test to check; progress goes to stderr.
//
// Usage: node edit-session.mjs --cwd DIR [--allow FILE]... [--prompt TEXT]
//        [--cancel-prompt TEXT] [--last-prompt TEXT] -- PLEXUS_ARGS...
// The plexus binary is $PLEXUS_BIN (default: plexus on PATH).

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

function parseArgs(argv) {
  const o = { allow: [], prompt: "Fix it", cancelPrompt: "Count slowly", lastPrompt: "Go on", plexus: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") { o.plexus = argv.slice(i + 1); break; }
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === "--cwd") o.cwd = v;
    else if (a === "--allow") o.allow.push(v);
    else if (a === "--prompt") o.prompt = v;
    else if (a === "--cancel-prompt") o.cancelPrompt = v;
    else if (a === "--last-prompt") o.lastPrompt = v;
    else throw new Error(`unknown flag ${a}`);
  }
  if (!o.cwd) throw new Error("--cwd is required");
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const log = (...a) => console.error("[acp-node]", ...a);
const out = { updates: [], permissions: [], reads: [], writes: [], stops: [], exitCodes: [], errors: [] };

// One plexus process with an SDK connection over its stdio. Lines plexus
// writes are also scanned for error responses with id null (answers to
// lines that were not requests), which the SDK does not hand to the app.
function startAgent() {
  const child = spawn(process.env.PLEXUS_BIN || "plexus", ["serve", "--transport", "acp", ...opts.plexus], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
  let buf = "";
  const nullErrors = [];
  let onNullError = () => {};
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (chunk) => {
        buf += chunk.toString("utf8");
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          try {
            const m = JSON.parse(line);
            if (m.id === null && m.error) { nullErrors.push(m.error); onNullError(); }
          } catch { out.errors.push(`plexus wrote a line that is not JSON: ${line.slice(0, 200)}`); }
        }
        try { controller.enqueue(new Uint8Array(chunk)); } catch { /* the connection was closed */ }
      });
      child.stdout.on("end", () => { try { controller.close(); } catch { /* closed already */ } });
    },
  });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), input);
  return {
    child, exited, stream, nullErrors,
    waitNullError: () => new Promise((resolve) => { if (nullErrors.length) resolve(); else onNullError = resolve; }),
  };
}

// The client app: what an editor answers.
let current = { phase: "", updates: null, onText: null };
const app = acp.client({ name: "plexus-acp-node-example" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const title = params.toolCall.title ?? "";
    const allow = opts.allow.some((f) => title.endsWith(f));
    const optionId = allow ? "allow_once" : "reject_once";
    out.permissions.push({ phase: current.phase, toolCall: params.toolCall, options: params.options, answer: optionId });
    log(`permission "${title}": ${optionId}`);
    return { outcome: { outcome: "selected", optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    out.reads.push(params.path);
    let text = readFileSync(params.path, "utf8");
    if (params.line || params.limit) {
      const lines = text.split("\n");
      const from = (params.line ?? 1) - 1;
      text = lines.slice(from, params.limit ? from + params.limit : undefined).join("\n");
    }
    return { content: text };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    out.writes.push(params.path);
    mkdirSync(dirname(params.path), { recursive: true });
    writeFileSync(params.path, params.content);
    return {};
  })
  .onNotification(acp.methods.client.session.update, async ({ params: n }) => {
    out.updates.push({ phase: current.phase, notification: n });
    if (n.update.sessionUpdate === "agent_message_chunk" && current.onText) current.onText(n.update.content.text ?? "");
  });

const caps = { fs: { readTextFile: true, writeTextFile: true } };

// settle lets the session/update handlers of notifications that arrived
// before a response finish. The SDK resolves a request's promise as soon
// as its response line is read, while each notification runs through an
// async chain of handlers, so without this the last chunks of a prompt
// could be counted in the next phase. The agent writes every update before
// its response; the handler chains are microtasks, done by the next
// macrotask.
const settle = () => new Promise((resolve) => setImmediate(resolve));

async function main() {
  // 1-3: the first process.
  let agent = startAgent();
  await app.connectWith(agent.stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: caps,
      clientInfo: { name: "plexus-acp-node-example", version: "1.0.0" },
    });
    out.initialize = init;
    const created = await ctx.request(acp.methods.agent.session.new, { cwd: opts.cwd, mcpServers: [] });
    out.sessionId = created.sessionId;
    out.newSession = created;
    log("session", created.sessionId);

    current.phase = "prompt";
    const r1 = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: created.sessionId, prompt: [{ type: "text", text: opts.prompt }],
    });
    await settle();
    out.stops.push({ phase: "prompt", stopReason: r1.stopReason });
    log("prompt:", r1.stopReason);

    current.phase = "cancel";
    let cancelled = false;
    current.onText = (t) => {
      if (!cancelled && t.trim()) {
        cancelled = true;
        ctx.notify(acp.methods.agent.session.cancel, { sessionId: created.sessionId });
      }
    };
    const r2 = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: created.sessionId, prompt: [{ type: "text", text: opts.cancelPrompt }],
    });
    await settle();
    current.onText = null;
    out.stops.push({ phase: "cancel", stopReason: r2.stopReason });
    log("cancelled prompt:", r2.stopReason);
  });
  agent.child.stdin.end();
  out.exitCodes.push(await agent.exited);

  // 4-5: a new process loads the session.
  agent = startAgent();
  await app.connectWith(agent.stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: caps });
    current.phase = "load";
    out.load = await ctx.request(acp.methods.agent.session.load, { sessionId: out.sessionId, cwd: opts.cwd, mcpServers: [] });
    await settle();
    log("loaded", out.sessionId);

    current.phase = "malformed";
    agent.child.stdin.write('{"jsonrpc": "2.0", "id": 41, "method": "session/prompt", "params": {\n');
    await agent.waitNullError();
    out.malformedError = agent.nullErrors[0];

    current.phase = "last";
    const r3 = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: out.sessionId, prompt: [{ type: "text", text: opts.lastPrompt }],
    });
    out.stops.push({ phase: "last", stopReason: r3.stopReason });
    log("last prompt:", r3.stopReason);
  });
  agent.child.stdin.end();
  out.exitCodes.push(await agent.exited);
}

main().then(
  () => { process.stdout.write(JSON.stringify(out) + "\n"); },
  (err) => {
    out.errors.push(String(err?.stack ?? err));
    process.stdout.write(JSON.stringify(out) + "\n");
    process.exitCode = 1;
  },
);
