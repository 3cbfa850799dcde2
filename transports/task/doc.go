// Package task serves the engine over HTTP as the task front-end of the VS
// Code extension ("edge agent"), following the contract
// protocols/http-task-receipts.md: a client posts a task, the engine
// processes it in one turn, a signed receipt is appended to the
// repository's receipt log, and the answer carries the result and the
// receipt's path.
//
// Usage (what `plexus serve --transport task` does):
//
//	srv, err := task.New(task.Options{Engine: eng, Workspace: ws, ZURoot: os.Getenv("ZU_ROOT"),
//		Ready: func(ctx context.Context) error { return nil }, // is the model provider answering?
//		Logger: logger})
//	if err != nil {
//		return err
//	}
//	go func() {
//		<-ctx.Done()
//		grace, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//		defer cancel()
//		srv.Shutdown(grace)
//	}()
//	return srv.ListenAndServe(task.DefaultAddr) // 127.0.0.1:8080; nil after Shutdown
//
// Server is also an http.Handler, so it can be mounted in another server;
// Shutdown or Close must still be called to stop its workers.
//
// # Endpoints
//
// POST /api/task/process is the task endpoint. The contract leaves the path
// open ("TBD (e.g., /api/task/process)"); this is its example path.
// GET (or HEAD) /health answers {"status":"ok"}, or 503
// SERVICE_UNAVAILABLE (below) while Options.Ready fails or the server is
// shutting down; the contract does not define it. Every other path gets
// 404, and another method on those two paths 405 with an Allow header
// ("POST"; "GET, HEAD"), both with code INVALID_REQUEST (the contract's
// codes have none for routing) and details {field: "", reason}. Every
// response, errors included, has Content-Type application/json and a JSON
// body; the request's Content-Type is not looked at.
//
// # Request
//
//	{"task": {"id": "test-task-001", "type": "code_review", "priority": "medium",
//	          "data": {"file_path": "src/example.ts", "context": "pre-commit"},
//	          "requirements": {"security": true, "performance": false},
//	          "timeout": 30000, "retryCount": 0},
//	 "repoId": "test-repo"}
//
// The body is read up to Options.MaxBodyBytes (default 1 MiB; larger: 413
// INVALID_REQUEST, details {field: "", reason}) within 30 s, then checked in
// this order; the first problem answers, always with details {field,
// reason}, field being a dotted JSON path ("task.id", "repoId"; "" for the
// whole body):
//
//  1. Strict JSON, as receipts.Canonicalize reads it (valid UTF-8, no
//     duplicate member names, no lone surrogates, numbers within a double,
//     one value): otherwise 400 INVALID_REQUEST "Request body is not valid
//     JSON", reason naming the byte offset ("Invalid JSON at offset 20:
//     expected a member name"). An empty body is refused the same way.
//  2. The contract's request JSON Schema (draft 2020-12, embedded from
//     schemas/request.schema.json): otherwise 400 INVALID_REQUEST "Request
//     body validation failed". Of several violations the one reported is
//     that of the earliest field in the contract's order (task, task.id,
//     task.type, task.priority, task.data, task.requirements.*,
//     task.timeout, task.retryCount, repoId). A missing property has
//     reason "Field is required" and field naming it, which reproduces the
//     contract's 400 example; other reasons: "Expected string, got
//     number", "Must not be empty", "Must be one of: low, medium, high,
//     critical", "Must be at least 0".
//  3. Checks the schema cannot state, also 400 INVALID_REQUEST "Request body
//     validation failed": task.type must be code_review, validation or
//     general (field task.type, reason listing them); task.timeout at most
//     300000 ms (field task.timeout); task.retryCount a whole number from 0
//     to 5 (field task.retryCount); repoId kebab-case
//     (^[a-z0-9]+(-[a-z0-9]+)*$), at most 100 characters and not a Windows
//     device name (receipts.ValidateSegment), so it cannot name anything
//     outside the receipts directory (field repoId).
//  4. What the type needs from task.data. A required member that is absent
//     or null is 400 MISSING_FIELD "Required field missing in request",
//     reason "Field is required for task type T" (field
//     task.data.file_path for code_review, task.data.prompt for general).
//     A data member of the wrong type or empty (file_path, context,
//     prompt must be non-empty strings), and a file_path that leaves the
//     workspace (.., an absolute path outside, a symlink leading out; see
//     engine/workspace), does not exist or is not a regular file, is 400
//     INVALID_REQUEST about that member.
//
// Then Options.Ready is asked (with a 5 s deadline): an error is 503
// SERVICE_UNAVAILABLE "Plexus is not available", details {reason: the
// error's text}. The contract names the server "Edge Agent"; the engine is
// Plexus everywhere.
//
// # Task types
//
// Each task is one engine turn in a fresh engine session in
// Options.Workspace, with the engine's current model and without a Host:
// read-only tools run, anything that needs approval is denied.
//
//   - code_review: data.file_path (workspace-relative) is attached to the
//     turn as a file; the prompt asks for a review with line-level
//     findings and fixes, plus one focus paragraph for each of
//     requirements.security, .performance and .compliance that is true.
//   - validation: checks data.file_path (attached) when given, else the
//     workspace (through the tools the engine has); the model is asked to
//     start with "VERDICT: PASS" or "VERDICT: FAIL", and result.verdict
//     reports "pass", "fail" or "unknown".
//   - general: data.prompt is the message (data.file_path, when given, is
//     attached).
//
// For every type data.context, when given, is added as "Context: ...", and
// the other members of data as "Task data: {JSON}".
//
// # Queue, timeout, retries
//
// Options.Concurrency workers (default 2) process tasks; the others wait
// in a priority queue (container/heap): critical, then high, medium (the
// default) and low, and in arrival order within a priority. At most
// Options.MaxQueue tasks (default 1024) wait; beyond that a task gets 503
// SERVICE_UNAVAILABLE.
//
// task.timeout (milliseconds; absent or 0 means 30000; at most 300000)
// covers queueing and processing. When it expires the task leaves the
// queue or its turn is cancelled, and the answer is 504 TIMEOUT "Request
// processing timeout", details {taskId, timeoutMs: the effective timeout},
// with no partial result.
//
// A turn that fails (the engine's turn status error, or an error starting
// the turn) is run again, in a fresh session, up to task.retryCount times
// while the timeout allows, after a pause of 100 ms, 200 ms, 400 ms, ...
// (at most 1 s). When the last try fails the answer is 500
// TASK_PROCESSING_ERROR "Failed to process task", details {taskId, reason:
// the engine's error text}. A panic while processing (a bug) is 500
// UNKNOWN_ERROR with the same details.
//
// A client that disconnects cancels its task (queued or running).
//
// # Response
//
// 200 carries {"result": Result, "receiptPath": "/abs/.../receipts.jsonl"}:
//
//	{"result": {"taskId": "test-task-001", "success": true, "processingTime": 123,
//	            "type": "code_review", "output": "...the model's final answer...",
//	            "model": "ollama:qwen2.5-coder:7b", "toolsUsed": [],
//	            "tokens": {"prompt": 812, "completion": 96, "total": 908}, "attempts": 1},
//	 "receiptPath": "/home/u/.zu/ide/receipts/test-repo/2025/01/receipts.jsonl"}
//
// taskId, success and processingTime are the contract example's;
// processingTime is whole milliseconds from a worker taking the task to
// the end of its last turn (queueing excluded). verdict is added for
// validation tasks; tokens is absent when the provider counted none.
//
// Status codes and error codes:
//
//	200                            the task was processed; its receipt is durable
//	400 INVALID_REQUEST            malformed JSON, schema violation, failed check (above)
//	400 MISSING_FIELD              task.data lacks what the task type requires
//	403 INVALID_REQUEST            an Origin header not in Options.AllowOrigins
//	404 INVALID_REQUEST            unknown path
//	405 INVALID_REQUEST            wrong method (Allow header set)
//	413 INVALID_REQUEST            body larger than Options.MaxBodyBytes
//	500 TASK_PROCESSING_ERROR      the last turn failed             {taskId, reason}
//	500 RECEIPT_GENERATION_ERROR   the receipt log could not be opened or appended {taskId, reason}
//	500 UNKNOWN_ERROR              processing panicked              {taskId, reason}
//	503 SERVICE_UNAVAILABLE        not ready, queue full, shutting down, request cancelled {reason}
//	504 TIMEOUT                    task.timeout expired             {taskId, timeoutMs}
//
// POLICY_ERROR is never sent: this front-end stores no policy.
//
// Browsers add an Origin header to every cross-site POST; a request to the
// task endpoint carrying one that Options.AllowOrigins does not list is
// refused (403), so that a web page the user visits cannot make the engine
// read workspace files. The extension's own requests (from Node) carry
// none.
//
// # Receipts
//
// Receipts use engine/receipts. Each repoId has a receipts.Log on
// {ZU_ROOT}/ide/receipts/{repoId} (receipts.RepoDir), opened on its first
// task and kept open until Shutdown, so the files are
//
//	{ZU_ROOT}/ide/receipts/{repoId}/{yyyy}/{mm}/receipts.jsonl   (UTC month of the receipt)
//	{ZU_ROOT}/ide/receipts/{repoId}/receipts.pub                 public keys (PEM)
//	{ZU_ROOT}/ide/keys/receipts.key                              signing key (mode 0600)
//
// and receipts.NewReader(dir).Verify checks a log. Every task accepted
// into the queue gets exactly one receipt, whatever its outcome: kind
// "task", actor "plexus-task", tool task.type, args_digest
// receipts.ArgsDigest of the request's task object (RFC 8785 canonical
// form), workspace, session and turn of the (last) engine turn, reason ""
// on success or the failure's text, data the Result on success or
// {taskId, success: false, error, attempts} on failure. That includes
// timeouts, in the queue or not, tasks whose client left and tasks
// cancelled by shutdown. Requests refused before they are queued (every
// 4xx; 503 for not ready, a full queue or shutdown already under way) get
// none. The append is fsynced before the 200 is sent; receiptPath is the
// month file it went to (receipts.Log.Path). If the append fails, a
// processed task is answered 500 RECEIPT_GENERATION_ERROR instead of 200;
// for a failed task the failure's own answer stands and the receipt error
// is logged.
//
// # Shutdown
//
// Shutdown(ctx) closes the listeners, answers new requests on open
// connections with 503, lets accepted tasks (queued ones too) finish until
// ctx ends, then cancels the rest (503 "shutting down", with receipts),
// stops the workers and closes the receipt logs and the workspace handle.
// Close does the same without waiting.
//
// # Limits
//
// Body 1 MiB (Options.MaxBodyBytes), read within 30 s; headers 64 KiB,
// read within 10 s; task.timeout 300 s; retryCount 5; repoId 100
// characters; 1024 waiting tasks (Options.MaxQueue); an attached file is
// cut at the engine's MaxAttachmentBytes. Each task's engine session is
// closed (Engine.CloseSession) when its turn ends.
//
// # Where this departs from the contract
//
//   - Statuses beyond the contract's list: 403 (a request with an Origin
//     header not in Options.AllowOrigins: a web page must not drive the
//     engine), 405 and 413; all with the error envelope and code
//     INVALID_REQUEST.
//   - Responses net/http writes before any handler runs (431 for headers
//     over 64 KiB, 400 for an unparseable request line, the answer to
//     "OPTIONS *") are plain text, not the envelope.
//   - The server listens on 127.0.0.1 only; a client that resolves
//     localhost to ::1 first must use 127.0.0.1 (or plexus serve --addr
//     [::1]:8080). No CORS headers are sent.
package task
