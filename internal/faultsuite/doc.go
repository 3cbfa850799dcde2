// Package faultsuite is the fault-injection suite of the durability model
// (engine/store's package documentation): it drives the real plexus binary
// on each front-end (http, task, unix, ndjson, lsp-stdio) with several
// concurrent clients, kills the server with SIGKILL at seeded random
// points while they work, restarts it, and checks that every item a client
// was told about before the kill is still there: events (in order, without
// gaps), history messages, pending approvals, applied patches (on disk and
// in the undo records), session files and receipts (verified, after any
// torn tail was moved aside), and that the server serves again.
//
// What each front-end acknowledges, and what is checked after each kill:
//
//   - http: a session's events (every WebSocket message of a turn, by
//     sequence number and type) must be replayed by ?since=0 in order
//     with no gaps; every turn a client saw an event of has its request in
//     the session's history, in order, and a final message (the
//     interrupted one closed by the restart with status error); a
//     completed turn's answer is in the history; a patch approval request
//     that was not answered is still pending (and is answered after the
//     restart); an applied patch (patch.result) is on disk, in the undo
//     records and in the receipts.
//   - task: every 200 has its task receipt in the log, every 504 its
//     failure receipt; a task whose deadline passed is never a 500.
//   - unix: every session.save that answered has a file that session.load
//     reads back with at least the saved messages; every applied edit is
//     on disk, in the undo records and in the receipts.
//   - ndjson and lsp-stdio (one process per client, all on one data
//     directory): every applied edit a client was told about is on disk,
//     in the undo records and in the receipts.
//
// After every restart the state database passes SQLite's integrity check,
// `plexus receipts repair` moves aside at most a torn last line (an append
// the kill interrupted), and `plexus receipts verify` accepts the log with
// its signed head.
//
// The suite runs in `go test ./internal/faultsuite` (and so in the
// README's test command and CI) with a bounded number of kills, about two
// minutes in all; `go test -short` skips it. The environment widens it:
//
//	PLEXUS_FAULT_KILLS    kills per front-end (default DefaultKills, 5)
//	PLEXUS_FAULT_CLIENTS  concurrent clients (default 3)
//	PLEXUS_FAULT_SEED     the seed of every random choice (default 1)
//	PLEXUS_FAULT_REPORT   a file to append the figures table to
//
// Everything listens on loopback or on Unix sockets in temporary
// directories; the model is the replay provider (no network).
// PLEXUS_FAULT_BIN runs the suite against another build of plexus (an
// older one, to see what it catches).
//
// The same package holds the WebSocket load test and benchmark
// (load_test.go), which drive examples/clients/ws-node/load.mjs (npm
// ws):
//
//	go test -run TestLoadWebSocket100 ./internal/faultsuite
//	go test -run '^$' -bench WebSocketTurns -benchtime 3x ./internal/faultsuite
package faultsuite
