package patch_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/plexus-agent/plexus/engine/patch"
	"github.com/plexus-agent/plexus/engine/workspace"
)

// A tool proposes an edit, the user approves it, the engine applies it and
// then takes it back.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	base := "package main\nfunc main() {\n\tprintln(\"hi\")\n}\n"
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(base), 0o644)
	root, _ := workspace.Open(dir)
	defer root.Close()

	s, err := patch.Propose([]patch.Edit{{
		Path: "main.go", Base: []byte(base), BaseExists: true,
		New: []byte("package main\nfunc main() {\n\tprintln(\"hello\")\n}\n"),
	}}, "Greet properly", []string{"go run . prints hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(s.Files[0].Diff)

	applied, err := patch.Apply(root, s, patch.Selection{All: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	now, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	fmt.Printf("applied: %q\n", now)

	if err := patch.Undo(root, applied, false); err != nil {
		fmt.Println(err)
		return
	}
	now, _ = os.ReadFile(filepath.Join(dir, "main.go"))
	fmt.Println("undone:", string(now) == base)
	// Output:
	// diff --git a/main.go b/main.go
	// --- a/main.go
	// +++ b/main.go
	// @@ -1,4 +1,4 @@
	//  package main
	//  func main() {
	// -	println("hi")
	// +	println("hello")
	//  }
	// applied: "package main\nfunc main() {\n\tprintln(\"hello\")\n}\n"
	// undone: true
}
