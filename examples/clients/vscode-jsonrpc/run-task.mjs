// run-task.mjs: drive `plexus serve --transport lsp-stdio` as the VS Code
// extension does (protocols/jsonrpc-stdio-lsp-framing.md): spawn it, speak
// JSON-RPC with LSP framing over its stdin/stdout through vscode-jsonrpc,
// run one task, answer the host-tool requests, shut it down.
//
//   node run-task.mjs [options] [-- plexus serve flags...]
//
// Options:
//   --plexus PATH        the plexus binary (default $PLEXUS_BIN, else plexus on PATH)
//   --workspace DIR      workspaceRoot, and the child's working directory (default .)
//   --prompt TEXT        the task's prompt (default: asks about the active file)
//   --task-id ID         the taskId (default task-1)
//   --active-file PATH   activeEditorPath; the context then also carries the buffer
//                        as activeEditorContent and the file in openFiles
//   --buffer TEXT        the unsaved editor text read_buffer answers with
//   --answer MODE        how $/requestToolExecution is answered: toolResponse (a
//                        toolResponse request, then null as the request's
//                        response; the default, as the contract words it) or
//                        response (the result as the request's response)
//   --timeout SECONDS    give up after this long (default 60)
//
// Everything after -- goes to `plexus serve --transport lsp-stdio`, for
// example -- --model ollama:qwen2.5-coder:7b.
//
// On stdout: one JSON line {result, partialText, thoughts, code,
// toolRequests, taskErrors, logMessages, statusUpdates, notifications,
// exitCode}. The child's stderr (its logs) is copied to stderr. Exits 0
// when the task got a result and plexus exited 0 after shutdown; 1
// otherwise.

import { spawn } from 'node:child_process';
import path from 'node:path';
import process from 'node:process';
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  ResponseError,
} from 'vscode-jsonrpc/node';

function parseArgs(argv) {
  const opts = {
    plexus: process.env.PLEXUS_BIN || 'plexus',
    workspace: '.',
    prompt: 'What does the active file hold in the editor?',
    taskId: 'task-1',
    activeFile: null,
    buffer: '// unsaved: the text in the editor, not yet on disk\n',
    answer: 'toolResponse',
    timeout: 60,
    serveArgs: [],
  };
  const names = {
    '--plexus': 'plexus', '--workspace': 'workspace', '--prompt': 'prompt', '--task-id': 'taskId',
    '--active-file': 'activeFile', '--buffer': 'buffer', '--answer': 'answer', '--timeout': 'timeout',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      opts.serveArgs = argv.slice(i + 1);
      break;
    }
    const key = names[a];
    if (!key || i + 1 >= argv.length) {
      throw new Error(`unknown option or missing value: ${a}`);
    }
    opts[key] = argv[++i];
  }
  if (!['toolResponse', 'response'].includes(opts.answer)) {
    throw new Error(`--answer must be toolResponse or response, not ${opts.answer}`);
  }
  opts.timeout = Number(opts.timeout);
  return opts;
}

const log = (...args) => process.stderr.write(`run-task: ${args.join(' ')}\n`);

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const workspace = path.resolve(opts.workspace);
  const summary = {
    result: null, partialText: '', thoughts: '', code: '', toolRequests: [], taskErrors: [],
    logMessages: [], statusUpdates: 0, notifications: {}, exitCode: null,
  };

  // Spawn the backend as the extension host does: stdio pipes, the
  // workspace folder as the working directory.
  const child = spawn(opts.plexus, ['serve', '--transport', 'lsp-stdio', ...opts.serveArgs], {
    cwd: workspace,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
  child.on('error', (err) => log('spawn failed:', err.message));
  child.stderr.on('data', (d) => process.stderr.write(d));

  const timer = setTimeout(() => {
    log(`no result within ${opts.timeout}s; killing plexus`);
    child.kill('SIGKILL');
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(1);
  }, opts.timeout * 1000);

  const connection = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
  connection.onError(([err]) => log('connection error:', err?.message ?? err));

  connection.onNotification((method, params) => {
    summary.notifications[method] = (summary.notifications[method] ?? 0) + 1;
    switch (method) {
      case '$/partialResult':
        if (params.type === 'text') summary.partialText += params.content;
        else if (params.type === 'thought') summary.thoughts += params.content;
        else if (params.type === 'code') summary.code += params.content;
        break;
      case '$/statusUpdate':
        summary.statusUpdates++;
        break;
      case '$/logMessage':
        summary.logMessages.push(params);
        log(`[${params.type}] ${params.message}`);
        break;
      case '$/taskError':
        summary.taskErrors.push(params);
        break;
    }
  });

  // The host's tools: read_buffer answers with the unsaved buffer text;
  // approve approves (a real extension would ask the user).
  const runTool = (toolName, toolInput) => {
    switch (toolName) {
      case 'read_buffer':
        return { content: opts.buffer, isDirty: true, path: toolInput.path };
      case 'approve':
        return { approved: true };
      default:
        throw new ResponseError(-32003, `this host has no tool ${toolName}`);
    }
  };
  connection.onRequest('$/requestToolExecution', async (params) => {
    summary.toolRequests.push(params);
    let result = null;
    let error = null;
    try {
      result = runTool(params.toolName, params.toolInput ?? {});
    } catch (err) {
      if (opts.answer === 'response') throw err;
      error = { code: err.code ?? -32003, message: err.message };
    }
    if (opts.answer === 'response') {
      return result;
    }
    await connection.sendRequest('toolResponse', { toolCallId: params.toolCallId, result, error });
    return null; // an acknowledgement: the answer went as toolResponse
  });

  connection.listen();

  connection.sendNotification('initialize', {
    initialConfig: {
      hostTools: [{
        name: 'read_buffer',
        description: "Read a file's text as the editor holds it, unsaved changes included. Returns {content}.",
        inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
        readOnly: true,
      }],
    },
    workspaceRoot: workspace,
    environment: { client: 'run-task.mjs', node: process.version },
  });

  const context = { activeEditorContent: null, activeEditorPath: null, selection: null, openFiles: [], relevantFiles: [] };
  if (opts.activeFile) {
    const file = path.resolve(workspace, opts.activeFile);
    Object.assign(context, { activeEditorPath: file, activeEditorContent: opts.buffer, openFiles: [file] });
  }
  let ok = true;
  try {
    summary.result = await connection.sendRequest('executeTask', { taskId: opts.taskId, prompt: opts.prompt, context });
  } catch (err) {
    ok = false;
    summary.result = { error: { code: err.code, message: err.message } };
  }

  connection.sendNotification('shutdown');
  summary.exitCode = await exited;
  clearTimeout(timer);
  connection.dispose();
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(ok && summary.exitCode === 0 ? 0 : 1);
}

main().catch((err) => {
  log(err.stack ?? err.message);
  process.exit(1);
});
