package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Version is the receipt format version this package writes and reads.
const Version = 1

// TimeFormat is the layout of a receipt's time member: UTC, RFC 3339 with
// exactly nine fractional digits (nanoseconds), for example
// "2025-01-31T23:59:59.123456789Z".
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// Kind says what a receipt records.
type Kind string

// Receipt kinds.
const (
	// KindApproval: a tool call or patch was allowed (by the user, by
	// policy, by approve-all).
	KindApproval Kind = "approval"
	// KindDenial: a tool call or patch was refused.
	KindDenial Kind = "denial"
	// KindPatchApply: a patch was applied; DiffHash names it.
	KindPatchApply Kind = "patch_apply"
	// KindPatchUndo: an applied patch was undone; DiffHash names it.
	KindPatchUndo Kind = "patch_undo"
	// KindCommand: a command ran; ExitCode is its exit status.
	KindCommand Kind = "command"
	// KindTask: the HTTP task front-end processed a task; Data holds the
	// task result.
	KindTask Kind = "task"
)

func (k Kind) known() bool {
	switch k {
	case KindApproval, KindDenial, KindPatchApply, KindPatchUndo, KindCommand, KindTask:
		return true
	}
	return false
}

// Receipt is one decision record, one line of a month file. Its JSON form
// (see MarshalJSON) has exactly these members, in canonical order on disk:
//
//	actor, args_digest, data (when set), diff_hash, exit_code (when set),
//	hash, id, key_id (when signed), kind, prev, reason, session,
//	sig (when signed), time, tool, turn, version, workspace
//
// Append fills Version, ID (when empty), Time, Prev, Hash, KeyID and Sig;
// the caller fills the rest.
type Receipt struct {
	// Version is the format version, 1.
	Version int
	// ID identifies the receipt; Append sets a random 26-character base32
	// string when it is empty.
	ID string
	// Time is when the receipt was appended, UTC, nanosecond precision.
	// Times in a log never decrease (see Log.Append).
	Time time.Time
	// Kind says what is recorded.
	Kind Kind
	// Actor is who or what decided: "user", "policy", "approve-all",
	// "client:<name>", ...
	Actor string
	// Workspace, Session and Turn identify where the decision was made
	// (empty when not applicable, as for a task).
	Workspace string
	Session   string
	Turn      string
	// Tool is the tool the decision is about, empty when none.
	Tool string
	// ArgsDigest is ArgsDigest of the tool call's arguments, or empty.
	ArgsDigest string
	// DiffHash is Digest of the patch's unified diff, or empty.
	DiffHash string
	// ExitCode is a command's exit status; nil when not a command or when
	// the command did not exit (killed, timed out).
	ExitCode *int
	// Reason is a human-readable explanation (the policy rule, the user's
	// comment, the error), or empty.
	Reason string
	// Data is an optional free-form JSON object (the task front-end puts
	// its task result here). It is stored in RFC 8785 canonical form.
	Data json.RawMessage
	// Prev is the Hash of the previous receipt of the log, "" for the
	// first.
	Prev string
	// Hash is "sha256:<hex>" of the receipt's canonical form without the
	// hash and sig members (see the package documentation).
	Hash string
	// KeyID names the signing key (KeyID of its public key) and Sig is the
	// standard base64 (padded) Ed25519 signature of the ASCII bytes of
	// Hash; both empty when the log has no signer.
	KeyID string
	Sig   string
}

