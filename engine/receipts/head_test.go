package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// verifyErr runs Verify and checks that it fails with want.
func verifyErr(t *testing.T, dir string, opts VerifyOptions, want error) Report {
	t.Helper()
	rep, err := NewReader(dir).Verify(context.Background(), opts)
	if !errors.Is(err, want) {
		t.Fatalf("verify: got %v, want %v", err, want)
	}
	return rep
}

// Removing whole receipts from the end of a log, or its whole last month
// file, leaves a valid chain that only the signed head shows is short;
// Append then refuses to extend the log (a new head would hide it).
// Before heads, Verify accepted such a log (issue 14 item 4).
func TestHeadDetectsTruncation(t *testing.T) {
	t.Run("last lines", func(t *testing.T) {
		dir, path, rs := signedLog(t, 5)
		writeLines(t, path, readLines(t, path)[:3])
		rep := verifyErr(t, dir, VerifyOptions{}, ErrMissingReceipts)
		if rep.Receipts != 3 || rep.Anchor == nil || rep.Anchor.Count != 5 || rep.Anchor.Last != rs[4].Hash {
			t.Errorf("report %+v anchor %+v", rep, rep.Anchor)
		}
		l := openLog(t, dir, testKey(1), newClock("2025-03-02T00:00:00Z", time.Second))
		if _, err := l.Append(context.Background(), sample(9)); !errors.Is(err, ErrMissingReceipts) {
			t.Errorf("append to a truncated log: %v, want ErrMissingReceipts", err)
		}
		if _, err := l.Repair(context.Background()); !errors.Is(err, ErrMissingReceipts) {
			t.Errorf("repair of a truncated log: %v, want ErrMissingReceipts", err)
		}
	})
	t.Run("last month file", func(t *testing.T) {
		dir := t.TempDir()
		l := openLog(t, dir, testKey(1), newClock("2025-01-31T23:59:58Z", time.Second))
		appendN(t, l, 0, 4) // two in January, two in February
		os.Remove(Month{2025, time.February}.File(dir))
		verifyErr(t, dir, VerifyOptions{}, ErrMissingReceipts)
	})
	t.Run("every line", func(t *testing.T) {
		dir, path, _ := signedLog(t, 2)
		os.WriteFile(path, nil, 0o600)
		verifyErr(t, dir, VerifyOptions{}, ErrMissingReceipts)
		l := openLog(t, dir, testKey(1), newClock("2025-03-02T00:00:00Z", time.Second))
		if _, err := l.Append(context.Background(), sample(9)); !errors.Is(err, ErrMissingReceipts) {
			t.Errorf("append to an emptied log: %v, want ErrMissingReceipts", err)
		}
	})
}

// A last receipt rewritten by someone with the key still chains and
// verifies; the head names another hash at its place.
func TestHeadDetectsRewrittenReceipt(t *testing.T) {
	dir, path, _ := signedLog(t, 3)
	lines := readLines(t, path)
	lines[2] = resign(t, setMember(t, lines[2], "reason", "rewritten"), testKey(1))
	writeLines(t, path, lines)
	verifyFails(t, dir, VerifyOptions{}, path, 3, ErrHeadMismatch)
}

