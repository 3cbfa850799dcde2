package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test clock that advances by step on every reading.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func newClock(start string, step time.Duration) *clock {
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		panic(err)
	}
	return &clock{t: t, step: step}
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

func (c *clock) set(s string) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// testKey returns a deterministic key; different seeds give different keys.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func openLog(t *testing.T, dir string, key ed25519.PrivateKey, c *clock) *Log {
	t.Helper()
	opts := Options{Key: key}
	if c != nil {
		opts.Now = c.now
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// sample returns the i-th test receipt, varying kinds and optional fields.
func sample(i int) Receipt {
	digest, err := ArgsDigest(fmt.Appendf(nil, `{"command":"go test ./...","n":%d}`, i))
	if err != nil {
		panic(err)
	}
	r := Receipt{
		Kind: KindApproval, Actor: "user", Workspace: "w1", Session: "s1",
		Turn: fmt.Sprintf("t%d", i), Tool: "run_command", ArgsDigest: digest,
	}
	switch i % 4 {
	case 1:
		code := i % 3
		r.Kind, r.Actor, r.ExitCode = KindCommand, "policy", &code
	case 2:
		r.Kind, r.Actor, r.DiffHash, r.Reason = KindPatchApply, "approve-all", Digest([]byte("--- a\n+++ b\n")), "accepted all hunks"
	case 3:
		r = Receipt{Kind: KindTask, Actor: "client:vscode", Data: json.RawMessage(`{"taskId":"t-1", "success":true,"processingTime":123}`)}
	}
	return r
}

func appendN(t *testing.T, l *Log, from, n int) []Receipt {
	t.Helper()
	var out []Receipt
	for i := from; i < from+n; i++ {
		r, err := l.Append(context.Background(), sample(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

func verify(t *testing.T, dir string, opts VerifyOptions) Report {
	t.Helper()
	rep, err := NewReader(dir).Verify(context.Background(), opts)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// verifyFails runs Verify and checks that it fails at file:line with want.
func verifyFails(t *testing.T, dir string, opts VerifyOptions, file string, line int, want error) Report {
	t.Helper()
	rep, err := NewReader(dir).Verify(context.Background(), opts)
	var le *LineError
	if !errors.As(err, &le) {
		t.Fatalf("verify: got %v, want a *LineError", err)
	}
	if le.File != file || le.Line != line || !errors.Is(err, want) {
		t.Fatalf("verify: got %v, want %s:%d: %v", err, file, line, want)
	}
	if !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", file, line)) {
		t.Errorf("error text %q does not start with file:line", err)
	}
	return rep
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", path)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	return lines[:len(lines)-1] // SplitAfter leaves an empty string after the last newline
}

func writeLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(bytes.TrimSuffix(l, []byte("\n")))
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAppendVerifyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	key := testKey(1)
	l := openLog(t, dir, key, newClock("2025-03-10T12:00:00.5Z", time.Second))
	got := appendN(t, l, 0, 8)

	prev := ""
	for i, r := range got {
		if r.Version != Version || r.ID == "" || r.Prev != prev || !validDigest(r.Hash) || r.KeyID != KeyID(key.Public().(ed25519.PublicKey)) || r.Sig == "" {
			t.Fatalf("receipt %d not completed: %+v", i, r)
		}
		if r.Time.Location() != time.UTC {
			t.Errorf("receipt %d time %v not UTC", i, r.Time)
		}
		prev = r.Hash
	}
	path := filepath.Join(dir, "2025", "03", "receipts.jsonl")
	if l.Path(got[0]) != path {
		t.Errorf("Path = %s, want %s", l.Path(got[0]), path)
	}
	rep := verify(t, dir, VerifyOptions{RequireSigned: true})
	if rep.Anchor == nil || rep.Anchor.Count != 8 || rep.Anchor.Last != got[7].Hash || rep.Anchor.KeyID != got[7].KeyID || rep.AfterAnchor != 0 {
		t.Errorf("signed head %+v (%d after it), want one for receipt 8", rep.Anchor, rep.AfterAnchor)
	}
	rep.Anchor = nil
	want := Report{Receipts: 8, Signed: 8, Files: 1, Head: got[7].Hash, Last: got[7].Time}
	if rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}

	entries, err := NewReader(dir).List(context.Background(), Month{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(got) {
		t.Fatalf("listed %d, want %d", len(entries), len(got))
	}
	for i, e := range entries {
		a, _ := json.Marshal(e.Receipt)
		b, _ := json.Marshal(got[i])
		if !bytes.Equal(a, b) || e.File != path || e.Line != i+1 {
			t.Errorf("entry %d: %s at %s:%d\nappended %s", i, a, e.File, e.Line, b)
		}
	}
	// Lines are the canonical JSON of the receipt.
	lines := readLines(t, path)
	for i, line := range lines {
		b, _ := json.Marshal(got[i])
		if string(line) != string(b)+"\n" {
			t.Errorf("line %d: %s\nwant %s", i+1, line, b)
		}
	}
	// Task data is stored canonically.
	if string(got[3].Data) != `{"processingTime":123,"success":true,"taskId":"t-1"}` {
		t.Errorf("data %s", got[3].Data)
	}
}

// TestHashScheme recomputes a receipt's hash and signature by the recipe
// of the package documentation, independently of the package's encoder.
func TestHashScheme(t *testing.T) {
	dir := t.TempDir()
	key := testKey(2)
	l := openLog(t, dir, key, newClock("2025-01-02T03:04:05.000000006Z", time.Second))
	code := 2
	r, err := l.Append(context.Background(), Receipt{
		ID: "r1", Kind: KindCommand, Actor: "user", Workspace: "w", Session: "s", Turn: "t",
		Tool: "shell", ExitCode: &code, Reason: "tests \"failed\"",
		Data: json.RawMessage(`{"z": [1.50, "é"], "a": null}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	keyID := KeyID(key.Public().(ed25519.PublicKey))
	body := `{"actor":"user","args_digest":"","data":{"a":null,"z":[1.5,"é"]},"diff_hash":"","exit_code":2,` +
		`"id":"r1","key_id":"` + keyID + `","kind":"command","prev":"","reason":"tests \"failed\"","session":"s",` +
		`"time":"2025-01-02T03:04:05.000000006Z","tool":"shell","turn":"t","version":1,"workspace":"w"}`
	sum := sha256.Sum256([]byte(body))
	wantHash := "sha256:" + hex.EncodeToString(sum[:])
	if r.Hash != wantHash {
		t.Errorf("hash %s, want %s", r.Hash, wantHash)
	}
	wantSig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(wantHash)))
	if r.Sig != wantSig {
		t.Errorf("sig %s, want %s", r.Sig, wantSig)
	}
	pubSum := sha256.Sum256(key.Public().(ed25519.PublicKey))
	if keyID != hex.EncodeToString(pubSum[:8]) {
		t.Errorf("key id %s", keyID)
	}
	line := readLines(t, l.Path(r))[0]
	wantLine := strings.Replace(body, `"id":"r1",`, `"hash":"`+wantHash+`","id":"r1",`, 1)
	wantLine = strings.Replace(wantLine, `"session":"s",`, `"session":"s","sig":"`+wantSig+`",`, 1) + "\n"
	if string(line) != wantLine {
		t.Errorf("line\n%s\nwant\n%s", line, wantLine)
	}
}

func TestMonthRolloverKeepsChain(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2024-12-31T23:59:58.999999999Z", time.Second)
	l := openLog(t, dir, testKey(1), c)
	dec := appendN(t, l, 0, 2) // 23:59:58.999999999, 23:59:59.999999999
	jan := appendN(t, l, 2, 3) // 2025-01-01T00:00:00.999999999 ...
	c.set("2025-04-30T23:59:59Z")
	apr := appendN(t, l, 5, 1)
	may := appendN(t, l, 6, 2)

	for _, tt := range []struct {
		rs    []Receipt
		month string
	}{{dec, "2024-12"}, {jan, "2025-01"}, {apr, "2025-04"}, {may, "2025-05"}} {
		for _, r := range tt.rs {
			if got := MonthOf(r.Time).String(); got != tt.month {
				t.Errorf("receipt at %v in %s, want %s", r.Time, got, tt.month)
			}
		}
		m, _ := ParseMonth(tt.month)
		if lines := readLines(t, m.File(dir)); len(lines) != len(tt.rs) {
			t.Errorf("%s: %d lines, want %d", tt.month, len(lines), len(tt.rs))
		}
	}
	if jan[0].Prev != dec[1].Hash || apr[0].Prev != jan[2].Hash || may[0].Prev != apr[0].Hash {
		t.Error("chain does not continue across months")
	}
	rep := verify(t, dir, VerifyOptions{})
	if rep.Receipts != 8 || rep.Files != 4 || rep.Head != may[1].Hash {
		t.Errorf("report %+v", rep)
	}
	months, err := NewReader(dir).Months(context.Background())
	if err != nil || fmt.Sprint(months) != "[2024-12 2025-01 2025-04 2025-05]" {
		t.Errorf("months %v, %v", months, err)
	}
	entries, err := NewReader(dir).List(context.Background(), Month{2025, time.January})
	if err != nil || len(entries) != 3 || entries[0].Receipt.Hash != jan[0].Hash {
		t.Errorf("list January: %d entries, %v", len(entries), err)
	}

	// A fresh Log (another process) finds the head in the newest month.
	l2 := openLog(t, dir, nil, newClock("2025-05-02T00:00:00Z", time.Second))
	r, err := l2.Append(context.Background(), sample(9))
	if err != nil || r.Prev != may[1].Hash {
		t.Fatalf("append from a fresh Log: prev %s, %v", r.Prev, err)
	}
	// An empty month file (an Append that crashed after creating it) is
	// skipped: the chain continues from the last non-empty month.
	empty := Month{2025, time.June}.File(dir)
	os.MkdirAll(filepath.Dir(empty), 0o700)
	os.WriteFile(empty, nil, 0o600)
	l3 := openLog(t, dir, nil, newClock("2025-07-01T00:00:00Z", time.Second))
	r2, err := l3.Append(context.Background(), sample(10))
	if err != nil || r2.Prev != r.Hash {
		t.Fatalf("append after an empty month: prev %s, %v", r2.Prev, err)
	}
	verify(t, dir, VerifyOptions{})
}

// A clock that steps back does not put a receipt before its predecessor.
func TestClockStepsBack(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2025-02-01T00:00:00Z", 0)
	l := openLog(t, dir, nil, c)
	a := appendN(t, l, 0, 1)[0]
	c.set("2025-01-31T23:00:00Z")
	b := appendN(t, l, 1, 1)[0]
	if !b.Time.Equal(a.Time) {
		t.Errorf("time %v after %v", b.Time, a.Time)
	}
	verify(t, dir, VerifyOptions{})
}

// The cached head is re-checked: two Logs on one directory (as two
// processes would be) alternate and the chain stays whole.
func TestCachedHeadRechecked(t *testing.T) {
	dir := t.TempDir()
	c := newClock("2025-03-01T00:00:00Z", time.Millisecond)
	l1 := openLog(t, dir, nil, c)
	l2 := openLog(t, dir, nil, c)
	var last Receipt
	for i := range 6 {
		l := l1
		if i%3 == 1 {
			l = l2
		}
		r, err := l.Append(context.Background(), sample(i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Prev != last.Hash {
			t.Fatalf("append %d: prev %s, want %s", i, r.Prev, last.Hash)
		}
		last = r
	}
	verify(t, dir, VerifyOptions{})
}

func TestAppendValidates(t *testing.T) {
	l := openLog(t, t.TempDir(), nil, nil)
	tests := []struct {
		name string
		r    Receipt
	}{
		{"unknown kind", Receipt{Kind: "approve", Actor: "user"}},
		{"no actor", Receipt{Kind: KindApproval}},
		{"bad args digest", Receipt{Kind: KindApproval, Actor: "user", ArgsDigest: "sha256:XYZ"}},
		{"bad diff hash", Receipt{Kind: KindPatchApply, Actor: "user", DiffHash: "md5:00"}},
		{"data not an object", Receipt{Kind: KindTask, Actor: "client:x", Data: json.RawMessage(`[1]`)}},
		{"data null", Receipt{Kind: KindTask, Actor: "client:x", Data: json.RawMessage(`null`)}},
		{"data invalid", Receipt{Kind: KindTask, Actor: "client:x", Data: json.RawMessage(`{"a":}`)}},
		{"too long", Receipt{Kind: KindDenial, Actor: "user", Reason: strings.Repeat("x", MaxLineSize)}},
		// Short enough raw, too long once each byte is escaped as \u0001.
		{"too long encoded", Receipt{Kind: KindDenial, Actor: "user", Reason: strings.Repeat("\x01", MaxLineSize/6+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Append(context.Background(), tt.r); !errors.Is(err, ErrInvalidReceipt) {
				t.Fatalf("got %v, want ErrInvalidReceipt", err)
			}
		})
	}
	if files, _ := listMonthFiles(l.Dir()); len(files) != 0 {
		t.Errorf("refused receipts were written: %v", files)
	}
}

// Invalid UTF-8 is stored as U+FFFD, and Append returns what it stored.
func TestAppendInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, nil)
	r, err := l.Append(context.Background(), Receipt{Kind: KindCommand, Actor: "policy", Reason: "output: \xff\xfeok"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Reason != "output: \uFFFDok" {
		t.Errorf("returned reason %q", r.Reason)
	}
	entries, err := NewReader(dir).List(context.Background(), Month{})
	if err != nil || len(entries) != 1 || entries[0].Receipt.Reason != r.Reason {
		t.Errorf("stored %+v, %v", entries, err)
	}
}

func TestAppendRefusesUnnamableYear(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, newClock("9999-12-31T23:59:59Z", time.Second))
	appendN(t, l, 0, 1)
	if _, err := l.Append(context.Background(), sample(1)); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("year 10000: got %v", err)
	}
	verify(t, dir, VerifyOptions{})
}

func TestAppendAfterCloseAndCancel(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, sample(0)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
	l.Close()
	if _, err := l.Append(context.Background(), sample(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v", err)
	}

	// Another holder of the lock (another process) keeps Append waiting
	// until ctx ends.
	l2 := openLog(t, dir, nil, nil)
	other, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := other.lock.TryLock(); !ok || err != nil {
		t.Fatal("could not take the lock", err)
	}
	defer other.lock.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l2.Append(ctx, sample(0)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("locked elsewhere: got %v", err)
	}
}