// wireReceipt is the JSON form of a Receipt.
type wireReceipt struct {
	Version    int             `json:"version"`
	ID         string          `json:"id"`
	Time       string          `json:"time"`
	Kind       Kind            `json:"kind"`
	Actor      string          `json:"actor"`
	Workspace  string          `json:"workspace"`
	Session    string          `json:"session"`
	Turn       string          `json:"turn"`
	Tool       string          `json:"tool"`
	ArgsDigest string          `json:"args_digest"`
	DiffHash   string          `json:"diff_hash"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Reason     string          `json:"reason"`
	Data       json.RawMessage `json:"data,omitempty"`
	Prev       string          `json:"prev"`
	Hash       string          `json:"hash,omitempty"`
	KeyID      string          `json:"key_id,omitempty"`
	Sig        string          `json:"sig,omitempty"`
}

// Member names: those that must be present in every line, and the rest.
var (
	requiredMembers = []string{"actor", "args_digest", "diff_hash", "hash", "id", "kind",
		"prev", "reason", "session", "time", "tool", "turn", "version", "workspace"}
	optionalMembers = []string{"data", "exit_code", "key_id", "sig"}
)

func (r *Receipt) wire() wireReceipt {
	w := wireReceipt{
		Version: r.Version, ID: r.ID, Kind: r.Kind, Actor: r.Actor,
		Workspace: r.Workspace, Session: r.Session, Turn: r.Turn, Tool: r.Tool,
		ArgsDigest: r.ArgsDigest, DiffHash: r.DiffHash, ExitCode: r.ExitCode,
		Reason: r.Reason, Data: r.Data, Prev: r.Prev, Hash: r.Hash, KeyID: r.KeyID, Sig: r.Sig,
	}
	if !r.Time.IsZero() {
		w.Time = r.Time.UTC().Format(TimeFormat)
	}
	return w
}

// MarshalJSON returns the receipt as one canonical JSON object (RFC 8785),
// the exact bytes of its line without the newline.
func (r Receipt) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.wire())
	if err != nil {
		return nil, err
	}
	return Canonicalize(b)
}

// UnmarshalJSON decodes a receipt line. It does not check the hash or the
// signature (Reader.Verify does); it returns an error wrapping ErrMalformed
// when data is not a version 1 receipt.
func (r *Receipt) UnmarshalJSON(data []byte) error {
	d, err := decodeLine(data)
	if err != nil {
		return err
	}
	*r = d.receipt
	return nil
}

// decoded is a parsed line: the receipt and the hash its content has.
type decoded struct {
	receipt Receipt
	// hash is the hash computed from the line's content; it equals
	// receipt.Hash unless the line was altered.
	hash string
}

// decodeLine parses one line (without its newline) strictly: one JSON
// object with exactly the members of a version 1 receipt, each well-typed
// and well-formed. Errors wrap ErrMalformed.
func decodeLine(line []byte) (decoded, error) {
	members, err := parseObject(line)
	if err != nil {
		return decoded{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	names := make(map[string]bool, len(members))
	for _, m := range members {
		if !slices.Contains(requiredMembers, m.name) && !slices.Contains(optionalMembers, m.name) {
			return decoded{}, fmt.Errorf("%w: unknown member %q", ErrMalformed, m.name)
		}
		names[m.name] = true
	}
	for _, name := range requiredMembers {
		if !names[name] {
			return decoded{}, fmt.Errorf("%w: missing member %q", ErrMalformed, name)
		}
	}
	// The member names are now exactly known ones, so encoding/json's
	// case-insensitive matching cannot pick up a look-alike.
	canon := appendObject(nil, members)
	var w wireReceipt
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return decoded{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	r := Receipt{
		Version: w.Version, ID: w.ID, Kind: w.Kind, Actor: w.Actor,
		Workspace: w.Workspace, Session: w.Session, Turn: w.Turn, Tool: w.Tool,
		ArgsDigest: w.ArgsDigest, DiffHash: w.DiffHash, ExitCode: w.ExitCode,
		Reason: w.Reason, Data: w.Data, Prev: w.Prev, Hash: w.Hash, KeyID: w.KeyID, Sig: w.Sig,
	}
	if err := checkDecoded(&r, w.Time, names); err != nil {
		return decoded{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return decoded{receipt: r, hash: Digest(appendObject(nil, members, "hash", "sig"))}, nil
}

// checkDecoded checks the members' values and sets r.Time from ts.
func checkDecoded(r *Receipt, ts string, present map[string]bool) error {
	if r.Version != Version {
		return fmt.Errorf("unsupported version %d", r.Version)
	}
	if r.ID == "" {
		return fmt.Errorf("empty id")
	}
	t, err := time.Parse(TimeFormat, ts)
	if err != nil || t.Format(TimeFormat) != ts { // time.Parse also takes "1:02:03,5"
		return fmt.Errorf("time %q is not in the form %s", ts, TimeFormat)
	}
	r.Time = t
	if r.Kind == "" {
		return fmt.Errorf("empty kind")
	}
	if r.Actor == "" {
		return fmt.Errorf("empty actor")
	}
	for _, d := range []struct{ name, v string }{{"args_digest", r.ArgsDigest}, {"diff_hash", r.DiffHash}, {"prev", r.Prev}} {
		if d.v != "" && !validDigest(d.v) {
			return fmt.Errorf("%s %q is not sha256:<64 lower-case hex>", d.name, d.v)
		}
	}
	if !validDigest(r.Hash) {
		return fmt.Errorf("hash %q is not sha256:<64 lower-case hex>", r.Hash)
	}
	if present["exit_code"] && r.ExitCode == nil {
		return fmt.Errorf("exit_code is null")
	}
	if present["data"] && (len(r.Data) == 0 || r.Data[0] != '{') {
		return fmt.Errorf("data is not an object")
	}
	if present["key_id"] != present["sig"] {
		return fmt.Errorf("key_id and sig must appear together")
	}
	if present["sig"] {
		if !validKeyID(r.KeyID) {
			return fmt.Errorf("key_id %q is not 16 lower-case hex digits", r.KeyID)
		}
		sig, err := base64.StdEncoding.Strict().DecodeString(r.Sig)
		if err != nil || len(sig) != ed25519.SignatureSize {
			return fmt.Errorf("sig is not the base64 of a %d-byte Ed25519 signature", ed25519.SignatureSize)
		}
	}
	return nil
}

// validate checks what Append needs from the caller.
// It replaces invalid UTF-8 in the strings with U+FFFD, as encoding them
// would, so that the receipt Append returns is the one stored.
func (r *Receipt) validate() error {
	for _, s := range []*string{&r.ID, &r.Actor, &r.Workspace, &r.Session, &r.Turn, &r.Tool, &r.Reason} {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
	if !r.Kind.known() {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidReceipt, r.Kind)
	}
	if r.Actor == "" {
		return fmt.Errorf("%w: empty actor", ErrInvalidReceipt)
	}
	if r.ArgsDigest != "" && !validDigest(r.ArgsDigest) {
		return fmt.Errorf("%w: args_digest %q is not sha256:<64 lower-case hex>", ErrInvalidReceipt, r.ArgsDigest)
	}
	if r.DiffHash != "" && !validDigest(r.DiffHash) {
		return fmt.Errorf("%w: diff_hash %q is not sha256:<64 lower-case hex>", ErrInvalidReceipt, r.DiffHash)
	}
	// Encoding only adds bytes, so this catches most oversized receipts
	// before they are encoded; Append checks the encoded line too.
	if n := len(r.ID) + len(r.Actor) + len(r.Workspace) + len(r.Session) + len(r.Turn) + len(r.Tool) +
		len(r.Reason) + len(r.Data); n > MaxLineSize {
		return fmt.Errorf("%w: %d bytes of content, more than a line may hold (%d)", ErrInvalidReceipt, n, MaxLineSize)
	}
	if len(r.Data) > 0 {
		c, err := Canonicalize(r.Data)
		if err != nil {
			return fmt.Errorf("%w: data: %w", ErrInvalidReceipt, err)
		}
		if c[0] != '{' {
			return fmt.Errorf("%w: data is not a JSON object", ErrInvalidReceipt)
		}
		r.Data = c
	}
	return nil
}

// seal computes r.Hash over r (with Version, ID, Time, Prev and, when key is
// set, KeyID already final), signs it with key when key is not nil, and
// returns the line: the canonical JSON of the whole receipt and a newline.
func (r *Receipt) seal(key ed25519.PrivateKey, keyID string) ([]byte, error) {
	r.Hash, r.Sig, r.KeyID = "", "", keyID
	body, err := json.Marshal(r.wire())
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	members, err := parseObject(body)
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	r.Hash = Digest(appendObject(nil, members))
	members = append(members, member{name: "hash", value: appendString(nil, r.Hash)})
	if key != nil {
		r.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(r.Hash)))
		members = append(members, member{name: "sig", value: appendString(nil, r.Sig)})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	return append(appendObject(nil, members), '\n'), nil
}
