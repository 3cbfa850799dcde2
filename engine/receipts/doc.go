// Package receipts keeps decision receipts: an append-only, hash-chained and
// optionally Ed25519-signed log of every approval, denial, patch apply and
// undo and command execution of the engine, and of the tasks the HTTP task
// front-end processes (the receipt contract, protocols/http-task-receipts.md).
//
// # Layout
//
// A log is a directory dir holding
//
//	dir/yyyy/mm/receipts.jsonl      one receipt per line, UTF-8, "\n" after each
//	dir/yyyy/mm/receipts.jsonl.torn torn lines Append or Repair removed (see below)
//	dir/receipts.head               the signed head: the chain's length and end (see below)
//	dir/receipts.pub                public keys that verify the signatures (PEM)
//	dir/receipts.lock               the lock file (empty)
//
// where yyyy/mm is the UTC year and month of the receipt's time. For the
// task front-end dir is RepoDir(ZU_ROOT, repoId), which gives the
// contract's {ZU_ROOT}/ide/receipts/{repoId}/{yyyy}/{mm}/receipts.jsonl.
// Month files are read in month order and, within a file, in line order;
// that is the order of the chain, which continues across files: the prev of
// the first receipt of a month is the hash of the last receipt of the
// previous non-empty month.
//
// # Lines
//
// Each line is one JSON object, a Receipt, written in the canonical form of
// RFC 8785 (see Canonicalize): members sorted, no whitespace. For example
// (wrapped here):
//
//	{"actor":"user","args_digest":"sha256:44136f…","diff_hash":"",
//	 "hash":"sha256:9b1c…","id":"2WKPX5QO3KS7ZBEL4DWXGIOGTM","key_id":"3f9a0c1d2e4b5a69",
//	 "kind":"approval","prev":"sha256:07ac…","reason":"","session":"s1",
//	 "sig":"q0Yc…==","time":"2025-01-31T23:59:59.123456789Z","tool":"run_command",
//	 "turn":"t3","version":1,"workspace":"w1"}
//
// The members are those of Receipt; exit_code, data, key_id and sig are
// present only when set, the others always (strings may be empty).
//
// # Hash and signature
//
// The hash of a receipt is
//
//	hash = "sha256:" + lowercase_hex(SHA-256(JCS(object without "hash" and "sig")))
//
// where object is the line's JSON object with all its other members
// (key_id and prev included) and JCS is RFC 8785 canonicalisation. The
// signature, when the log has a key, is
//
//	sig    = base64_std_padded(Ed25519_sign(private_key, ASCII bytes of hash))
//	key_id = lowercase_hex(SHA-256(32-byte public key)[:8])
//
// (RFC 8032 Ed25519, the message being the 71 characters "sha256:…"). The
// key_id is part of the hashed content, so the signature binds it. Because
// the hash is computed over the canonical form, a verifier in another
// language re-creates it from the parsed line with any RFC 8785 library;
// the line on disk is already in that form, so dropping the two members
// from it and hashing gives the same bytes.
//
// Keys live in receipts.key (PKCS #8 PEM, mode 0600) and receipts.pub (PKIX
// PEM, one block per key ever used), so `openssl pkey -pubin -in
// receipts.pub -noout -text` reads them; see LoadOrCreateKey. A log written
// without a key is a hash chain only: it shows accidental damage and
// careless edits, not a forger who recomputes the chain. A signed log shows
// those too, as long as the verifier trusts the public key; receipts.pub
// sits beside the log, so a verifier that must resist someone able to
// rewrite the directory passes its own copy of the key in
// VerifyOptions.PublicKeys. A chain alone cannot show receipts cut from
// the end of the log: what is left is a valid chain. The signed head does.
//
// # Signed head
//
// After each receipt's line is on disk, Append replaces receipts.head
// (atomically: a temporary file, fsynced, renamed, the directory fsynced)
// with one canonical JSON line naming the chain's length and end:
//
//	{"count":12,"hash":"sha256:…","key_id":"3f9a0c1d2e4b5a69","last":"sha256:<hash of receipt 12>",
//	 "sig":"…","time":"<time of receipt 12>","type":"plexus-receipts-head","version":1}
//
// hashed and signed exactly as a receipt is (hash over the object without
// hash and sig; the type member keeps a head's hash from ever being a
// receipt's). Verify checks the head's hash and signature, that receipt
// number count is there with the hash last (ErrHeadMismatch), and that
// the log reaches it (ErrMissingReceipts); a head that anchors a signed
// receipt must be signed (ErrBadHead). Append refuses to extend a log
// that fails those checks, as it refuses a damaged last line, since its
// new head would hide the damage.
//
// What it proves: that the log held at least count receipts ending with
// last when someone holding the signing key wrote the head. Removing
// receipts from the end, emptying or deleting the newest month files, or
// rewriting the last receipts (even re-signed with the key) are detected
// as long as the head file is there; changing the head needs the key.
// What it does not prove: that nothing was appended after the head (a
// crash between a receipt's line and its head leaves the head one
// receipt behind, which Verify accepts and reports in Report.AfterAnchor,
// and the next Append or Repair brings forward); that the head itself is
// the latest: someone able to rewrite the directory can put back an
// older log together with the head it had then (keep Report.Head or the
// head file somewhere else, or in a transparency log, to detect that);
// and nothing at all against someone holding the private key. A log
// written before heads existed has none (VerifyOptions.RequireHead makes
// that an error, ErrNoHead); its next Append, or Repair, writes one.
//
// # Concurrency and crashes
//
// Append is safe from many goroutines and from many processes sharing the
// directory: it holds an exclusive flock(2) on receipts.lock while it
// re-reads the chain head and writes, writes each line with one write(2) on
// a file opened O_APPEND, and fsyncs the file (and, for a new file, the
// directories above it) before returning, then writes the signed head.
// Lines never interleave or tear while processes run. A crash during the
// write can leave a torn last line (a prefix of the line, or zeros,
// without the final newline); Verify reports it (ErrTruncated), and the
// next Append repairs it, moving the bytes to receipts.jsonl.torn and
// continuing the chain from the last whole line: the interrupted Append
// never returned, so its receipt was never acknowledged, and one crash
// must not stop the engine from recording decisions. Repair (`plexus
// receipts repair`) does the same on demand and reports what it moved.
// Damage that is not a crash's (a whole last line that does not decode or
// whose hash does not match, receipts missing before the head) makes
// Append refuse until a person looks.
//
// Readers (Reader.List, Reader.Verify) take the same lock shared only while
// they list the files and their sizes, then read those prefixes, so a
// concurrent Append never shows up as a torn line.
package receipts
