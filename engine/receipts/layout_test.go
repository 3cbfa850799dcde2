package receipts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateSegment(t *testing.T) {
	good := []string{"a", "test-repo", "plexus", "my-repo-2", "0", "a1-b2-c3", "com0", "com10", "lpt", "console",
		strings.Repeat("a", maxSegment)}
	bad := []string{"", "-a", "a-", "a--b", "A", "Test-Repo", "a_b", "a.b", ".", "..", "../x", "a/b", `a\b`,
		"a b", "a\x00", "é", "con", "nul", "aux", "prn", "com1", "lpt9", strings.Repeat("a", maxSegment+1)}
	for _, s := range good {
		if err := ValidateSegment(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateSegment(s); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%q: got %v, want ErrInvalidSegment", s, err)
		}
	}
}

func TestRepoDir(t *testing.T) {
	root := t.TempDir()
	got, err := RepoDir(root, "test-repo")
	if want := filepath.Join(root, "ide", "receipts", "test-repo"); err != nil || got != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
	for _, id := range []string{"..", "../../etc", "a/../../b", ""} {
		if _, err := RepoDir(root, id); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%q: got %v", id, err)
		}
	}
	if _, err := RepoDir("", "test-repo"); !errors.Is(err, ErrInvalidSegment) {
		t.Errorf("empty root: got %v", err)
	}
}

func TestMonth(t *testing.T) {
	ts := time.Date(2025, time.January, 1, 0, 30, 0, 0, time.FixedZone("UTC+1", 3600))
	m := MonthOf(ts) // 2024-12-31T23:30Z
	if m != (Month{2024, time.December}) || m.String() != "2024-12" {
		t.Errorf("MonthOf = %v", m)
	}
	if got, want := m.File("/logs"), filepath.FromSlash("/logs/2024/12/receipts.jsonl"); got != want {
		t.Errorf("File = %s, want %s", got, want)
	}
	if p, err := ParseMonth("2024-12"); err != nil || p != m {
		t.Errorf("ParseMonth = %v, %v", p, err)
	}
	for _, s := range []string{"2024-13", "2024-1", "24-01", "2024/01", "2024-01-01", ""} {
		if _, err := ParseMonth(s); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("ParseMonth(%q): %v", s, err)
		}
	}
}

// Names that do not follow the layout are not month files.
func TestListMonthFilesIgnoresStrays(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"2025/01/receipts.jsonl", "2025/1/receipts.jsonl", "2025/13/receipts.jsonl",
		"25/01/receipts.jsonl", "2025/02/other.jsonl", "abcd/01/receipts.jsonl", "2024/12/receipts.jsonl"} {
		path := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(path), 0o700)
		os.WriteFile(path, nil, 0o600)
	}
	files, err := listMonthFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.month.String())
	}
	if strings.Join(got, " ") != "2024-12 2025-01" {
		t.Errorf("month files %v", got)
	}
}
