package patch

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPropose diffs a 5,000-line Go-like file against a copy with a
// few changes (an edited line, an inserted block, a deleted line, a
// rewritten function header); and, for scale, against a copy with 400
// scattered one-line changes and against a full rewrite.
func BenchmarkPropose(b *testing.B) {
	lines := make([]string, 5000)
	for i := range lines {
		switch i % 25 {
		case 0:
			lines[i] = fmt.Sprintf("func f%d(x int) int {\n", i)
		case 24:
			lines[i] = "}\n"
		default:
			lines[i] = fmt.Sprintf("\tx = x*%d + %d // step\n", i%7, i)
		}
	}
	base := strings.Join(lines, "")
	few := append([]string(nil), lines...)
	few[100] = "\tx = x*3 + 100 // edited\n"
	few = append(few[:2000], append([]string{"\t// inserted\n", "\tx++\n", "\tx--\n"}, few[2000:]...)...)
	few = append(few[:3500], few[3501:]...)
	few[4500] = "func renamed(x int) int {\n"
	scattered := append([]string(nil), lines...)
	for i := range 400 {
		scattered[i*12+5] = fmt.Sprintf("\tchanged %d\n", i)
	}
	rewrite := make([]string, 5000)
	for i := range rewrite {
		rewrite[i] = fmt.Sprintf("\trewritten %d\n", i)
	}
	for _, bc := range []struct {
		name string
		new  []string
	}{
		{"few changes", few},
		{"400 scattered changes", scattered},
		{"full rewrite", rewrite},
	} {
		newText := strings.Join(bc.new, "")
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(base)))
			b.ReportAllocs()
			var hunks int
			for b.Loop() {
				s, err := Propose([]Edit{modify("big.go", base, newText)}, "", nil)
				if err != nil {
					b.Fatal(err)
				}
				hunks = len(s.Files[0].Hunks)
			}
			b.ReportMetric(float64(hunks), "hunks")
		})
	}
}
