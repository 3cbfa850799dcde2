package receipts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// MonthFileName is the name of every month file.
const MonthFileName = "receipts.jsonl"

// Month is a calendar month (UTC). The zero Month means "no month" (all
// months, where an argument allows it).
type Month struct {
	Year  int
	Month time.Month
}

// MonthOf returns the UTC month of t.
func MonthOf(t time.Time) Month {
	t = t.UTC()
	return Month{Year: t.Year(), Month: t.Month()}
}

// ParseMonth parses "yyyy-mm" (for example "2025-01"). The error wraps
// ErrInvalidSegment.
func ParseMonth(s string) (Month, error) {
	t, err := time.Parse("2006-01", s)
	if err != nil || len(s) != 7 {
		return Month{}, fmt.Errorf("%w: month %q is not yyyy-mm", ErrInvalidSegment, s)
	}
	return MonthOf(t), nil
}

// IsZero reports whether m is the zero Month.
func (m Month) IsZero() bool { return m == Month{} }

// String returns m as "yyyy-mm".
func (m Month) String() string { return fmt.Sprintf("%04d-%02d", m.Year, int(m.Month)) }

// File returns the path of m's month file in the log directory dir:
// dir/yyyy/mm/receipts.jsonl.
func (m Month) File(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("%04d", m.Year), fmt.Sprintf("%02d", int(m.Month)), MonthFileName)
}

func (m Month) before(o Month) bool {
	return m.Year < o.Year || m.Year == o.Year && m.Month < o.Month
}

// monthFile is a month file found in a log directory.
type monthFile struct {
	month Month
	path  string
	info  fs.FileInfo
}

// listMonthFiles returns the month files of the log in dir, oldest first.
// Directories and files that do not follow the layout (a year that is not
// four digits, a month that is not 01..12, a month directory without
// receipts.jsonl) are skipped. A missing dir is an empty log.
func listMonthFiles(dir string) ([]monthFile, error) {
	years, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []monthFile
	for _, y := range years { // ReadDir sorts by name; four digits sort numerically
		year, ok := layoutNumber(y.Name(), 4, 0, 9999)
		if !ok || !y.IsDir() {
			continue
		}
		months, err := os.ReadDir(filepath.Join(dir, y.Name()))
		if err != nil {
			return nil, err
		}
		for _, mo := range months {
			month, ok := layoutNumber(mo.Name(), 2, 1, 12)
			if !ok || !mo.IsDir() {
				continue
			}
			m := Month{Year: year, Month: time.Month(month)}
			path := m.File(dir)
			info, err := os.Lstat(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if !info.Mode().IsRegular() {
				return nil, fmt.Errorf("%s is not a regular file", path)
			}
			files = append(files, monthFile{month: m, path: path, info: info})
		}
	}
	slices.SortFunc(files, func(a, b monthFile) int {
		switch {
		case a.month.before(b.month):
			return -1
		case b.month.before(a.month):
			return 1
		}
		return 0
	})
	return files, nil
}

// layoutNumber parses name as exactly width decimal digits in [lo, hi].
func layoutNumber(name string, width, lo, hi int) (int, bool) {
	if len(name) != width {
		return 0, false
	}
	for _, c := range []byte(name) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(name)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// maxSegment is the longest path segment ValidateSegment accepts.
const maxSegment = 128

// ValidateSegment checks that s can be used as one directory name under a
// directory this package manages (the task front-end's {repoId}): 1 to 128
// characters matching ^[a-z0-9]+(-[a-z0-9]+)*$ (kebab-case), and not a
// name Windows reserves for a device (con, prn, aux, nul, com1..com9,
// lpt1..lpt9). Such a segment contains no separator, no dot and nothing
// else that could lead outside the parent directory. The error wraps
// ErrInvalidSegment.
func ValidateSegment(s string) error {
	if s == "" || len(s) > maxSegment {
		return fmt.Errorf("%w: %q must be 1 to %d characters", ErrInvalidSegment, s, maxSegment)
	}
	prevDash := true // a leading dash is as wrong as a doubled one
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			prevDash = false
		case c == '-' && !prevDash:
			prevDash = true
		default:
			return fmt.Errorf("%w: %q is not kebab-case (lower-case letters and digits in words joined by single dashes)", ErrInvalidSegment, s)
		}
	}
	if prevDash {
		return fmt.Errorf("%w: %q ends with a dash", ErrInvalidSegment, s)
	}
	switch s {
	case "con", "prn", "aux", "nul":
		return fmt.Errorf("%w: %q is a reserved device name on Windows", ErrInvalidSegment, s)
	}
	if len(s) == 4 && (s[:3] == "com" || s[:3] == "lpt") && '1' <= s[3] && s[3] <= '9' {
		return fmt.Errorf("%w: %q is a reserved device name on Windows", ErrInvalidSegment, s)
	}
	return nil
}

// RepoDir returns the log directory of repository repoID under root, as the
// receipt contract lays it out: root/ide/receipts/repoID, where root is the
// value of ZU_ROOT. repoID must pass ValidateSegment; root must not be
// empty. Errors wrap ErrInvalidSegment.
func RepoDir(root, repoID string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("%w: empty receipt root (ZU_ROOT)", ErrInvalidSegment)
	}
	if err := ValidateSegment(repoID); err != nil {
		return "", fmt.Errorf("repo id: %w", err)
	}
	return filepath.Join(root, "ide", "receipts", repoID), nil
}
