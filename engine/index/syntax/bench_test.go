package syntax

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// gorootFiles returns the files under GOROOT/src whose name ends in one of
// exts, skipping the test when GOROOT/src is missing.
func gorootFiles(tb testing.TB, exts ...string) []string {
	tb.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(root); err != nil {
		tb.Skipf("GOROOT/src not available: %v", err)
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			for _, e := range exts {
				if strings.HasSuffix(path, e) {
					files = append(files, path)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Skip("no files in GOROOT/src")
	}
	return files
}

func readAll(tb testing.TB, paths []string) [][]byte {
	tb.Helper()
	srcs := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		srcs[i] = b
	}
	return srcs
}

// BenchmarkAnalyzeGoroot analyses every .go file of GOROOT/src, one
// goroutine per GOMAXPROCS, and reports throughput in MB/s.
func BenchmarkAnalyzeGoroot(b *testing.B) {
	srcs := readAll(b, gorootFiles(b, ".go"))
	var total int64
	for _, s := range srcs {
		total += int64(len(s))
	}
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < runtime.GOMAXPROCS(0); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(srcs) {
						return
					}
					if _, err := Analyze(LangGo, srcs[i], Options{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// BenchmarkAnalyze analyses one realistic file per language from testdata
// and reports throughput in MB/s.
func BenchmarkAnalyze(b *testing.B) {
	files := []string{
		"ratelimit.go", "server.py", "router.js", "store.ts", "TodoList.tsx",
		"lexer.rs", "LruCache.java", "hashmap.c", "graph.cpp",
	}
	for _, name := range files {
		path := filepath.Join("testdata", name)
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		lang := Detect(path, src)
		b.Run(string(lang), func(b *testing.B) {
			if _, err := Analyze(lang, src, Options{}); err != nil {
				b.Fatal(err) // also compiles the query outside the timing
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Analyze(lang, src, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
