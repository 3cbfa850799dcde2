package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1,2.50,-0,1e21,"\u00e9\ud83d\ude00"]}`, `null`, `"\u001f"`, `[{"":{}}]`,
		`1E400`, `{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `123456789012345678901234567890`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("error %v does not wrap ErrInvalidJSON", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", data, out, again, err)
		}
		var a, b any
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", data, out)
		}
	})
}

// fuzzSeedLog returns the month file of a small signed log in 2025-01, with
// its public key file, for seeding.
func fuzzSeedLog(f *testing.F) (monthFile, pubFile []byte) {
	dir := f.TempDir()
	l, err := Open(dir, Options{Key: testKey(1), Now: newClock("2025-01-31T23:59:50Z", time.Second).now})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		if _, err := l.Append(context.Background(), sample(i)); err != nil {
			f.Fatal(err)
		}
	}
	monthFile, _ = os.ReadFile(Month{2025, time.January}.File(dir))
	pubFile, _ = os.ReadFile(filepath.Join(dir, PublicKeyFile))
	return monthFile, pubFile
}

func FuzzDecodeLine(f *testing.F) {
	log, _ := fuzzSeedLog(f)
	for _, line := range bytes.Split(log, []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := decodeLine(line)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// A decoded receipt encodes back to a line that decodes to the
		// same receipt with the same content hash.
		enc, err := json.Marshal(d.receipt)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decodeLine(enc)
		if err != nil {
			t.Fatalf("re-encoded %q: %v", enc, err)
		}
		if d2.hash != d.hash || !reflect.DeepEqual(d2.receipt, d.receipt) {
			t.Fatalf("round trip changed the receipt:\n%q\n%q", line, enc)
		}
	})
}

// FuzzVerify runs Verify on arbitrary month-file contents, then Append, and
// checks that Verify never panics, that it fails only with a *LineError,
// and that Append leaves a valid log whenever the log was valid, or valid
// but for a torn last line.
func FuzzVerify(f *testing.F) {
	log, pub := fuzzSeedLog(f)
	f.Add(log)
	f.Add(log[:len(log)-1])
	f.Add(log[:len(log)/2])
	f.Add(append(bytes.Clone(log), 0, 0, 0))
	f.Add([]byte("\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := Month{2025, time.January}.File(dir)
		os.MkdirAll(filepath.Dir(path), 0o700)
		os.WriteFile(path, data, 0o600)
		os.WriteFile(filepath.Join(dir, PublicKeyFile), pub, 0o644)

		rep, err := NewReader(dir).Verify(context.Background(), VerifyOptions{})
		var le *LineError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("verify: %v is not a *LineError", err)
		}
		entries, lerr := NewReader(dir).List(context.Background(), Month{})
		if err == nil && (lerr != nil || len(entries) != rep.Receipts) {
			t.Fatalf("verify found %d receipts, list %d, %v", rep.Receipts, len(entries), lerr)
		}
		tornOnly := errors.Is(err, ErrTruncated)
		if err != nil && !tornOnly {
			return // damaged: Append may refuse or go on; Verify will still fail
		}
		l, oerr := Open(dir, Options{Key: testKey(1), Now: newClock("2025-01-31T23:59:59Z", time.Second).now})
		if oerr != nil {
			t.Fatal(oerr)
		}
		if _, aerr := l.Append(context.Background(), sample(0)); aerr != nil {
			t.Fatalf("append to a log that verified (%v): %v", err, aerr)
		}
		rep2, err2 := NewReader(dir).Verify(context.Background(), VerifyOptions{})
		if err2 != nil || rep2.Receipts != rep.Receipts+1 {
			t.Fatalf("after append: %d receipts (before %d), %v", rep2.Receipts, rep.Receipts, err2)
		}
	})
}
