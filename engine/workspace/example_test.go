package workspace_test

import (
	"context"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/plexus-agent/plexus/engine/workspace"
)

// Walk lists what git would see: build/ and *.log are ignored, .git is
// skipped, and a nested .gitignore applies to its own directory.
func ExampleRoot_Walk() {
	dir, err := os.MkdirTemp("", "walk-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for name, content := range map[string]string{
		".gitignore":         "build/\n*.log\n",
		".git/HEAD":          "ref: refs/heads/main\n",
		"main.go":            "package main\n",
		"debug.log":          "...\n",
		"build/app":          "binary\n",
		"web/.gitignore":     "dist/\n",
		"web/index.ts":       "export {}\n",
		"web/dist/bundle.js": "...\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}

	root, err := workspace.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close()
	err = root.Walk(context.Background(), ".", workspace.WalkOptions{}, func(rel string, d fs.DirEntry) error {
		if !d.IsDir() {
			fmt.Println(rel)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// .gitignore
	// main.go
	// web/.gitignore
	// web/index.ts
}
