package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/internal/testtree"
)

// repo is a small multi-language workspace.
var repo = map[string]string{
	"go.mod": "module example.com/shop\n",
	"cart/cart.go": `package cart

// Cart holds the items a customer is buying.
type Cart struct {
	Items []Item
}

// Item is one line of a cart.
type Item struct {
	SKU      string
	Quantity int
}

// AddItem puts quantity units of sku in the cart.
func (c *Cart) AddItem(sku string, quantity int) {
	c.Items = append(c.Items, Item{SKU: sku, Quantity: quantity})
}

// TotalQuantity counts the units in the cart.
func (c *Cart) TotalQuantity() int {
	n := 0
	for _, it := range c.Items {
		n += it.Quantity
	}
	return n
}
`,
	"cart/cart_test.go": `package cart

import "testing"

func TestAddItem(t *testing.T) {
	var c Cart
	c.AddItem("apple", 2)
	if c.TotalQuantity() != 2 {
		t.Fatal("bad total")
	}
}
`,
	"pricing/discount.py": `"""Discount rules."""

def apply_discount(price, percent):
    """Return the price after taking percent off."""
    return price * (100 - percent) / 100


class DiscountRule:
    def matches(self, item):
        return item.sku.startswith("SALE")
`,
	"web/checkout.ts": `export interface CheckoutRequest {
  cartId: string;
  couponCode?: string;
}

export function submitCheckout(req: CheckoutRequest): Promise<Response> {
  return fetch("/api/checkout", { method: "POST", body: JSON.stringify(req) });
}
`,
	"README.md":       "# Shop\n\nA tiny shop to test the index. Run `go test ./...`.\n",
	".gitignore":      "build/\n*.log\n",
	"build/out.go":    "package build // ignored\nfunc AddItem() {}\n",
	"debug.log":       "AddItem called\n",
	"assets/logo.bin": "PNG\x00\x01\x02binary",
}

func newTestIndex(t *testing.T, files map[string]string) (*Service, *Index, string) {
	t.Helper()
	dir := t.TempDir()
	testtree.Write(t, dir, files)
	svc, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "index.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	ix, err := svc.Workspace(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return svc, ix, dir
}

