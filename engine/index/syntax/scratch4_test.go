package syntax

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScratchCorpus(t *testing.T) {
	dir := os.Getenv("CORPUS")
	if dir == "" {
		t.Skip()
	}
	per := map[Lang]time.Duration{}
	bytes := map[Lang]int{}
	files := map[Lang]int{}
	nsym := map[Lang]int{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		head := src
		if len(head) > 512 {
			head = head[:512]
		}
		lang := Detect(p, head)
		if os.Getenv("ONLY") != "" && string(lang) != os.Getenv("ONLY") {
			return nil
		}
		start := time.Now()
		a, err := Analyze(lang, src, Options{})
		el := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if el > 200*time.Millisecond {
			t.Logf("slow %s %v %d bytes", p, el, len(src))
		}
		if msg := checkChunks(src, a.Chunks, 120); msg != "" {
			t.Errorf("%s: %s", p, msg)
		}
		per[lang] += el
		bytes[lang] += len(src)
		files[lang]++
		nsym[lang] += len(a.Symbols)
		_ = strings.ToLower
		return nil
	})
	for l, d := range per {
		t.Logf("%-10s files %5d  %8.2f MB  %8v  %6.1f MB/s  syms %d", l, files[l], float64(bytes[l])/1e6, d.Round(time.Millisecond), float64(bytes[l])/1e6/d.Seconds(), nsym[l])
	}
}

// checkChunks verifies the chunk invariants; "" when they hold.
func checkChunks(src []byte, chunks []Chunk, max int) string {
	li := newLineIndex(src)
	covered := make([]int, li.count()+2)
	prevEnd := 0
	for _, c := range chunks {
		if c.StartLine <= prevEnd {
			return "chunks out of order or overlapping"
		}
		if c.StartLine > c.EndLine || c.EndLine > li.count() || c.StartLine < 1 {
			return "bad chunk range"
		}
		if c.EndLine-c.StartLine+1 > max {
			return "chunk too long"
		}
		if li.isBlank(c.StartLine) || li.isBlank(c.EndLine) {
			return "chunk bounded by blank line"
		}
		for l := c.StartLine; l <= c.EndLine; l++ {
			covered[l]++
		}
		prevEnd = c.EndLine
	}
	for l := 1; l <= li.count(); l++ {
		if !li.isBlank(l) && covered[l] != 1 {
			return "non-blank line not covered exactly once"
		}
	}
	return ""
}
