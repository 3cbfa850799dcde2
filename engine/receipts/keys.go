package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/gofrs/flock"
)

// File names inside a log (or key) directory.
const (
	// KeyFile is the private key: one PEM block "PRIVATE KEY" holding the
	// PKCS #8 encoding of an Ed25519 key (what `openssl genpkey -algorithm
	// ed25519` writes), mode 0600.
	KeyFile = "receipts.key"
	// PublicKeyFile holds the public keys that verify the log's
	// signatures: PEM blocks "PUBLIC KEY", each the PKIX
	// (SubjectPublicKeyInfo) encoding of an Ed25519 key (what `openssl pkey
	// -pubout` writes). A key is added when a signer first writes to the
	// log; keys are never removed, so receipts signed with an earlier key
	// still verify.
	PublicKeyFile = "receipts.pub"
	// LockFile is the file Append locks (flock(2), exclusive) and readers
	// lock (shared) while they look at the log.
	LockFile = "receipts.lock"
)

// maxKeyFile bounds how much of a key file is read.
const maxKeyFile = 1 << 20

// KeyID returns the fingerprint of pub that receipts carry as key_id: the
// first 8 bytes of the SHA-256 of the 32-byte public key, as 16 lower-case
// hex digits.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

func validKeyID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// LoadOrCreateKey returns the receipt signing key kept in dir/receipts.key,
// creating dir (mode 0700) and a new Ed25519 key pair on first use, and
// makes sure dir/receipts.pub lists its public key (see KeyFile and
// PublicKeyFile for the formats). Several processes may call it at once:
// the key file appears atomically (written to a temporary file, then
// hard-linked into place) and exactly one key wins.
//
// On systems with Unix permissions it refuses a key file that users other
// than its owner can access (any of the mode bits 0077 set): the error is a
// *KeyPermError (errors.Is ErrKeyPermissions) that says how to fix it. A key
// file that is not an Ed25519 PKCS #8 PEM key gives an error wrapping
// ErrInvalidKey.
//
// dir may be a log directory (the key then lives beside the receipts) or a
// separate, better-protected directory; Open publishes the public key into
// the log directory either way.
func LoadOrCreateKey(dir string) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	path := filepath.Join(dir, KeyFile)
	key, err := loadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(dir, path)
	}
	if err != nil {
		return nil, err
	}
	if err := publishKey(dir, key.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	return key, nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // fs.ErrNotExist is the caller's signal to create
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalidKey, path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, &KeyPermError{Path: path, Mode: fi.Mode()}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s holds no PEM block \"PRIVATE KEY\"", ErrInvalidKey, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidKey, path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %T, not an Ed25519 key", ErrInvalidKey, path, k)
	}
	return key, nil
}

func createKey(dir, path string) (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".receipts.key.*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process created it first
			return loadKey(path)
		}
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	return key, nil
}

// LoadPublicKeys returns the public keys listed in dir/receipts.pub (see
// PublicKeyFile), in file order; none and no error when the file does not
// exist. Text outside PEM blocks and blocks of other types are ignored; a
// "PUBLIC KEY" block that is not an Ed25519 key gives an error wrapping
// ErrInvalidKey.
func LoadPublicKeys(dir string) ([]ed25519.PublicKey, error) {
	path := filepath.Join(dir, PublicKeyFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receipt public keys: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("receipt public keys: %w", err)
	}
	var keys []ed25519.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return keys, nil
		}
		if block.Type != "PUBLIC KEY" {
			continue
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidKey, path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: %s holds a %T, not an Ed25519 key", ErrInvalidKey, path, k)
		}
		keys = append(keys, pub)
	}
}

// publishKey adds pub to dir/receipts.pub unless it is listed there
// already. It holds the log's lock while it reads and appends.
func publishKey(dir string, pub ed25519.PublicKey) error {
	lock := flock.New(filepath.Join(dir, LockFile))
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("receipt public key: lock: %w", err)
	}
	defer lock.Unlock()
	keys, err := LoadPublicKeys(dir)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.Equal(pub) {
			return nil
		}
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("receipt public key: %w", err)
	}
	path := filepath.Join(dir, PublicKeyFile)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("receipt public key: %w", err)
	}
	isNew := errors.Is(err, fs.ErrNotExist)
	var buf bytes.Buffer
	if len(old) > 0 && old[len(old)-1] != '\n' {
		buf.WriteByte('\n') // after a torn write, start the block on its own line
	}
	if err := pem.Encode(&buf, &pem.Block{Type: "PUBLIC KEY", Bytes: der}); err != nil {
		return fmt.Errorf("receipt public key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("receipt public key: %w", err)
	}
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && isNew {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("receipt public key: %w", err)
	}
	return nil
}

// syncDir flushes dir's entries to disk so a newly created file in it
// survives a crash. Windows cannot sync a directory and needs no such step.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
