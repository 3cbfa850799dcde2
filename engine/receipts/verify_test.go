package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// signedLog writes a signed log of n receipts in March 2025 and returns its
// directory and month file.
func signedLog(t *testing.T, n int) (dir, path string, rs []Receipt) {
	t.Helper()
	dir = t.TempDir()
	l := openLog(t, dir, testKey(1), newClock("2025-03-01T00:00:00Z", time.Second))
	rs = appendN(t, l, 0, n)
	return dir, l.Path(rs[0]), rs
}

// rehash replaces a line's hash member with the hash of its (edited)
// content, as a forger without the key would, keeping its signature.
func rehash(t *testing.T, line []byte) []byte {
	t.Helper()
	members, err := parseObject(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	h := Digest(appendObject(nil, members, "hash", "sig"))
	for i := range members {
		if members[i].name == "hash" {
			members[i].value = appendString(nil, h)
		}
	}
	return append(appendObject(nil, members), '\n')
}

// setMember sets a string member of a line, keeping everything else.
func setMember(t *testing.T, line []byte, name, value string) []byte {
	t.Helper()
	members, err := parseObject(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range members {
		if members[i].name == name {
			members[i].value = appendString(nil, value)
		}
	}
	return append(appendObject(nil, members), '\n')
}

func TestVerifyDetectsTampering(t *testing.T) {
	other := testKey(9)
	otherPub := other.Public().(ed25519.PublicKey)
	tests := []struct {
		name   string
		edit   func(t *testing.T, lines [][]byte, dir string) [][]byte
		opts   VerifyOptions
		line   int
		want   error
		passes int // receipts verified before the bad line
	}{
		{
			name: "field changed",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[2] = bytes.Replace(ls[2], []byte(`"actor":"approve-all"`), []byte(`"actor":"user"`), 1)
				return ls
			},
			line: 3, want: ErrHashMismatch, passes: 2,
		},
		{
			name: "field changed and hash recomputed",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[2] = rehash(t, bytes.Replace(ls[2], []byte(`"actor":"approve-all"`), []byte(`"actor":"user"`), 1))
				return ls
			},
			line: 3, want: ErrBadSignature, passes: 2,
		},
		{
			name: "member added",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[1] = bytes.Replace(ls[1], []byte(`{`), []byte(`{"approved_by":"eve",`), 1)
				return ls
			},
			line: 2, want: ErrMalformed, passes: 1,
		},
		{
			name: "line deleted",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				return append(ls[:1], ls[2:]...)
			},
			line: 2, want: ErrChainBroken, passes: 1,
		},
		{
			name: "first line deleted",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte { return ls[1:] },
			line: 1, want: ErrChainBroken, passes: 0,
		},
		{
			name: "lines reordered",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[2], ls[3] = ls[3], ls[2]
				return ls
			},
			line: 3, want: ErrChainBroken, passes: 2,
		},
		{
			name: "line duplicated",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				return append(ls[:4], append([][]byte{ls[3]}, ls[4:]...)...)
			},
			line: 5, want: ErrChainBroken, passes: 4,
		},
		{
			name: "signature from another key",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				d, err := decodeLine(bytes.TrimSuffix(ls[1], []byte("\n")))
				if err != nil {
					t.Fatal(err)
				}
				sig := base64.StdEncoding.EncodeToString(ed25519.Sign(other, []byte(d.receipt.Hash)))
				ls[1] = setMember(t, ls[1], "sig", sig)
				return ls
			},
			line: 2, want: ErrBadSignature, passes: 1,
		},
		{
			name: "another key's id and signature",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				// key_id is hashed, so changing it breaks the hash.
				d, _ := decodeLine(bytes.TrimSuffix(ls[1], []byte("\n")))
				sig := base64.StdEncoding.EncodeToString(ed25519.Sign(other, []byte(d.receipt.Hash)))
				ls[1] = setMember(t, setMember(t, ls[1], "sig", sig), "key_id", KeyID(otherPub))
				return ls
			},
			line: 2, want: ErrHashMismatch, passes: 1,
		},
		{
			name: "re-signed with another key, not published",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[1] = resign(t, setMember(t, ls[1], "reason", "forged"), other)
				return ls
			},
			line: 2, want: ErrUnknownKey, passes: 1,
		},
		{
			name: "re-signed with another key published beside the log",
			edit: func(t *testing.T, ls [][]byte, dir string) [][]byte {
				if err := publishKey(dir, otherPub); err != nil {
					t.Fatal(err)
				}
				ls[1] = resign(t, setMember(t, ls[1], "reason", "forged"), other)
				return ls
			},
			// The forged line verifies; the next one's prev exposes it.
			line: 3, want: ErrChainBroken, passes: 2,
		},
		{
			name: "re-signed with a published key, verifier pins the real key",
			edit: func(t *testing.T, ls [][]byte, dir string) [][]byte {
				if err := publishKey(dir, otherPub); err != nil {
					t.Fatal(err)
				}
				ls[1] = resign(t, setMember(t, ls[1], "reason", "forged"), other)
				return ls
			},
			opts: VerifyOptions{PublicKeys: []ed25519.PublicKey{testKey(1).Public().(ed25519.PublicKey)}},
			line: 2, want: ErrUnknownKey, passes: 1,
		},
		{
			name: "signature stripped, signatures required",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				members, _ := parseObject(bytes.TrimSuffix(ls[4], []byte("\n")))
				// Dropping key_id changes the hash; rehash as a forger would.
				ls[4] = rehash(t, append(appendObject(nil, members, "sig", "key_id"), '\n'))
				return ls
			},
			opts: VerifyOptions{RequireSigned: true},
			line: 5, want: ErrUnsigned, passes: 4,
		},
		{
			name: "time moved back",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				ls[3] = resign(t, setMember(t, ls[3], "time", "2025-03-01T00:00:00.000000000Z"), testKey(1))
				ls[4] = resign(t, setMember(t, ls[4], "prev", hashOf(t, ls[3])), testKey(1))
				ls[5] = resign(t, setMember(t, ls[5], "prev", hashOf(t, ls[4])), testKey(1))
				return ls
			},
			line: 4, want: ErrMisplaced, passes: 3,
		},
		{
			name: "blank line",
			edit: func(t *testing.T, ls [][]byte, _ string) [][]byte {
				return append(ls[:2], append([][]byte{[]byte("\n")}, ls[2:]...)...)
			},
			line: 3, want: ErrMalformed, passes: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, path, _ := signedLog(t, 6)
			verify(t, dir, VerifyOptions{RequireSigned: true})
			writeLines(t, path, tt.edit(t, readLines(t, path), dir))
			rep := verifyFails(t, dir, tt.opts, path, tt.line, tt.want)
			if rep.Receipts != tt.passes {
				t.Errorf("verified %d receipts before the bad line, want %d", rep.Receipts, tt.passes)
			}
		})
	}
}

