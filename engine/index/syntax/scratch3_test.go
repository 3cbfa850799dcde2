package syntax

import (
	"go/parser"
	"go/token"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func BenchmarkScratchParseOnly(b *testing.B) {
	srcs := readAll(b, gorootFiles(b, ".go"))
	var total int64
	for _, s := range srcs {
		total += int64(len(s))
	}
	b.SetBytes(total)
	b.ReportAllocs()
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
					parser.ParseFile(token.NewFileSet(), "", srcs[i], parser.ParseComments|parser.SkipObjectResolution)
				}
			}()
		}
		wg.Wait()
	}
}
