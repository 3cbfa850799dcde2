package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileIdentity is what stat(2) says about a file that changes whenever its
// content does: the device and inode (a replaced file is another inode),
// the size, and the modification and status-change times in nanoseconds.
// Writing a file sets its mtime and ctime to the current time; utimes(2)
// can set the mtime back but sets the ctime to now; only the kernel sets
// the ctime, so it cannot be put back without changing the system clock
// or writing to the raw device (both need root, which controls the host
// anyway).
type FileIdentity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

// racyWindow is how long after a file's last status change its hash must
// have been computed for the identity to be trusted later. A write in the
// same clock tick as the change that set the recorded ctime would leave
// the ctime unchanged (the "racily clean" problem of git's index,
// Documentation/technical/racy-git.txt in git); file systems keep
// timestamps at a granularity from a nanosecond (ext4, xfs) through a
// kernel tick (up to 10 ms) to 2 s (FAT), and Linux stamps them with a
// coarse clock one tick behind the wall clock. A hash started more than 2 s
// after the ctime cannot have missed a write stamped with that ctime.
const racyWindow = 2 * time.Second

// verifiedRecord is one binary whose SHA-256 was computed while it had
// Identity, at least racyWindow after its last status change.
type verifiedRecord struct {
	Identity FileIdentity `json:"identity"`
	SHA256   string       `json:"sha256"`
}

// verifier checks plugin binaries against their lock file sums, hashing
// each file only once per identity. Records live in memory and, when a
// cache file is set, in that file (JSON {"version":1,"files":{PATH:
// record}}, mode 0600, written atomically), so later processes skip the
// hash too. Safe for concurrent use.
type verifier struct {
	path string // the cache file; "" keeps records in memory only
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	loaded  bool
	records map[string]verifiedRecord // by absolute binary path
}

type verifiedFile struct {
	Version int                       `json:"version"`
	Files   map[string]verifiedRecord `json:"files"`
}

func newVerifier(path string, log *slog.Logger) *verifier {
	return &verifier{path: path, log: log, now: time.Now, records: map[string]verifiedRecord{}}
}

// verify checks that f, the open binary at path, has the SHA-256 want
// (hex). The file's identity comes from f itself (fstat), so it is the
// file that will run, whatever happens to path. When a record says this
// identity was verified with this sum, nothing is read; otherwise the
// file is hashed, and a match is recorded unless the file changed within
// racyWindow of the hash (then the next launch hashes again). A mismatch
// is a *ChecksumError; a file that cannot be read or changes while it is
// hashed wraps ErrChecksumUnverified.
func (v *verifier) verify(f *os.File, path, want, lockFile string, ref Ref) error {
	id, ok, err := identityOf(f)
	if err != nil {
		return fmt.Errorf("%w: stat %s: %v", ErrChecksumUnverified, path, err)
	}
	if ok {
		v.mu.Lock()
		v.loadLocked()
		rec, found := v.records[path]
		v.mu.Unlock()
		if found && rec.Identity == id && rec.SHA256 == want {
			v.log.Debug("plugin binary verified by its file identity", "path", path)
			return nil
		}
	}
	begin := v.now()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return fmt.Errorf("%w: read %s: %v", ErrChecksumUnverified, path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	v.log.Debug("plugin binary hashed", "path", path, "matches", got == want, "took", v.now().Sub(begin))
	if got != want {
		return &ChecksumError{Ref: ref, Path: path, LockFile: lockFile, Want: want, Got: got}
	}
	if !ok {
		return nil
	}
	after, _, err := identityOf(f)
	if err != nil || after != id {
		return fmt.Errorf("%w: %s changed while it was being hashed", ErrChecksumUnverified, path)
	}
	if begin.UnixNano()-id.CtimeNs <= int64(racyWindow) {
		return nil // too recent to trust the identity later: hash again next time
	}
	v.record(path, verifiedRecord{Identity: id, SHA256: got})
	return nil
}

// loadLocked reads the cache file once. A missing, unreadable, malformed
// or group- or world-writable file is treated as empty.
func (v *verifier) loadLocked() {
	if v.loaded || v.path == "" {
		return
	}
	v.loaded = true
	f, err := os.Open(v.path)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm()&0o022 != 0 || !ownedBySelf(fi) {
		v.log.Warn("ignoring the plugin verification cache: it is writable by others or not owned by this user", "path", v.path)
		return
	}
	var vf verifiedFile
	if err := json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&vf); err != nil || vf.Version != 1 {
		v.log.Debug("ignoring a malformed plugin verification cache", "path", v.path, "error", err)
		return
	}
	for p, r := range vf.Files {
		if _, ok := v.records[p]; !ok {
			v.records[p] = r
		}
	}
}

// record keeps rec for path and saves the cache file. A failed save is
// logged: it costs a hash at the next launch, nothing else.
func (v *verifier) record(path string, rec verifiedRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.loadLocked()
	v.records[path] = rec
	if v.path == "" {
		return
	}
	// Drop records of binaries that are gone.
	files := map[string]verifiedRecord{}
	for p, r := range v.records {
		if _, err := os.Lstat(p); err == nil {
			files[p] = r
		}
	}
	b, err := json.MarshalIndent(verifiedFile{Version: 1, Files: files}, "", "  ")
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(v.path), 0o700); err == nil {
			err = writeFileAtomic(v.path, append(b, '\n'), 0o600)
		}
	}
	if err != nil {
		v.log.Debug("could not save the plugin verification cache", "path", v.path, "error", err)
	}
}