// resign recomputes a line's hash and signs it with key, as the holder of
// key would.
func resign(t *testing.T, line []byte, key ed25519.PrivateKey) []byte {
	t.Helper()
	line = setMember(t, line, "key_id", KeyID(key.Public().(ed25519.PublicKey)))
	line = rehash(t, line)
	h := hashOf(t, line)
	return setMember(t, line, "sig", base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(h))))
}

func hashOf(t *testing.T, line []byte) string {
	t.Helper()
	d, err := decodeLine(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	return d.receipt.Hash
}

// Moving a receipt into the next month's file keeps the chain order but
// breaks the layout.
func TestVerifyDetectsMisplacedReceipt(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2025-01-31T23:59:57Z", time.Second)
	l := openLog(t, dir, nil, c)
	appendN(t, l, 0, 4) // 57, 58, 59 in January, 00 in February
	jan, feb := Month{2025, time.January}.File(dir), Month{2025, time.February}.File(dir)
	jl, fl := readLines(t, jan), readLines(t, feb)
	writeLines(t, jan, jl[:2])
	writeLines(t, feb, append([][]byte{jl[2]}, fl...))
	verifyFails(t, dir, VerifyOptions{}, feb, 1, ErrMisplaced)
}

// rewindHead writes the signed head a log had when it held the receipts
// rs[:n] (none for n = 0), as a crash during the Append of receipt n+1
// leaves it.
func rewindHead(t *testing.T, dir string, rs []Receipt, n int) {
	t.Helper()
	if n == 0 {
		if err := os.Remove(filepath.Join(dir, HeadFile)); err != nil {
			t.Fatal(err)
		}
		return
	}
	key := testKey(1)
	_, line, err := sealHead(n, rs[n-1].Hash, rs[n-1].Time, key, KeyID(key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeHeadFile(dir, line); err != nil {
		t.Fatal(err)
	}
}

// A crash mid-write leaves a torn last line: Verify reports it, and the next
// Append moves it aside and continues the chain from the last whole line.
func TestTornLastLine(t *testing.T) {
	tests := []struct {
		name string
		tear func(data []byte) []byte
	}{
		{"prefix of a line", func(d []byte) []byte { return d[:len(d)-40] }},
		{"only the newline missing", func(d []byte) []byte { return d[:len(d)-1] }},
		{"zeros after the last line", func(d []byte) []byte { return append(d, make([]byte, 512)...) }},
		{"first line torn", func(d []byte) []byte { return d[:bytes.IndexByte(d, '\n')-3] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, path, rs := signedLog(t, 3)
			data, _ := os.ReadFile(path)
			torn := tt.tear(data)
			os.WriteFile(path, torn, 0o600)
			whole := bytes.Count(torn, []byte("\n"))
			if whole < len(rs) {
				// The torn receipt's Append never got to its head.
				rewindHead(t, dir, rs, whole)
			}
			rep := verifyFails(t, dir, VerifyOptions{}, path, whole+1, ErrTruncated)
			if rep.Receipts != whole {
				t.Errorf("verified %d before the torn line, want %d", rep.Receipts, whole)
			}
			if entries, err := NewReader(dir).List(context.Background(), Month{}); len(entries) != whole || !errors.Is(err, ErrTruncated) {
				t.Errorf("list: %d entries, %v", len(entries), err)
			}

			var logged bytes.Buffer
			l, err := Open(dir, Options{Key: testKey(1), Logger: newTextLogger(&logged), Now: newClock("2025-03-02T00:00:00Z", time.Second).now})
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.Append(context.Background(), sample(7))
			if err != nil {
				t.Fatal(err)
			}
			wantPrev := ""
			if whole > 0 {
				wantPrev = rs[whole-1].Hash
			}
			if r.Prev != wantPrev {
				t.Errorf("prev %s, want %s", r.Prev, wantPrev)
			}
			rep = verify(t, dir, VerifyOptions{RequireSigned: true})
			if rep.Receipts != whole+1 {
				t.Errorf("after repair %d receipts, want %d", rep.Receipts, whole+1)
			}
			aside, err := os.ReadFile(path + ".torn")
			if err != nil || !bytes.Equal(aside, append(torn[len(torn)-len(aside)+1:], '\n')) {
				t.Errorf("torn bytes not saved: %q, %v", aside, err)
			}
			if !strings.Contains(logged.String(), "torn") {
				t.Errorf("no warning logged: %q", logged.String())
			}
		})
	}
}

// A whole last line that does not match its hash is not a crash artefact:
// Append refuses to extend the chain and names the line.
func TestAppendRefusesDamagedHead(t *testing.T) {
	dir, path, _ := signedLog(t, 3)
	ls := readLines(t, path)
	ls[2] = bytes.Replace(ls[2], []byte(`"actor":"approve-all"`), []byte(`"actor":"approve-any"`), 1)
	writeLines(t, path, ls)
	before, _ := os.ReadFile(path)
	l := openLog(t, dir, testKey(1), nil)
	_, err := l.Append(context.Background(), sample(3))
	var le *LineError
	if !errors.As(err, &le) || le.File != path || le.Line != 3 || !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("got %v, want %s:3: hash mismatch", err, path)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("Append changed a damaged log")
	}

	ls[2] = []byte("{not json}\n")
	writeLines(t, path, ls)
	if _, err := l.Append(context.Background(), sample(3)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("got %v, want ErrMalformed", err)
	}
}

// A log without a signer is a hash chain: it verifies, and a signature
// requirement fails it.
func TestUnsignedLog(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, newClock("2025-03-01T00:00:00Z", time.Second))
	rs := appendN(t, l, 0, 3)
	if rs[0].Sig != "" || rs[0].KeyID != "" {
		t.Errorf("unsigned log signed: %+v", rs[0])
	}
	if _, err := os.Stat(filepath.Join(dir, PublicKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unsigned log published a key: %v", err)
	}
	rep := verify(t, dir, VerifyOptions{})
	if rep.Receipts != 3 || rep.Signed != 0 {
		t.Errorf("report %+v", rep)
	}
	verifyFails(t, dir, VerifyOptions{RequireSigned: true}, l.Path(rs[0]), 1, ErrUnsigned)

	// Signing can start later; the chain goes on and both kinds verify.
	l2 := openLog(t, dir, testKey(3), newClock("2025-03-02T00:00:00Z", time.Second))
	appendN(t, l2, 3, 2)
	rep = verify(t, dir, VerifyOptions{})
	if rep.Receipts != 5 || rep.Signed != 2 {
		t.Errorf("report %+v", rep)
	}
}

// A key rotation keeps old receipts verifiable: receipts.pub keeps every
// key.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2025-03-01T00:00:00Z", time.Second)
	appendN(t, openLog(t, dir, testKey(1), c), 0, 2)
	appendN(t, openLog(t, dir, testKey(2), c), 2, 2)
	appendN(t, openLog(t, dir, testKey(1), c), 4, 1)
	keys, err := LoadPublicKeys(dir)
	if err != nil || len(keys) != 2 {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	rep := verify(t, dir, VerifyOptions{RequireSigned: true})
	if rep.Receipts != 5 || rep.Signed != 5 {
		t.Errorf("report %+v", rep)
	}
}

func TestVerifyEmptyAndMissing(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		rep, err := NewReader(dir).Verify(context.Background(), VerifyOptions{})
		if err != nil || rep != (Report{}) {
			t.Errorf("%s: %+v, %v", dir, rep, err)
		}
	}
}
