package syntax

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// symStrings renders symbols compactly: "kind Container.Name line-end
// nameLine:column".
func symStrings(syms []Symbol) []string {
	out := make([]string, len(syms))
	for i, s := range syms {
		name := s.Name
		if s.Container != "" {
			name = s.Container + "." + s.Name
		}
		out[i] = fmt.Sprintf("%s %s %d-%d %d:%d", s.Kind, name, s.Line, s.EndLine, s.NameLine, s.Column)
	}
	return out
}

func refLines(a *Analysis, name string) []int32 {
	i, ok := slices.BinarySearchFunc(a.Refs, name, func(r Ref, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return nil
	}
	return a.Refs[i].Lines
}

func diffStrings(t *testing.T, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("got %d, want %d:\n got: %s\nwant: %s", len(got), len(want),
		strings.Join(got, "\n      "), strings.Join(want, "\n      "))
}

func TestAnalyzeGoSymbols(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "funcs methods and generic receivers",
			src: `package list

// List is a linked list.
type List[T any] struct {
	head *node[T]
	// Len counts the elements.
	Len int
	sync.Mutex
}

type node[T any] struct{ v T; next *node[T] }

// Push adds v.
// It never fails.
func (l *List[T]) Push(v T) {
	l.head = &node[T]{v: v, next: l.head}
}

func (n node[T]) value() T { return n.v }

func (p *Pair[K, V]) Swap() {}

func New[T any]() *List[T] { return &List[T]{} }

func _() {}
`,
			want: []string{
				"struct List 3-9 4:6",
				"field List.head 5-5 5:2",
				"field List.Len 6-7 7:2",
				"field List.Mutex 8-8 8:7",
				"struct node 11-11 11:6",
				"field node.v 11-11 11:26",
				"field node.next 11-11 11:31",
				"method List.Push 13-17 15:19",
				"method node.value 19-19 19:18",
				"method Pair.Swap 21-21 21:22",
				"function New 23-23 23:6",
			},
		},
		{
			name: "grouped and single declarations",
			src: `package p

const Single = 1

// Block doc.
const (
	// A is first.
	A, B = iota, iota
	C    = 2
)

var (
	x int
	y = "s"
)

// Doc for T.
type T int

type (
	// I is an interface.
	I interface {
		// M does it.
		M(int) error
		fmt.Stringer
	}
	Alias = map[string]int
)
`,
			want: []string{
				"const Single 3-3 3:7",
				"const A 7-8 8:2",
				"const B 7-8 8:5",
				"const C 9-9 9:2",
				"var x 13-13 13:2",
				"var y 14-14 14:2",
				"type T 17-18 18:6",
				"interface I 21-26 22:2",
				"method I.M 23-24 24:3",
				"type Alias 27-27 27:2",
			},
		},
		{
			name: "local declarations are not symbols",
			src: `package p

func f() {
	type local struct{ a int }
	const c = 1
	var v = func() int { return c }
	_ = local{}
	_ = v
}
`,
			want: []string{"function f 3-9 3:6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(LangGo, []byte(tt.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			diffStrings(t, symStrings(a.Symbols), tt.want)
			if msg := checkAnalysis([]byte(tt.src), a, Options{}); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestAnalyzeGoRefs(t *testing.T) {
	src := `package main

import "fmt"

type Reader struct{ buf []byte }

func (r *Reader) Read(p []byte) (int, error) {
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func main() {
	r := &Reader{buf: []byte("hi")}
	var _ = r
	fmt.Println(r.Read(nil))
}
`
	a, err := Analyze(LangGo, []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want []int32
	}{
		{"Reader", []int32{7, 14}}, // definition on line 5 excluded
		{"Read", []int32{16}},      // selector name; definition on line 7 excluded
		{"buf", []int32{8, 9, 14}}, // field uses and composite-literal key; definition excluded
		{"fmt", []int32{16}},       // package name in a selector; the import path is a string
		{"Println", []int32{16}},   // selector
		{"r", []int32{7, 8, 9, 14, 15, 16}},
		{"byte", []int32{5, 7, 14}}, // predeclared types are identifiers too
		{"main", nil},               // package clause and func definition
		{"_", nil},
	}
	for _, tt := range tests {
		if got := refLines(a, tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("refs %q = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !slices.IsSortedFunc(a.Refs, func(x, y Ref) int { return strings.Compare(x.Name, y.Name) }) {
		t.Error("refs not sorted by name")
	}
}

func TestAnalyzeGoBroken(t *testing.T) {
	src := `package p

// Good parses.
func Good() int {
	return 1
}

type T struct{ A int }

func Broken( {
	x := 
}

func After() {}
`
	a, err := Analyze(LangGo, []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Declarations before the first error are kept; what follows is text.
	diffStrings(t, symStrings(a.Symbols), []string{
		"function Good 3-6 4:6",
		"struct T 8-8 8:6",
		"field T.A 8-8 8:16",
	})
	// Identifiers after the error are still found by scanning.
	if got := refLines(a, "After"); !slices.Equal(got, []int32{14}) {
		t.Errorf("refs After = %v, want [14]", got)
	}
	if got := refLines(a, "Good"); got != nil {
		t.Errorf("refs Good = %v, want none (definition)", got)
	}
	if msg := checkAnalysis([]byte(src), a, Options{}); msg != "" {
		t.Error(msg)
	}

	// A file that is not Go at all still yields chunks.
	a, err = Analyze(LangGo, []byte("#!/bin/sh\necho hi\n\nexit 1\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Symbols) != 0 || len(a.Chunks) != 1 {
		t.Errorf("non-Go: symbols %v chunks %v", a.Symbols, a.Chunks)
	}
}
