package syntax

import (
	"fmt"
	"os"
	"strings"
	"testing"

	ts "github.com/tree-sitter/go-tree-sitter"
	tsc "github.com/tree-sitter/tree-sitter-c/bindings/go"
	tscpp "github.com/tree-sitter/tree-sitter-cpp/bindings/go"
	tsjava "github.com/tree-sitter/tree-sitter-java/bindings/go"
	tsjs "github.com/tree-sitter/tree-sitter-javascript/bindings/go"
	tspy "github.com/tree-sitter/tree-sitter-python/bindings/go"
	tsrust "github.com/tree-sitter/tree-sitter-rust/bindings/go"
	tsts "github.com/tree-sitter/tree-sitter-typescript/bindings/go"
)

func TestScratchDump(t *testing.T) {
	file := os.Getenv("DUMP")
	if file == "" {
		t.Skip()
	}
	langs := map[string]*ts.Language{"c": ts.NewLanguage(tsc.Language()), "cpp": ts.NewLanguage(tscpp.Language()), "java": ts.NewLanguage(tsjava.Language()), "js": ts.NewLanguage(tsjs.Language()), "py": ts.NewLanguage(tspy.Language()), "rs": ts.NewLanguage(tsrust.Language()), "ts": ts.NewLanguage(tsts.LanguageTypescript()), "tsx": ts.NewLanguage(tsts.LanguageTSX())}
	ext := file[strings.LastIndex(file, ".")+1:]
	src, _ := os.ReadFile(file)
	p := ts.NewParser()
	p.SetLanguage(langs[ext])
	tree := p.Parse(src, nil)
	c := tree.Walk()
	depth := 0
	for {
		n := c.Node()
		f := c.FieldName()
		if f != "" {
			f += ": "
		}
		if n.IsNamed() {
			txt := ""
			if n.ChildCount() == 0 {
				txt = " " + n.Utf8Text(src)
			}
			fmt.Printf("%s%s%s [%d]%s\n", strings.Repeat("  ", depth), f, n.Kind(), n.StartPosition().Row+1, txt)
		}
		if c.GotoFirstChild() {
			depth++
			continue
		}
		for !c.GotoNextSibling() {
			if !c.GotoParent() {
				return
			}
			depth--
		}
	}
}
