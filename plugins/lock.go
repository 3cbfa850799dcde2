package plugins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// LockFileName is the name of the lock file in each plugin directory.
const LockFileName = "plexus-plugins.lock"

// lockVersion is the lock file format this build reads and writes.
const lockVersion = 1

// LockEntry records one installed third-party plugin.
type LockEntry struct {
	Kind string `json:"kind"` // "tool" or "model"
	Name string `json:"name"` // NAME in plexus-KIND-NAME
	// File is the binary's file name in the plugin directory,
	// plexus-KIND-NAME.
	File string `json:"file"`
	// Version is the main module version from the binary's Go build
	// information ("v1.2.3", "(devel)" for a local build), "" when the
	// binary carries none (not built by Go, or stripped).
	Version string `json:"version,omitempty"`
	// Revision is the VCS revision the binary was built from, with
	// "+dirty" when the tree had changes; "" when unknown.
	Revision string `json:"revision,omitempty"`
	// ProtocolVersions are the plugin protocol versions the handshake
	// negotiated when the plugin was installed.
	ProtocolVersions []int `json:"protocol_versions"`
	// SHA256 is the binary's SHA-256, 64 lower-case hex digits.
	SHA256 string `json:"sha256"`
	// Source is what it was installed from: a file, a directory or a Go
	// package path (with @version when one was given).
	Source      string    `json:"source,omitempty"`
	InstalledAt time.Time `json:"installed_at"`
}

// Ref is the entry's kind and name.
func (e LockEntry) Ref() Ref { return Ref{Kind: e.Kind, Name: e.Name} }

// Lock is the lock file of one plugin directory: the checksums the host
// verifies third-party plugins against before launching them. A Lock
// value is not safe for concurrent use; Install and Uninstall serialise
// their changes to a directory with an flock on .plexus-plugins.lock.lk
// in it and read the file afresh under it, so concurrent installs lose no
// entry (the file itself is always whole).
type Lock struct {
	path    string
	entries []LockEntry // sorted by kind, then name
}

// lockFile is the JSON shape of a lock file.
type lockFile struct {
	Version int         `json:"version"`
	Plugins []LockEntry `json:"plugins"`
}

// ReadLock reads DIR/plexus-plugins.lock. A missing file is an empty lock;
// a malformed one is an error naming the file and the problem.
func ReadLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Lock{path: path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read plugin lock file: %w", err)
	}
	entries, err := DecodeLock(b)
	if err != nil {
		return nil, fmt.Errorf("plugin lock file %s: %w", path, err)
	}
	return &Lock{path: path, entries: entries}, nil
}

// DecodeLock parses the contents of a lock file and validates every entry
// (kind, name, file name, SHA-256, no duplicates). The entries come back
// sorted by kind, then name.
func DecodeLock(b []byte) ([]LockEntry, error) {
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if v.Version != lockVersion {
		return nil, fmt.Errorf("format version %d; this plexus reads version %d", v.Version, lockVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f lockFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not valid: %w", err)
	}
	seen := map[Ref]bool{}
	for i, e := range f.Plugins {
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		if seen[e.Ref()] {
			return nil, fmt.Errorf("plugins[%d]: %s plugin %q is listed twice", i, e.Kind, e.Name)
		}
		seen[e.Ref()] = true
	}
	sortEntries(f.Plugins)
	return f.Plugins, nil
}

func (e LockEntry) validate() error {
	if e.Kind != KindTool && e.Kind != KindModel {
		return fmt.Errorf("kind %q: want %q or %q", e.Kind, KindTool, KindModel)
	}
	if !pluginName.MatchString(e.Name) {
		return fmt.Errorf("name %q: want lower-case letters, digits, '-' and '_'", e.Name)
	}
	if want := BinaryName(e.Ref()); e.File != want {
		return fmt.Errorf("file %q: a %s plugin named %q is the file %q", e.File, e.Kind, e.Name, want)
	}
	if len(e.SHA256) != 64 || strings.ToLower(e.SHA256) != e.SHA256 {
		return fmt.Errorf("sha256 %q: want 64 lower-case hex digits", e.SHA256)
	}
	if _, err := hex.DecodeString(e.SHA256); err != nil {
		return fmt.Errorf("sha256 %q: want 64 lower-case hex digits", e.SHA256)
	}
	return nil
}

func sortEntries(es []LockEntry) {
	slices.SortFunc(es, func(a, b LockEntry) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Entries returns a copy of the entries, sorted by kind, then name.
func (l *Lock) Entries() []LockEntry { return slices.Clone(l.entries) }

// Entry returns the entry of ref.
func (l *Lock) Entry(ref Ref) (LockEntry, bool) {
	for _, e := range l.entries {
		if e.Ref() == ref {
			return e, true
		}
	}
	return LockEntry{}, false
}

// Put adds e, replacing an entry of the same kind and name. It fails if e
// is not valid (see DecodeLock). Write saves the change.
func (l *Lock) Put(e LockEntry) error {
	if err := e.validate(); err != nil {
		return err
	}
	l.Remove(e.Ref())
	l.entries = append(l.entries, e)
	sortEntries(l.entries)
	return nil
}

// Remove deletes ref's entry and reports whether there was one.
func (l *Lock) Remove(ref Ref) bool {
	n := len(l.entries)
	l.entries = slices.DeleteFunc(l.entries, func(e LockEntry) bool { return e.Ref() == ref })
	return len(l.entries) != n
}

// Write saves the lock file atomically (a temporary file in the same
// directory, synced, then renamed over it), mode 0644.
func (l *Lock) Write() error {
	entries := l.entries
	if entries == nil {
		entries = []LockEntry{}
	}
	b, err := json.MarshalIndent(lockFile{Version: lockVersion, Plugins: entries}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(l.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write plugin lock file: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory renamed over path, then syncs the directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// FileSHA256 returns the SHA-256 of the file at path as 64 lower-case hex
// digits.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BinaryName is the file name of a third-party plugin: plexus-KIND-NAME.
func BinaryName(ref Ref) string { return "plexus-" + ref.Kind + "-" + ref.Name }

// ParseBinaryName parses a file name plexus-tool-NAME or plexus-model-NAME.
func ParseBinaryName(file string) (Ref, bool) { return parseBinaryName(file) }
