package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// HeadFile is the name of a log's signed head in the log directory (see
// the package documentation, "Signed head").
const HeadFile = "receipts.head"

// headType is the type member of every head; it keeps a head's hash (and
// so its signature) from ever being a receipt's.
const headType = "plexus-receipts-head"

// maxHeadFile bounds how much of a head file is read.
const maxHeadFile = 4 << 10

// Head is a log's signed checkpoint: when it was written the log's chain
// held Count receipts and the last of them had the hash Last and the
// time Time. Hash is the head's own hash and Sig its signature, as for a
// receipt (see the package documentation).
type Head struct {
	Count int
	Last  string
	Time  time.Time
	KeyID string
	Hash  string
	Sig   string
}

// wireHead is a head's JSON form.
type wireHead struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	Count   int    `json:"count"`
	Last    string `json:"last"`
	Time    string `json:"time"`
	KeyID   string `json:"key_id,omitempty"`
	Hash    string `json:"hash,omitempty"`
	Sig     string `json:"sig,omitempty"`
}

// sealHead returns the canonical JSON line of a head for the chain end
// (count, last, t), hashed and, with a key, signed.
func sealHead(count int, last string, t time.Time, key ed25519.PrivateKey, keyID string) (Head, []byte, error) {
	h := Head{Count: count, Last: last, Time: t.UTC(), KeyID: keyID}
	body, err := json.Marshal(wireHead{Type: headType, Version: Version, Count: count, Last: last, Time: h.Time.Format(TimeFormat), KeyID: keyID})
	if err != nil {
		return Head{}, nil, err
	}
	members, err := parseObject(body)
	if err != nil {
		return Head{}, nil, err
	}
	h.Hash = Digest(appendObject(nil, members))
	members = append(members, member{name: "hash", value: appendString(nil, h.Hash)})
	if key != nil {
		h.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(h.Hash)))
		members = append(members, member{name: "sig", value: appendString(nil, h.Sig)})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	return h, append(appendObject(nil, members), '\n'), nil
}

// decodeHead parses a head file's content and checks its hash. Errors
// wrap ErrBadHead.
func decodeHead(data []byte) (Head, error) {
	data = bytes.TrimSuffix(data, []byte("\n"))
	members, err := parseObject(data)
	if err != nil {
		return Head{}, fmt.Errorf("%w: %w", ErrBadHead, err)
	}
	var w wireHead
	dec := json.NewDecoder(bytes.NewReader(appendObject(nil, members)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Head{}, fmt.Errorf("%w: %w", ErrBadHead, err)
	}
	t, err := time.Parse(TimeFormat, w.Time)
	switch {
	case w.Type != headType || w.Version != Version:
		return Head{}, fmt.Errorf("%w: type %q version %d, want %q version %d", ErrBadHead, w.Type, w.Version, headType, Version)
	case err != nil:
		return Head{}, fmt.Errorf("%w: time %q", ErrBadHead, w.Time)
	case w.Count < 0 || (w.Count == 0) != (w.Last == "") || w.Last != "" && !validDigest(w.Last):
		return Head{}, fmt.Errorf("%w: count %d with last %q", ErrBadHead, w.Count, w.Last)
	case w.KeyID != "" && (!validKeyID(w.KeyID) || w.Sig == ""):
		return Head{}, fmt.Errorf("%w: key_id %q without a signature", ErrBadHead, w.KeyID)
	case w.Sig != "" && w.KeyID == "":
		return Head{}, fmt.Errorf("%w: a signature without key_id", ErrBadHead)
	}
	h := Head{Count: w.Count, Last: w.Last, Time: t, KeyID: w.KeyID, Hash: w.Hash, Sig: w.Sig}
	if got := Digest(appendObject(nil, members, "hash", "sig")); got != h.Hash {
		return Head{}, fmt.Errorf("%w: content hashes to %s, the head says %s", ErrBadHead, got, h.Hash)
	}
	return h, nil
}

// verifyHead checks h's signature with the keys by key id. A head
// without a signature passes here; Verify requires one when the receipt
// it anchors is signed.
func verifyHead(h Head, byID map[string]ed25519.PublicKey) error {
	if h.KeyID == "" {
		return nil
	}
	pub, ok := byID[h.KeyID]
	if !ok {
		return fmt.Errorf("%w: the head is signed by key_id %s: %w", ErrBadHead, h.KeyID, ErrUnknownKey)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(h.Sig)
	if err != nil || !ed25519.Verify(pub, []byte(h.Hash), sig) {
		return fmt.Errorf("%w: the head's signature: %w", ErrBadHead, ErrBadSignature)
	}
	return nil
}

// readHeadFile returns the content of dir's head file, nil when there is
// none.
func readHeadFile(dir string) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, HeadFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxHeadFile))
}

// writeHeadFile replaces dir's head file with line atomically: a
// temporary file (one name: the caller holds the log's lock, and a crash
// leaves no litter beyond it), fsynced, renamed over it, and the
// directory fsynced.
func writeHeadFile(dir string, line []byte) error {
	tmp, err := os.OpenFile(filepath.Join(dir, HeadFile+".tmp"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = tmp.Write(line)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, HeadFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(dir)
}

// countReceipts counts the whole lines of the month files: the receipts
// of a log whose last line is whole.
func countReceipts(files []monthFile) (int, error) {
	n := 0
	for _, mf := range files {
		f, err := os.Open(mf.path)
		if err != nil {
			return 0, err
		}
		k, err := countLines(f, mf.info.Size())
		f.Close()
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}