// A head changed without the key does not verify.
func TestHeadForgery(t *testing.T) {
	dir, path, rs := signedLog(t, 4)
	writeLines(t, path, readLines(t, path)[:2])
	headPath := filepath.Join(dir, HeadFile)
	orig, err := os.ReadFile(headPath)
	if err != nil {
		t.Fatal(err)
	}
	// A forger moves the head back to receipt 2 (to hide the removal).
	back := func(w *wireHead) { w.Count, w.Last = 2, rs[1].Hash }
	for _, tc := range []struct {
		name string
		head []byte
	}{
		{"moved back", editHead(t, orig, back, false)},
		{"moved back, rehashed", editHead(t, orig, back, true)},
		{"moved back, unsigned", editHead(t, orig, func(w *wireHead) { back(w); w.KeyID, w.Sig = "", "" }, true)},
		{"not JSON", []byte("{")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(headPath, tc.head, 0o600)
			verifyErr(t, dir, VerifyOptions{}, ErrBadHead)
		})
	}
	// A head signed by another key is refused as an unknown key.
	other := testKey(2)
	_, forged, err := sealHead(2, rs[1].Hash, rs[1].Time, other, KeyID(other.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(headPath, forged, 0o600)
	if _, err := NewReader(dir).Verify(context.Background(), VerifyOptions{}); !errors.Is(err, ErrBadHead) || !errors.Is(err, ErrUnknownKey) {
		t.Errorf("head signed by another key: %v", err)
	}
}

// A crash between a receipt's line and its head leaves the head one
// behind: Verify accepts it and says so; the next Append catches up.
func TestHeadBehindAfterCrash(t *testing.T) {
	dir, _, rs := signedLog(t, 3)
	rewindHead(t, dir, rs, 2)
	rep := verify(t, dir, VerifyOptions{RequireHead: true})
	if rep.Receipts != 3 || rep.Anchor.Count != 2 || rep.AfterAnchor != 1 {
		t.Errorf("report %+v anchor %+v", rep, rep.Anchor)
	}
	l := openLog(t, dir, testKey(1), newClock("2025-03-02T00:00:00Z", time.Second))
	appendN(t, l, 3, 1)
	if rep := verify(t, dir, VerifyOptions{RequireHead: true}); rep.Anchor.Count != 4 || rep.AfterAnchor != 0 {
		t.Errorf("after an append: anchor %+v, %d after it", rep.Anchor, rep.AfterAnchor)
	}
}

// A log written before heads existed verifies (RequireHead refuses it),
// and its next Append writes a head with the right count.
func TestLogWithoutHead(t *testing.T) {
	dir, _, _ := signedLog(t, 3)
	os.Remove(filepath.Join(dir, HeadFile))
	if rep := verify(t, dir, VerifyOptions{}); rep.Anchor != nil || rep.Receipts != 3 {
		t.Errorf("report %+v", rep)
	}
	verifyErr(t, dir, VerifyOptions{RequireHead: true}, ErrNoHead)
	l := openLog(t, dir, testKey(1), newClock("2025-03-02T00:00:00Z", time.Second))
	appendN(t, l, 3, 1)
	if rep := verify(t, dir, VerifyOptions{RequireHead: true}); rep.Anchor.Count != 4 {
		t.Errorf("anchor %+v, want count 4", rep.Anchor)
	}
}

// Repair moves a torn tail aside and says so, brings a lagging head up
// to the chain's end, leaves a whole log alone, and refuses damage that
// is not a crash's.
func TestRepair(t *testing.T) {
	ctx := context.Background()
	dir, path, rs := signedLog(t, 3)
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-30], 0o600) // receipt 3 torn ...
	rewindHead(t, dir, rs, 2)                      // ... before its head
	l := openLog(t, dir, testKey(1), newClock("2025-03-02T00:00:00Z", time.Second))
	got, err := l.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lineLen := int64(len(data) - bytes.LastIndexByte(data[:len(data)-1], '\n') - 1)
	if len(got.Torn) != 1 || got.Torn[0].File != path || got.Torn[0].Line != 3 || got.Torn[0].Bytes != lineLen-30 ||
		got.Torn[0].SavedTo != path+".torn" || got.HeadWritten || got.Report.Receipts != 2 {
		t.Errorf("repair: %+v", got)
	}
	verify(t, dir, VerifyOptions{RequireHead: true, RequireSigned: true})
	if again, err := l.Repair(ctx); err != nil || len(again.Torn) != 0 || again.HeadWritten {
		t.Errorf("second repair: %+v, %v; want nothing done", again, err)
	}

	// A lagging (here: missing) head is written for the chain's end.
	os.Remove(filepath.Join(dir, HeadFile))
	got, err = l.Repair(ctx)
	if err != nil || !got.HeadWritten || got.Report.Anchor.Count != 2 {
		t.Errorf("repair without a head: %+v, %v", got, err)
	}
	verify(t, dir, VerifyOptions{RequireHead: true})

	// A whole line that is damaged is left alone.
	lines := readLines(t, path)
	lines[0] = setMember(t, lines[0], "reason", "edited")
	writeLines(t, path, lines)
	if _, err := l.Repair(ctx); !errors.Is(err, ErrHashMismatch) {
		t.Errorf("repair of an edited line: %v, want ErrHashMismatch", err)
	}

	// Without the key, a signed log's head is not rewritten.
	dir2, _, _ := signedLog(t, 2)
	os.Remove(filepath.Join(dir2, HeadFile))
	unkeyed := openLog(t, dir2, nil, newClock("2025-03-02T00:00:00Z", time.Second))
	if _, err := unkeyed.Repair(ctx); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("repair of a signed log without its key: %v", err)
	}
}

// editHead changes a head file's content with edit, rehashing it when
// asked (as a forger without the key would), keeping its signature.
func editHead(t *testing.T, data []byte, edit func(*wireHead), rehash bool) []byte {
	t.Helper()
	var w wireHead
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	edit(&w)
	body, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	members, err := parseObject(body)
	if err != nil {
		t.Fatal(err)
	}
	if rehash {
		h := Digest(appendObject(nil, members, "hash", "sig"))
		for i := range members {
			if members[i].name == "hash" {
				members[i].value = appendString(nil, h)
			}
		}
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	return append(appendObject(nil, members), '\n')
}
