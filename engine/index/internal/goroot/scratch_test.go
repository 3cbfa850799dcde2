package goroot

import (
	"testing"
	"time"
)

func TestScratchLoad(t *testing.T) {
	src, err := Src()
	if err != nil {
		t.Skip(err)
	}
	t0 := time.Now()
	c, err := Load(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load %v: %d files walked, %d go, %d bytes, %d go bytes, idents %d calls %d", time.Since(t0), c.NumFiles, len(c.Files), c.Bytes, c.GoBytes, len(c.Idents), len(c.Calls))
	bad := 0
	for _, f := range c.Files {
		if f.ParseErr != nil {
			bad++
		}
	}
	t.Logf("parse errors %d", bad)
	t.Logf("symbols %q", c.SymbolNames(20, 1))
	for _, id := range c.ExportedIdents(10, 1) {
		t.Logf("ident %s %v", id.Name, id.Files)
	}
	t.Logf("literals %q", c.Literals(40, 1))
	t.Logf("regexps %q", c.Regexps(20, 1))
	for _, d := range c.DocFuncs(10, 5, 1) {
		t.Logf("doc %s %s %q / %q", d.Path, d.Key(), d.Sentence, WithoutName(d.Sentence, d.Decl.Name))
	}
}
