// Package engine is the domain core of Plexus: the Engine, its Workspaces and
// Sessions, and the turn loop that drives a model and tools to answer a user
// message.
//
// The engine imports no transport, no plugin code and no generated proto. It
// declares the interfaces it consumes and adapters implement them:
//
//   - Model: a model provider (Ollama, an OpenAI-compatible server, a replay
//     script), implemented by plugins/ over a gRPC plugin process.
//   - Toolset: the tools a turn may call, implemented by plugins/ over tool
//     plugin processes.
//   - Host: the front-end a turn runs for (a terminal, a stdio client, a
//     WebSocket); the engine asks it to approve actions. Optional
//     extensions, found by type assertion: CommandRunner (the client runs
//     commands, local_terminal mode), PatchApplier (the client applies
//     approved patches) and ClientToolHost (the client runs tools of its
//     own, offered to the model beside the engine's) and BufferReader
//     (the client's editor buffers are what read-only tools read).
//   - SessionStore, WorkspaceStore, PatchStore: persistence (engine/store,
//     SQLite). With a SessionStore a session's history and every event are
//     stored, a restarted engine loads them (Session, Events for resuming a
//     stream), and Session.State (pending patches and approvals, the plan
//     step) is rebuilt from the events; a patch approval outlives its turn
//     (Session.AnswerPending). ImportSession restores a saved conversation.
//     What is stored when, and what a restart does with an interrupted
//     turn, is the durability model of engine/store's documentation.
//
// Every turn produces one ordered stream of typed events (see Event), each
// with a session sequence number. Front-ends (transports/*) are mappings of
// that stream onto their wire protocol; nothing protocol-specific lives here.
//
// A turn (Session.Run):
//
//  1. Context: the user message plus attachments the client sent and,
//     from an editor, its context (TurnContext: active file, selection,
//     diagnostics, a slash command such as /fix), from which a section of
//     the message is gathered within ContextBudget.
//  2. Planning: the model may publish numbered steps by calling the built-in
//     update_plan tool; each call becomes a PlanEvent.
//  3. Tool loop: the model calls tools; each call passes policy (read-only
//     tools run, tools that need approval ask the Host, a turn without a Host
//     denies unless Options.ApproveAll), runs with a deadline and streams
//     progress, and its result goes back to the model.
//  4. Final message with metadata (tokens, tools used, duration).
//
// Cancellation of the context passed to Run ends the turn with status
// cancelled and leaves no goroutine behind.
package engine
