package syntax_test

import (
	"fmt"

	"github.com/plexus-agent/plexus/engine/index/syntax"
)

func ExampleAnalyze() {
	src := []byte(`package shapes

// Square is a square.
type Square struct{ Side float64 }

// Area returns the square's area.
func (s Square) Area() float64 {
	return s.Side * s.Side
}
`)
	lang := syntax.Detect("shapes/square.go", src)
	// MinChunkLines 1 gives even short definitions chunks of their own.
	a, err := syntax.Analyze(lang, src, syntax.Options{MinChunkLines: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range a.Symbols {
		fmt.Printf("%s %s container=%q lines %d-%d\n", s.Kind, s.Name, s.Container, s.Line, s.EndLine)
	}
	for _, c := range a.Chunks {
		fmt.Printf("chunk %d-%d kind=%q name=%q\n", c.StartLine, c.EndLine, c.Kind, c.Name)
	}
	for _, r := range a.Refs {
		fmt.Println("ref", r.Name, r.Lines)
	}
	// Output:
	// struct Square container="" lines 3-4
	// field Side container="Square" lines 4-4
	// method Area container="Square" lines 6-9
	// chunk 1-1 kind="" name=""
	// chunk 3-4 kind="struct" name="Square"
	// chunk 6-9 kind="method" name="Square.Area"
	// ref Side [8]
	// ref Square [7]
	// ref float64 [4 7]
	// ref s [7 8]
}