func build(t *testing.T, ix *Index, opts BuildOptions) BuildStats {
	t.Helper()
	st, err := ix.Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func textPaths(t *testing.T, ix *Index, q engine.TextQuery) []string {
	t.Helper()
	res, err := ix.SearchText(context.Background(), q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range res.Matches {
		out = append(out, m.Path)
	}
	return out
}

func TestBuildCatalog(t *testing.T) {
	_, ix, _ := newTestIndex(t, repo)
	var phases []string
	st := build(t, ix, BuildOptions{Progress: func(p Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	}})
	// Ignored (build/, *.log) and binary files are left out.
	if st.Files != 7 || st.Analyzed != 7 || st.Skipped != 1 || !st.Full {
		t.Errorf("stats = %+v", st)
	}
	if !slices.Equal(phases, []string{"scanning", "indexing", "writing", "done"}) {
		t.Errorf("phases = %v", phases)
	}
	status := ix.Status()
	if status.Files != 7 || status.Symbols == 0 || status.Chunks == 0 || status.Building || status.LastUpdate.IsZero() {
		t.Errorf("status = %+v", status)
	}
	// A second build with nothing changed reads nothing, and counts the
	// files left out as the first did.
	st = build(t, ix, BuildOptions{})
	if st.Read != 0 || st.Changed != 0 || st.Full || st.Skipped != 1 {
		t.Errorf("no-op build = %+v", st)
	}
	// After a checkpoint the database file alone holds the index, and
	// that is the size reported.
	if err := ix.svc.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	main, _ := os.Stat(ix.svc.DBPath())
	if wal, err := os.Stat(ix.svc.DBPath() + "-wal"); err == nil && wal.Size() != 0 {
		t.Errorf("write-ahead log of %d bytes after the checkpoint", wal.Size())
	}
	if got := ix.Status().DatabaseBytes; got != main.Size() {
		t.Errorf("database_bytes %d, want the file's %d", got, main.Size())
	}
}

func TestTextSearch(t *testing.T) {
	_, ix, _ := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	cases := []struct {
		name string
		q    engine.TextQuery
		want []string
	}{
		{"literal", engine.TextQuery{Pattern: "AddItem"}, []string{"cart/cart.go", "cart/cart.go", "cart/cart_test.go", "cart/cart_test.go"}},
		{"case sensitive", engine.TextQuery{Pattern: "additem"}, nil},
		{"case insensitive", engine.TextQuery{Pattern: "additem", CaseInsensitive: true}, []string{"cart/cart.go", "cart/cart.go", "cart/cart_test.go", "cart/cart_test.go"}},
		{"regex with literal", engine.TextQuery{Pattern: `func \(c \*Cart\) \w+Quantity`, Regex: true}, []string{"cart/cart.go"}},
		{"regex alternation", engine.TextQuery{Pattern: `apply_discount|submitCheckout`, Regex: true}, []string{"pricing/discount.py", "web/checkout.ts"}},
		{"regex without literal", engine.TextQuery{Pattern: `^\s+return \w+$`, Regex: true}, []string{"cart/cart.go"}},
		{"path prefix", engine.TextQuery{Pattern: "AddItem", Path: "cart/cart_test.go"}, []string{"cart/cart_test.go", "cart/cart_test.go"}},
		{"include glob", engine.TextQuery{Pattern: "return", Include: "*.py"}, []string{"pricing/discount.py", "pricing/discount.py"}},
		{"short literal", engine.TextQuery{Pattern: "n"}, nil}, // checked below for count only
		{"ignored file", engine.TextQuery{Pattern: "AddItem called"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := textPaths(t, ix, tc.q)
			if tc.name == "short literal" {
				if len(got) < 10 {
					t.Errorf("a one-letter pattern (no trigram) found only %d lines", len(got))
				}
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	res, err := ix.SearchText(context.Background(), engine.TextQuery{Pattern: "TotalQuantity() int", ContextLines: 1}, nil)
	if err != nil || len(res.Matches) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	m := res.Matches[0]
	if m.Line != 20 || m.Column != 16 || m.Text != "func (c *Cart) TotalQuantity() int {" || !slices.Equal(m.Before, []string{"// TotalQuantity counts the units in the cart."}) || !slices.Equal(m.After, []string{"\tn := 0"}) {
		t.Errorf("match = %+v", m)
	}
	var streamed []engine.TextMatch
	res, err = ix.SearchText(context.Background(), engine.TextQuery{Pattern: "Quantity", Limit: 3}, func(m engine.TextMatch) { streamed = append(streamed, m) })
	if err != nil || len(res.Matches) != 3 || !res.Truncated || len(streamed) != 3 {
		t.Errorf("limit: %+v %v, streamed %d", res, err, len(streamed))
	}
	for _, bad := range []engine.TextQuery{{Pattern: ""}, {Pattern: "(", Regex: true}, {Pattern: "x", Path: "../etc"}, {Pattern: "x", Include: "[a"}} {
		if _, err := ix.SearchText(context.Background(), bad, nil); !errors.Is(err, engine.ErrInvalidRequest) {
			t.Errorf("%+v: err = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

func TestSymbolSearch(t *testing.T) {
	_, ix, _ := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	search := func(q engine.SymbolQuery) []engine.SymbolHit {
		t.Helper()
		hits, err := ix.SearchSymbols(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	hits := search(engine.SymbolQuery{Query: "AddItem"})
	if len(hits) == 0 || hits[0].Name != "AddItem" || hits[0].Path != "cart/cart.go" || hits[0].Match != "exact" || hits[0].Container != "Cart" || hits[0].Kind != "method" || hits[0].StartLine != 14 {
		t.Fatalf("AddItem: %+v", hits)
	}
	cases := []struct {
		query, wantName, wantMatch string
	}{
		{"additem", "AddItem", "exact"},
		{"add_item", "AddItem", "exact"},
		{"apply_discount", "apply_discount", "exact"},
		{"TotalQ", "TotalQuantity", "prefix"},
		{"totQuant", "TotalQuantity", "fuzzy"},
		{"subCheck", "submitCheckout", "fuzzy"},
		{"checkout", "CheckoutRequest", "prefix"},
		{"Request", "CheckoutRequest", "fuzzy"},
		{"tq", "TotalQuantity", "fuzzy"},
	}
	for _, tc := range cases {
		hits := search(engine.SymbolQuery{Query: tc.query})
		if len(hits) == 0 || hits[0].Name != tc.wantName || hits[0].Match != tc.wantMatch {
			t.Errorf("%q: got %+v, want %s (%s) first", tc.query, hits, tc.wantName, tc.wantMatch)
		}
	}
	// Exact beats prefix: "Cart" the type before CartID-like names.
	if hits := search(engine.SymbolQuery{Query: "Cart"}); hits[0].Name != "Cart" || hits[0].Kind != "struct" && hits[0].Kind != "type" {
		t.Errorf("Cart: %+v", hits[0])
	}
	// Definitions before references; references from their files.
	hits = search(engine.SymbolQuery{Query: "AddItem", IncludeRefs: true})
	var refs []string
	for _, h := range hits {
		if !h.Definition {
			refs = append(refs, h.Path)
		}
	}
	if !hits[0].Definition || !slices.Contains(refs, "cart/cart_test.go") {
		t.Errorf("refs: %+v", hits)
	}
	if hits := search(engine.SymbolQuery{Query: "Item", Kind: "field"}); len(hits) == 0 || hits[0].Kind != "field" {
		t.Errorf("kind filter: %+v", hits)
	}
	if hits := search(engine.SymbolQuery{Query: "apply", Path: "web"}); len(hits) != 0 {
		t.Errorf("path filter: %+v", hits)
	}
}

func TestChunkSearch(t *testing.T) {
	_, ix, _ := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	hits, err := ix.SearchChunks(context.Background(), engine.ChunkQuery{Query: "take a percent discount off the price"})
	if err != nil || len(hits) == 0 {
		t.Fatal(hits, err)
	}
	if hits[0].Path != "pricing/discount.py" || hits[0].Name != "apply_discount" || !strings.Contains(hits[0].Text, "100 - percent") {
		t.Errorf("top hit %+v", hits[0])
	}
	hits, _ = ix.SearchChunks(context.Background(), engine.ChunkQuery{Query: "count the units (quantities) in a cart"})
	if len(hits) == 0 || hits[0].Name != "Cart.TotalQuantity" {
		t.Errorf("quantities: %+v", hits)
	}
}

func TestIncrementalUpdates(t *testing.T) {
	_, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	// Modify, create and delete files, then refresh.
	os.WriteFile(filepath.Join(dir, "cart/cart.go"), []byte(strings.Replace(repo["cart/cart.go"], "TotalQuantity", "CountUnits", -1)), 0o644)
	os.WriteFile(filepath.Join(dir, "cart/coupon.go"), []byte("package cart\n\n// Coupon takes money off.\ntype Coupon struct{ Code string }\n"), 0o644)
	os.Remove(filepath.Join(dir, "web/checkout.ts"))
	st := build(t, ix, BuildOptions{})
	if st.Full || st.Read != 2 || st.Changed != 2 || st.Removed != 1 || st.Analyzed != 2 {
		t.Errorf("refresh stats = %+v", st)
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "TotalQuantity"}); !slices.Equal(got, []string{"cart/cart_test.go"}) {
		t.Errorf("old name found in %v", got)
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "CountUnits"}); len(got) != 2 {
		t.Errorf("new name: %v", got)
	}
	if hits, _ := ix.SearchSymbols(context.Background(), engine.SymbolQuery{Query: "Coupon"}); len(hits) == 0 || hits[0].Path != "cart/coupon.go" {
		t.Errorf("new file's symbol: %+v", hits)
	}
	if hits, _ := ix.SearchSymbols(context.Background(), engine.SymbolQuery{Query: "submitCheckout"}); len(hits) != 0 {
		t.Errorf("deleted file's symbol: %+v", hits)
	}
	// Change events without a scan.
	os.WriteFile(filepath.Join(dir, "pricing/tax.py"), []byte("def add_tax(price):\n    return price * 1.2\n"), 0o644)
	// README.md still exists: the disk corrects the "deleted" event.
	_, err := ix.ApplyChanges(context.Background(), []FileChange{{Type: "created", Path: "pricing/tax.py"}, {Type: "deleted", Path: "README.md"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "add_tax"}); !slices.Equal(got, []string{"pricing/tax.py"}) {
		t.Errorf("created file: %v", got)
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "tiny shop"}); len(got) != 1 {
		t.Errorf("a deleted event for an existing file removed it: %v", got)
	}
	if _, err := ix.ApplyChanges(context.Background(), []FileChange{{Type: "modified", Path: "../outside.go"}}); !errors.Is(err, engine.ErrPermissionDenied) {
		t.Errorf("outside path: %v", err)
	}
	if _, err := ix.ApplyChanges(context.Background(), []FileChange{{Type: "renamed", Path: "go.mod"}}); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("bad type: %v", err)
	}
}

func TestReopenLoadsState(t *testing.T) {
	svc, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	path := svc.DBPath()
	// A change after the build, and a content change the next open must
	// notice through the delta.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk\n"), 0o644)
	if _, err := ix.ApplyChanges(context.Background(), []FileChange{{Type: "created", Path: "notes.txt"}}); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	svc2, err := Open(context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Close()
	ix2, err := svc2.Workspace(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ix2.Built() || ix2.Status().Files != 8 {
		t.Fatalf("reopened status %+v", ix2.Status())
	}
	for _, p := range []string{"AddItem", "remember the milk"} {
		if got := textPaths(t, ix2, engine.TextQuery{Pattern: p}); len(got) == 0 {
			t.Errorf("%q not found after reopening", p)
		}
	}
	if st := build(t, ix2, BuildOptions{}); st.Read != 0 {
		t.Errorf("build after reopen re-read %d files", st.Read)
	}
}

func TestDuplicateContentAnalysedOnce(t *testing.T) {
	files := map[string]string{"a/x.go": repo["cart/cart.go"], "b/x.go": repo["cart/cart.go"], "c.go": "package c\n"}
	svc, ix, dir := newTestIndex(t, files)
	st := build(t, ix, BuildOptions{})
	if st.Files != 3 || st.Analyzed != 2 {
		t.Errorf("stats = %+v", st)
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "AddItem", Limit: 100}); len(got) != 4 {
		t.Errorf("both copies should match: %v", got)
	}
	// A second workspace holding the same content reuses its analysis.
	other := t.TempDir()
	testtree.Write(t, other, map[string]string{"copy.go": repo["cart/cart.go"]})
	ix2, err := svc.Workspace(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if st := build(t, ix2, BuildOptions{}); st.Analyzed != 0 || st.Reused != 1 {
		t.Errorf("second workspace stats = %+v", st)
	}
	var n int
	svc.db.QueryRow(`SELECT count(*) FROM contents`).Scan(&n)
	if n != 2 {
		t.Errorf("%d contents stored, want 2", n)
	}
	_ = dir
}

// TestInterruptedBuildResumes cancels a build partway and checks that the
// next build analyses only what the first did not finish.
func TestInterruptedBuildResumes(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 3*batchSize; i++ {
		files[filepath.Join("pkg", "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), "file"+itoa(i)+".go")] =
			"package p\n\nfunc F" + itoa(i) + "() int { return " + itoa(i) + " }\n"
	}
	_, ix, _ := newTestIndex(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := ix.Build(ctx, BuildOptions{Progress: func(p Progress) {
		if p.Phase == "indexing" && p.Done > batchSize+50 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("build err = %v (stats %+v)", err, st)
	}
	first := st.Analyzed
	st = build(t, ix, BuildOptions{})
	if first < batchSize || st.Analyzed+first < len(files) || st.Analyzed > len(files)-batchSize {
		t.Errorf("first build analysed %d, second %d, of %d files: finished work was redone", first, st.Analyzed, len(files))
	}
	if got := textPaths(t, ix, engine.TextQuery{Pattern: "F1234()"}); len(got) != 1 {
		t.Errorf("search after resume: %v", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWatchAppliesEdits(t *testing.T) {
	_, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	applied := make(chan BuildStats, 16)
	done := make(chan error)
	go func() { done <- ix.Watch(ctx, func(st BuildStats, err error) { applied <- st }) }()
	os.MkdirAll(filepath.Join(dir, "inventory"), 0o755)
	os.WriteFile(filepath.Join(dir, "inventory", "stock.go"), []byte("package inventory\n\nfunc Restock() {}\n"), 0o644)
	deadline := time.After(10 * time.Second)
	for {
		if got := textPaths(t, ix, engine.TextQuery{Pattern: "Restock"}); len(got) == 1 {
			break
		}
		select {
		case <-applied:
		case <-deadline:
			t.Fatal("the watcher did not index a new file in a new directory")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("watch returned %v", err)
	}
}

func TestCorruptSegmentIsRebuilt(t *testing.T) {
	svc, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	if _, err := svc.db.Exec(`UPDATE segment_blocks SET data = x'00'`); err != nil {
		t.Fatal(err)
	}
	path := svc.DBPath()
	svc.Close()
	svc2, _ := Open(context.Background(), Options{Path: path})
	defer svc2.Close()
	ix2, err := svc2.Workspace(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if ix2.Built() {
		t.Fatal("a corrupt segment was loaded")
	}
	st := build(t, ix2, BuildOptions{})
	if !st.Full || st.Analyzed != 0 {
		t.Errorf("rebuild stats %+v: analyses should be reused", st)
	}
}

// TestWatchNewDirectories: files created in a directory made after the
// watch started, and in a directory moved in from outside, are indexed,
// also when they appear after the watcher has seen their directory.
func TestWatchNewDirectories(t *testing.T) {
	_, ix, dir := newTestIndex(t, repo)
	build(t, ix, BuildOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	applied := make(chan BuildStats, 64)
	done := make(chan error, 1)
	go func() { done <- ix.Watch(ctx, func(st BuildStats, err error) { applied <- st }) }()
	<-applied // the refresh that follows setting up the watches
	waitFor := func(what, pattern string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for len(textPaths(t, ix, engine.TextQuery{Pattern: pattern})) != 1 {
			select {
			case <-applied:
			case <-deadline:
				t.Fatalf("the watcher did not index %s", what)
			}
		}
	}
	// A new directory: the watcher applies its creation (nothing to
	// index yet), and only then does a file appear in it.
	os.MkdirAll(filepath.Join(dir, "later", "deeper"), 0o755)
	<-applied
	os.WriteFile(filepath.Join(dir, "later", "deeper", "late.go"), []byte("package deeper\n\nfunc LateComer() {}\n"), 0o644)
	waitFor("a file created in a directory made after watching started", "LateComer")
	os.WriteFile(filepath.Join(dir, "later", "top.go"), []byte("package later\n\nfunc TopComer() {}\n"), 0o644)
	waitFor("a file created in the new directory itself", "TopComer")

	// A directory moved in from outside the workspace, with a file; then
	// a file created in it afterwards.
	outside := filepath.Join(t.TempDir(), "moved")
	os.MkdirAll(filepath.Join(outside, "sub"), 0o755)
	os.WriteFile(filepath.Join(outside, "sub", "in.go"), []byte("package sub\n\nfunc MovedIn() {}\n"), 0o644)
	if err := os.Rename(outside, filepath.Join(dir, "moved")); err != nil {
		t.Skipf("cannot move a directory into the workspace: %v", err)
	}
	waitFor("a file of a directory moved in", "MovedIn")
	os.WriteFile(filepath.Join(dir, "moved", "sub", "after.go"), []byte("package sub\n\nfunc AfterMove() {}\n"), 0o644)
	waitFor("a file created in a moved-in directory", "AfterMove")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("watch returned %v", err)
	}
}

// TestSearchSeesOtherProcessesWrites: two services on one database are
// two processes; what one commits (an edit applied, a rebuild, a new
// file), the other's next search sees.
func TestSearchSeesOtherProcessesWrites(t *testing.T) {
	ctx := context.Background()
	svc1, ix1, dir := newTestIndex(t, repo)
	build(t, ix1, BuildOptions{})
	svc2, err := Open(ctx, Options{Path: svc1.DBPath()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Close()
	count := func(pattern string) int {
		t.Helper()
		res, err := svc2.SearchText(ctx, dir, engine.TextQuery{Pattern: pattern}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Matches)
	}
	if n := count("AddItem"); n == 0 {
		t.Fatal("the second process finds nothing")
	}
	// An edit applied by the first process.
	os.WriteFile(filepath.Join(dir, "cart", "extra.go"), []byte("package cart\n\nfunc WrittenElsewhere() {}\n"), 0o644)
	if _, err := ix1.ApplyChanges(ctx, []FileChange{{Type: "created", Path: "cart/extra.go"}}); err != nil {
		t.Fatal(err)
	}
	if n := count("WrittenElsewhere"); n != 1 {
		t.Errorf("after the other process applied a change: %d matches, want 1", n)
	}
	// A rebuild (a new base segment) by the first process, after another
	// file changed.
	os.WriteFile(filepath.Join(dir, "cart", "extra.go"), []byte("package cart\n\nfunc RebuiltElsewhere() {}\n"), 0o644)
	build(t, ix1, BuildOptions{Rebuild: true})
	if n, old := count("RebuiltElsewhere"), count("WrittenElsewhere"); n != 1 || old != 0 {
		t.Errorf("after the other process rebuilt: %d new, %d old matches; want 1 and 0", n, old)
	}
	hits, err := svc2.SearchSymbols(ctx, dir, engine.SymbolQuery{Query: "RebuiltElsewhere"})
	if err != nil || len(hits) != 1 {
		t.Errorf("symbols after the rebuild: %v %v", hits, err)
	}
}

// TestSymbolQualifiedAndImportance: Package.Name and Type.Method find the
// definition they name; a plain name ranks the exported, top-level
// definition of library code that the workspace refers to most above
// tests, internal packages and methods.
func TestSymbolQualifiedAndImportance(t *testing.T) {
	files := map[string]string{
		"os/file.go":            "package os\n\nfunc ReadFile(name string) ([]byte, error) { return nil, nil }\n",
		"os/file_test.go":       "package os\n\nfunc ReadFile2() {}\n\nfunc TestReadFile() { ReadFile(\"x\") }\n",
		"io/ioutil/ioutil.go":   "package ioutil\n\nfunc ReadFile(name string) ([]byte, error) { return nil, nil }\n",
		"internal/fsys/fsys.go": "package fsys\n\nfunc ReadFile(name string) ([]byte, error) { return nil, nil }\n",
		"embed/embed.go":        "package embed\n\ntype FS struct{}\n\nfunc (f FS) ReadFile(name string) ([]byte, error) { return nil, nil }\n",
		"bytes/buffer.go":       "package bytes\n\ntype Buffer struct{}\n\nfunc (b *Buffer) Write(p []byte) (int, error) { return 0, nil }\n",
		"bufio/bufio.go":        "package bufio\n\ntype Writer struct{}\n\nfunc (b *Writer) Write(p []byte) (int, error) { return 0, nil }\n",
		"cmd/a/main.go":         "package main\n\nimport \"os\"\n\nfunc main() { os.ReadFile(\"a\") }\n",
		"cmd/b/main.go":         "package main\n\nimport \"os\"\n\nfunc main() { os.ReadFile(\"b\") }\n",
		"cmd/c/main.go":         "package main\n\nimport \"io/ioutil\"\n\nfunc main() { ioutil.ReadFile(\"c\") }\n",
		"server.go":             "package grpc\n\nfunc NewServer() {}\n",
	}
	_, ix, _ := newTestIndex(t, files)
	build(t, ix, BuildOptions{})
	first := func(query string) string {
		t.Helper()
		hits, err := ix.SearchSymbols(context.Background(), engine.SymbolQuery{Query: query})
		if err != nil || len(hits) == 0 {
			t.Fatalf("%s: %v %v", query, hits, err)
		}
		return fmt.Sprintf("%s %s %s", hits[0].Path, hits[0].Container, hits[0].Name)
	}
	for query, want := range map[string]string{
		"ReadFile":        "os/file.go  ReadFile",
		"os.ReadFile":     "os/file.go  ReadFile",
		"ioutil.ReadFile": "io/ioutil/ioutil.go  ReadFile",
		"fsys.ReadFile":   "internal/fsys/fsys.go  ReadFile",
		"FS.ReadFile":     "embed/embed.go FS ReadFile",
		"embed.FS":        "embed/embed.go  FS",
		"Buffer.Write":    "bytes/buffer.go Buffer Write",
		"bufio.Writer":    "bufio/bufio.go  Writer",
		"Writer::Write":   "bufio/bufio.go Writer Write",
		"grpc.NewServer":  "server.go  NewServer", // a root package's name is not in the path
	} {
		if got := first(query); got != want {
			t.Errorf("%s: first hit %q, want %q", query, got, want)
		}
	}
}
