// Package store keeps the engine's own state in the embedded SQLite
// database of the data directory (plexus.db; modernc.org/sqlite, no cgo):
// registered workspaces, each workspace's policy document, proposed patch
// sets, applied changes (for undo across processes), and sessions with
// their history, their model and their event streams. It implements
// engine.SessionStore, engine.SessionModelStore, engine.WorkspaceStore,
// engine.PatchStore and policy.DocStore.
//
// The code index lives in a separate database file (index.db): it is
// derived data that is rebuilt when its format changes, while what this
// store holds is the user's and must survive.
//
// # The durability model
//
// This is the rule every front-end and every store backend follows (the
// PostgreSQL backend too); storetest.Run checks a backend against it.
//
// Acknowledged means durable. A call that stores something returns nil
// only after the transaction holding it has committed and the commit is on
// disk (SQLite in WAL mode with synchronous=FULL: the write-ahead log is
// fsynced at every commit). The engine tells a client about something only
// after such a call returned nil:
//
//   - Events. Every event of a session is committed before it reaches any
//     front-end (engine.TurnOptions.OnEvent), so an event a client has seen
//     is there after any crash, and Engine.Events (a resumed stream) returns
//     it. Sequence numbers are dense; an event the store failed to keep is
//     delivered anyway, followed by a recoverable error event naming it,
//     and shows as a gap.
//   - A turn's request. The user message is stored in the same transaction
//     as the turn's first event (AppendEventWithHistory), in the words the
//     user typed; once the editor context is gathered, the next event's
//     transaction replaces it with the full message the model sees. A
//     client that saw any event of a turn finds its request in the history
//     after a crash.
//   - A turn's answer. The turn's other messages (assistant replies, tool
//     calls and results) are stored in the same transaction as its final
//     event. A final event with status completed therefore proves that the
//     whole exchange is in the history; when that transaction fails (after
//     the retries below), the final event that is delivered has status
//     error and says the answer was not saved, and the messages stay in
//     memory to be written with the session's next store write, or by
//     Engine.Flush at graceful shutdown (every front-end's shutdown calls it
//     before the store closes).
//   - Everything else: a session's record and model, a workspace's
//     registration and policy, a patch set, an applied change and its undo
//     mark are each one transaction, committed when the call returns.
//   - Receipts (engine/receipts) are fsynced before Append returns; the
//     task front-end answers 200 only after its receipt is on disk.
//
// How each front-end follows it. http and acp keep sessions in this store:
// everything above holds for them, and a client that reconnects after a
// restart resumes from the last sequence number it saw. The task
// front-end answers 200 only after the task's receipt is fsynced (a
// receipt that cannot be written turns the 200 into 500
// RECEIPT_GENERATION_ERROR), and a failed task's error after its failure
// receipt was appended (or its failure logged). unix answers
// session.save only after the session file is written, fsynced and
// renamed into place. ndjson and lsp-stdio (and unix between saves) keep
// the conversation in the process, so it ends with it; what they report as
// done (an applied patch, its undo record, a policy change, a receipt)
// is durable when reported.
//
// What SIGKILL (or a power cut, on a disk that honours fsync) may lose is
// only what nobody was told: an event being stored when the process died
// (its caller never returned, no client saw it), the words of a model
// reply not yet streamed, and the in-memory parts of a running turn: its
// assistant replies and tool results, which are stored with its final
// event (the events that reported them are kept), and the approvals its
// tools and commands were waiting for. Patch-set approvals are events, so
// they survive and can still be answered.
//
// How a restart reconciles. A session is loaded from the store when it is
// first used after a restart (engine.Engine.Session). Every turn that has
// events but no final event was interrupted: the loading engine closes it
// with a final event of status error whose message says the server stopped
// before the turn finished, stored under the turn's id with the next
// sequence number. The turn's user message stays in the history, without
// an answer, so the next turn's model sees that the request was asked and
// not answered, and the turn's pending patch approvals can still be
// answered (Session.AnswerPending). This assumes, as engine.SessionStore
// says, that one engine serves a session at a time.
//
// # Writes under contention
//
// All writes of a Store go through one writer: a goroutine that owns the
// only write connection. A write is a request to it; requests that arrive
// while a commit runs are committed together in the next transaction
// (group commit, so many sessions streaming at once share fsyncs), each in
// its own savepoint, so one failing write (a duplicate sequence number, an
// unknown session) fails alone. Each caller gets its own outcome once the
// commit is on disk. A caller whose context ends before the writer takes
// its request gets the context's error and the request is dropped; once
// taken, the request is committed or failed, and the caller waits for the
// outcome, so a reported failure is never a write that happened later.
//
// Transactions begin with BEGIN IMMEDIATE: a read-modify-write (look the
// session up, then write) holds the write lock from its first read, so it
// never fails upgrading a read snapshot (SQLITE_BUSY_SNAPSHOT, the
// "database is locked (517)" of deferred transactions under WAL). Other
// processes sharing the file (plexus undo, plexus policy set, several
// stdio front-ends on one data directory, a second plexus serve) contend
// for that lock. A transaction that finds it taken is tried again after a
// pause drawn at random between zero and a cap that doubles from 0.5 ms
// to 5 ms (full jitter), for up to lockWait (10 s); then the write fails
// with an error wrapping ErrBusy and the caller reports the failure.
// SQLite's write lock has no queue, so a writer that has waited 20 ms
// takes a turnstile (an flock(2) on plexus.db-turnstile) that every
// writer checks before each attempt: the process holding the lock lets
// the waiting one in at its next commit instead of starving it. Reads use
// a separate pool of connections, see the last commit and never wait for
// the writer. Close stops taking writes, commits those already queued,
// and closes the database.
package store
