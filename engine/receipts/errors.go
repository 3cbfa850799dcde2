package receipts

import (
	"errors"
	"fmt"
	"io/fs"
)

// Sentinel errors. Functions wrap them with detail (a *LineError for a
// problem at a line of a month file), so callers test with errors.Is.
var (
	// ErrInvalidJSON: the input is not a single JSON value as RFC 8259
	// defines it, or it holds something RFC 8785 cannot canonicalise
	// (a duplicate object key, a lone surrogate, a number beyond the range
	// of an IEEE 754 double).
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrInvalidReceipt: Append was given a receipt it cannot write (an
	// unknown kind, no actor, a data member that is not an object, a digest
	// that is not "sha256:<64 hex>").
	ErrInvalidReceipt = errors.New("invalid receipt")
	// ErrMalformed: a line is not a version 1 receipt (it does not parse,
	// a required member is missing or mistyped, a member is unknown).
	ErrMalformed = errors.New("malformed receipt line")
	// ErrTruncated: the last line of a month file has no terminating
	// newline: a write was cut short (a crash during Append).
	ErrTruncated = errors.New("truncated receipt line")
	// ErrHashMismatch: a receipt's hash member is not the hash of its
	// content; the line was changed after it was written.
	ErrHashMismatch = errors.New("receipt hash does not match its content")
	// ErrChainBroken: a receipt's prev member is not the hash of the
	// receipt before it; a line was deleted, inserted or moved.
	ErrChainBroken = errors.New("receipt chain broken")
	// ErrMisplaced: a receipt is in the month file of another month, or its
	// time is earlier than the time of the receipt before it.
	ErrMisplaced = errors.New("receipt out of place")
	// ErrBadSignature: a receipt's signature does not verify with the
	// public key its key_id names.
	ErrBadSignature = errors.New("receipt signature does not verify")
	// ErrUnknownKey: a receipt names a key_id that no known public key has.
	ErrUnknownKey = errors.New("receipt signed by an unknown key")
	// ErrUnsigned: VerifyOptions.RequireSigned is set and a receipt carries
	// no signature.
	ErrUnsigned = errors.New("receipt is not signed")
	// ErrInvalidSegment: a repository id or other path segment is not
	// kebab-case or could name something outside its parent directory.
	ErrInvalidSegment = errors.New("invalid path segment")
	// ErrKeyPermissions: the private key file can be read or written by
	// users other than its owner. The error is a *KeyPermError.
	ErrKeyPermissions = errors.New("receipt signing key is accessible by other users")
	// ErrInvalidKey: a key file does not hold an Ed25519 key in the
	// expected PEM form.
	ErrInvalidKey = errors.New("invalid receipt key file")
	// ErrClosed: Append was called after Close.
	ErrClosed = errors.New("receipt log closed")
	// ErrBadHead: the log's signed head (receipts.head) does not decode,
	// does not match its hash, or its signature does not verify; or the
	// receipt it anchors is signed and the head is not.
	ErrBadHead = errors.New("receipt log head is invalid")
	// ErrHeadMismatch: the receipt at the position the signed head names
	// is not the one it names: the log was rewritten.
	ErrHeadMismatch = errors.New("receipt log does not match its signed head")
	// ErrMissingReceipts: the log ends before the receipt its signed head
	// names: receipts were removed from its end.
	ErrMissingReceipts = errors.New("receipts missing from the end of the log")
	// ErrNoHead: VerifyOptions.RequireHead is set and a log with receipts
	// has no signed head, so removal of its last receipts could not be
	// detected.
	ErrNoHead = errors.New("receipt log has no signed head")
)

// LineError reports a problem at one line of a month file. File is the path
// of the file, Line its 1-based line number, Err the reason (one of the
// sentinels above, wrapped with detail). Error reads "file:line: reason", so
// an editor can jump to it; errors.Is(err, ErrHashMismatch) and the like see
// through it.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// KeyPermError is returned when a private key file is accessible by users
// other than its owner. Error says how to fix it; errors.Is(err,
// ErrKeyPermissions) holds.
type KeyPermError struct {
	Path string
	Mode fs.FileMode
}

func (e *KeyPermError) Error() string {
	return fmt.Sprintf("receipt signing key %s has mode %04o, so users other than its owner can access it; "+
		"refusing to use it. If nobody else has read it, restrict it with `chmod 600 %s`; "+
		"otherwise move it aside so that the next start creates a new key",
		e.Path, e.Mode.Perm(), e.Path)
}

// Is reports whether target is ErrKeyPermissions.
func (e *KeyPermError) Is(target error) bool { return target == ErrKeyPermissions }
