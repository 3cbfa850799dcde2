package plugins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// verifyCase is a verifier over one binary in a temporary directory, with
// a clock the test sets and a log the test reads.
type verifyCase struct {
	t     *testing.T
	dir   string
	bin   string
	cache string
	sum   string
	logs  *bytes.Buffer
	clock time.Time
}

func newVerifyCase(t *testing.T, content string) *verifyCase {
	dir := t.TempDir()
	c := &verifyCase{t: t, dir: dir, bin: filepath.Join(dir, "plexus-tool-x"), cache: filepath.Join(dir, "state", "verified.json"), logs: &bytes.Buffer{}}
	if err := os.WriteFile(c.bin, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	c.sum = hex.EncodeToString(sum[:])
	return c
}

// verifier is a fresh verifier (as in a new process) on the cache file,
// whose clock reads the case's clock.
func (c *verifyCase) verifier() *verifier {
	v := newVerifier(c.cache, slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	v.now = func() time.Time { return c.clock }
	return v
}

// ctime is the binary's status-change time.
func (c *verifyCase) ctime() time.Time {
	f, err := os.Open(c.bin)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	id, _, err := identityOf(f)
	if err != nil {
		c.t.Fatal(err)
	}
	return time.Unix(0, id.CtimeNs)
}

// verify runs v on the binary and reports whether it hashed it.
func (c *verifyCase) verify(v *verifier) (hashed bool, err error) {
	c.t.Helper()
	f, err := os.Open(c.bin)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	before := strings.Count(c.logs.String(), "plugin binary hashed")
	err = v.verify(f, c.bin, c.sum, filepath.Join(c.dir, LockFileName), Ref{Kind: KindTool, Name: "x"})
	return strings.Count(c.logs.String(), "plugin binary hashed") > before, err
}

// TestVerifyOncePerIdentity: a binary is hashed once; later verifiers (a
// new process reading the cache file) trust its unchanged identity.
func TestVerifyOncePerIdentity(t *testing.T) {
	c := newVerifyCase(t, "binary one")
	c.clock = c.ctime().Add(3 * time.Second)
	if hashed, err := c.verify(c.verifier()); err != nil || !hashed {
		t.Fatalf("first verification: hashed %v, %v; want a hash", hashed, err)
	}
	for i := range 3 {
		if hashed, err := c.verify(c.verifier()); err != nil || hashed {
			t.Fatalf("verification %d in a new process: hashed %v, %v; want no hash", i+2, hashed, err)
		}
	}
	fi, err := os.Stat(c.cache)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file %v %v, want mode 0600", fi, err)
	}
}

// TestVerifyRehashesOnChange: any change of the binary makes the next
// verification hash it, and a changed content is refused, even when the
// change kept the size and put the modification time back.
func TestVerifyRehashesOnChange(t *testing.T) {
	c := newVerifyCase(t, "binary one")
	c.clock = c.ctime().Add(3 * time.Second)
	if _, err := c.verify(c.verifier()); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(c.bin)
	// Same size, mtime restored: only the ctime tells.
	if err := os.WriteFile(c.bin, []byte("binary two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(c.bin, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	c.clock = c.ctime().Add(3 * time.Second)
	hashed, err := c.verify(c.verifier())
	var ce *ChecksumError
	if !hashed || !errors.As(err, &ce) || !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("after an in-place change: hashed %v, err %v; want a hash and a *ChecksumError", hashed, err)
	}
	sum := sha256.Sum256([]byte("binary two"))
	if ce.Got != hex.EncodeToString(sum[:]) || ce.Want != c.sum {
		t.Errorf("ChecksumError %+v", ce)
	}

	// The original content back, as a new file renamed over it: another
	// inode, hashed again and accepted.
	tmp := c.bin + ".new"
	if err := os.WriteFile(tmp, []byte("binary one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.bin); err != nil {
		t.Fatal(err)
	}
	c.clock = c.ctime().Add(3 * time.Second)
	if hashed, err := c.verify(c.verifier()); err != nil || !hashed {
		t.Fatalf("after a replacement: hashed %v, %v; want a hash and success", hashed, err)
	}
}

// TestVerifyRacyIdentityNotTrusted: a hash computed within racyWindow of
// the file's last change is not recorded, so the next verification hashes
// again (a write in the same timestamp tick would not change the ctime).
func TestVerifyRacyIdentityNotTrusted(t *testing.T) {
	c := newVerifyCase(t, "binary one")
	c.clock = c.ctime().Add(time.Second)
	for i := range 2 {
		if hashed, err := c.verify(c.verifier()); err != nil || !hashed {
			t.Fatalf("verification %d within the racy window: hashed %v, %v; want a hash", i+1, hashed, err)
		}
	}
	c.clock = c.ctime().Add(3 * time.Second)
	c.verify(c.verifier())
	if hashed, _ := c.verify(c.verifier()); hashed {
		t.Error("hashed again once the identity was recorded outside the racy window")
	}
}

// TestVerifyIgnoresUntrustedCache: a cache file others may write is not
// used (it would let them vouch for a changed binary).
func TestVerifyIgnoresUntrustedCache(t *testing.T) {
	c := newVerifyCase(t, "binary one")
	c.clock = c.ctime().Add(3 * time.Second)
	c.verify(c.verifier())
	if err := os.Chmod(c.cache, 0o666); err != nil {
		t.Fatal(err)
	}
	if hashed, err := c.verify(c.verifier()); err != nil || !hashed {
		t.Fatalf("with a world-writable cache: hashed %v, %v; want a hash", hashed, err)
	}
	if !strings.Contains(c.logs.String(), "ignoring the plugin verification cache") {
		t.Errorf("no warning about the cache:\n%s", c.logs)
	}
}
