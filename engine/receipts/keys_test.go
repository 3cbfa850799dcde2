package receipts

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	again, err := LoadOrCreateKey(dir)
	if err != nil || !again.Equal(key) {
		t.Fatalf("second load: %v (same key: %v)", err, again.Equal(key))
	}
	pubs, err := LoadPublicKeys(dir)
	if err != nil || len(pubs) != 1 || !pubs[0].Equal(key.Public()) {
		t.Fatalf("published keys %v, %v", pubs, err)
	}
	// The files are standard PEM: PKCS #8 and PKIX.
	data, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	block, _ := pem.Decode(data)
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil || !key.Equal(k) {
		t.Errorf("private key file: %v", err)
	}
	data, _ = os.ReadFile(filepath.Join(dir, PublicKeyFile))
	if strings.Count(string(data), "-----BEGIN PUBLIC KEY-----") != 1 {
		t.Errorf("receipts.pub:\n%s", data)
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	dir := t.TempDir()
	keys := make([]ed25519.PrivateKey, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadOrCreateKey(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !k.Equal(keys[0]) {
			t.Fatal("concurrent callers got different keys")
		}
	}
	if pubs, _ := LoadPublicKeys(dir); len(pubs) != 1 {
		t.Errorf("%d public keys published, want 1", len(pubs))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".receipts.key.*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func TestKeyPermissionsEnforced(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	dir := t.TempDir()
	if _, err := LoadOrCreateKey(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFile)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o644, 0o666} {
		os.Chmod(path, mode)
		_, err := LoadOrCreateKey(dir)
		var pe *KeyPermError
		if !errors.Is(err, ErrKeyPermissions) || !errors.As(err, &pe) || pe.Mode.Perm() != mode {
			t.Fatalf("mode %04o: got %v, want a KeyPermError", mode, err)
		}
		if !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("message does not say how to fix it: %v", err)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := LoadOrCreateKey(dir); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
}

func TestInvalidKeyFiles(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"not PEM", "hello"},
		{"wrong block", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
		{"not PKCS 8", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, KeyFile), []byte(tt.data), 0o600)
			if _, err := LoadOrCreateKey(dir); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("got %v, want ErrInvalidKey", err)
			}
		})
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, PublicKeyFile), []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), 0o644)
	if _, err := LoadPublicKeys(dir); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("bad public key: got %v, want ErrInvalidKey", err)
	}
	if _, err := Open(dir, Options{Key: testKey(1)[:10]}); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("short private key: got %v, want ErrInvalidKey", err)
	}
}

// A torn receipts.pub (a crash while publishing) does not hide keys
// published after it.
func TestPublishAfterTornPublicKeyFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, PublicKeyFile), []byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA"), 0o644)
	pub := testKey(4).Public().(ed25519.PublicKey)
	if err := publishKey(dir, pub); err != nil {
		t.Fatal(err)
	}
	pubs, err := LoadPublicKeys(dir)
	if err != nil || len(pubs) != 1 || !pubs[0].Equal(pub) {
		t.Fatalf("keys %v, %v", pubs, err)
	}
}
