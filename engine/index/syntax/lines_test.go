package syntax

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestLineIndex(t *testing.T) {
	tests := []struct {
		src   string
		lines int
		blank []int
	}{
		{"", 0, nil},
		{"a", 1, nil},
		{"a\n", 1, nil},
		{"\n", 1, []int{1}},
		{"a\n\nb", 3, []int{2}},
		{"a\r\n \t\r\nb\n\f\v\n", 4, []int{2, 4}},
	}
	for _, tt := range tests {
		li := newLineIndex([]byte(tt.src))
		if li.count() != tt.lines {
			t.Errorf("%q: %d lines, want %d", tt.src, li.count(), tt.lines)
		}
		for l := 1; l <= li.count(); l++ {
			want := false
			for _, b := range tt.blank {
				want = want || b == l
			}
			if li.isBlank(l) != want {
				t.Errorf("%q: isBlank(%d) = %v", tt.src, l, !want)
			}
		}
	}

	// lineOf agrees with counting newlines, whatever the lookup order.
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 5000)
	for i := range src {
		src[i] = "ab \n\n"[r.IntN(5)]
	}
	li := newLineIndex(src)
	offsets := make([]int, 0, 3000)
	for i := 0; i < 1000; i++ {
		offsets = append(offsets, r.IntN(len(src)))
	}
	for o := 0; o < len(src); o += 3 {
		offsets = append(offsets, o) // ascending runs use the hint
	}
	for _, o := range offsets {
		want := bytes.Count(src[:o], []byte{'\n'}) + 1
		if got := li.lineOf(o); got != want {
			t.Fatalf("lineOf(%d) = %d, want %d", o, got, want)
		}
	}
}
