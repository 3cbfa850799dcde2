package syntax

import (
	"fmt"
	"os"
	"testing"
)

func TestScratchShow(t *testing.T) {
	file := os.Getenv("SHOW")
	if file == "" {
		t.Skip()
	}
	src, _ := os.ReadFile(file)
	a, err := Analyze(Detect(file, src), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Symbols {
		fmt.Printf("%-12s %-20s %-12s %d-%d col %d\n", s.Kind, s.Name, s.Container, s.Line, s.EndLine, s.Column)
	}
	for _, c := range a.Chunks {
		fmt.Printf("chunk %d-%d %s %s part %d\n", c.StartLine, c.EndLine, c.Kind, c.Name, c.Part)
	}
	if os.Getenv("REFS") != "" {
		for _, r := range a.Refs {
			fmt.Println(r.Name, r.Lines)
		}
	}
}
