// Package patch turns the file edits a tool proposes into patches, lets the
// user approve all of them, some files or some hunks, applies the approved
// part to the workspace atomically and undoes it byte for byte.
//
// The flow: the engine collects the edits of one model response as []Edit
// (each computed against the content the tool read) and calls Propose, which
// returns a Set: one FilePatch per file with a git-style unified diff, its
// hunks (3 lines of context, headers as git writes them, including the
// function-name heuristic git uses when no diff driver is configured) and the
// content hashes the apply will check. A client's approval becomes a
// Selection; Set.Expected gives the hashes a client-side apply must report;
// Apply writes the selected part, refusing with *ConflictError when a file
// changed since the proposal, and returns an *Applied that Undo takes back.
// ParseUnified turns a unified diff that a client or model sends into []Edit
// against the files' current contents.
//
// Diffs are line based and computed with go-udiff (github.com/aymanbagabas/
// go-udiff): its bounded two-sided Myers search (udiff's lcs package) finds
// the changed regions, and its exact Myers implementation (udiff's myers
// package) recomputes a region minimally whenever the bounded search may have
// given up (more than 100 changed lines) and the exact search fits a 64 MiB
// memory budget; so diffs are minimal except for very large, heavily
// rewritten regions, where they stay correct but may be larger. Git's own
// slider heuristics (which of several equal-cost placements of an inserted
// block to show) are not reproduced, so such a block can sit a few lines from
// where git would show it.
//
// Content is text: a NUL byte anywhere makes Propose refuse the edit.
// Invalid UTF-8 is allowed (hunks carry the bytes; only their JSON form on a
// wire replaces them), and applying always uses the exact bytes kept in the
// FilePatch, never the diff text. Line endings are bytes like any other: a
// CRLF file diffs as lines ending in "\r\n".
//
// Every path goes through workspace.Root (Real and FS), so `..`, absolute
// paths outside the root and symlinks leading out are refused with errors
// matching engine.ErrPermissionDenied. Propose, FilePatch.Result and
// Set.Expected only compute and are safe for concurrent use; Apply and Undo
// are not safe to run concurrently on overlapping files, so callers
// serialise them per workspace.
// Files are replaced by rename, which keeps their mode but not their owner
// (the engine's user owns the new inode) and breaks hard links.
package patch
