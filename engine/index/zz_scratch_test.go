package index_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine/index"
	"github.com/plexus-agent/plexus/internal/testtree"
	"github.com/plexus-agent/plexus/models/replay"
)

func TestScratchReopenEmbed(t *testing.T) {
	dir := t.TempDir()
	testtree.Write(t, dir, map[string]string{"a.go": "package a\n\n// F does things.\nfunc F() int {\n\treturn 1\n}\n", "b.go": "package a\n\nfunc G() {}\n"})
	db := filepath.Join(t.TempDir(), "x.db")
	ctx := context.Background()
	svc, _ := index.Open(ctx, index.Options{Path: db})
	ix, _ := svc.Workspace(ctx, dir)
	ix.Build(ctx, index.BuildOptions{})
	svc.Close()
	svc, _ = index.Open(ctx, index.Options{Path: db, Embedder: replay.New(), EmbedModel: "eval", EmbedLabel: "replay:eval"})
	defer svc.Close()
	ix, _ = svc.Workspace(ctx, dir)
	st, err := ix.Build(ctx, index.BuildOptions{})
	t.Logf("%+v %v", st, err)
	for i := 0; i < 10; i++ {
		t.Logf("%+v", ix.Status().Vectors)
		time.Sleep(100 * time.Millisecond)
	}
}
