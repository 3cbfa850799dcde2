package receipts_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/plexus-agent/plexus/engine/receipts"
)

// The engine records a decision; an auditor verifies the log.
func Example() {
	root, _ := os.MkdirTemp("", "receipts-example")
	defer os.RemoveAll(root)

	dir, err := receipts.RepoDir(root, "test-repo") // {ZU_ROOT}/ide/receipts/test-repo
	if err != nil {
		log.Fatal(err)
	}
	key, err := receipts.LoadOrCreateKey(filepath.Join(root, "keys"))
	if err != nil {
		log.Fatal(err)
	}
	l, err := receipts.Open(dir, receipts.Options{Key: key})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	args, _ := receipts.ArgsDigest([]byte(`{"command": "go test ./..."}`))
	r, err := l.Append(context.Background(), receipts.Receipt{
		Kind: receipts.KindApproval, Actor: "user", Session: "s1", Turn: "t1",
		Tool: "run_command", ArgsDigest: args,
	})
	if err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(root, l.Path(r))
	fmt.Println(filepath.ToSlash(rel) == "ide/receipts/test-repo/"+r.Time.Format("2006/01")+"/receipts.jsonl")

	rep, err := receipts.NewReader(dir).Verify(context.Background(), receipts.VerifyOptions{RequireSigned: true})
	fmt.Println(rep.Receipts, rep.Signed, rep.Head == r.Hash, err)
	// Output:
	// true
	// 1 1 true <nil>
}

// ArgsDigest ignores member order, whitespace and number spelling.
func ExampleArgsDigest() {
	a, _ := receipts.ArgsDigest([]byte(`{"path": "main.go", "line": 10.0}`))
	b, _ := receipts.ArgsDigest([]byte(`{"line":1e1,"path":"main.go"}`))
	fmt.Println(a == b)
	fmt.Println(a)
	// Output:
	// true
	// sha256:0dd2e44879fc1b79281a461ef03e386bc6b71e1a5257a51bc56edd8683e540eb
}

func ExampleCanonicalize() {
	out, _ := receipts.Canonicalize([]byte(`{ "b": [1.50, 1e21], "a": "\u00e9" }`))
	fmt.Println(string(out))
	// Output: {"a":"é","b":[1.5,1e+21]}
}

func ExampleMonth_File() {
	m := receipts.MonthOf(time.Date(2025, time.January, 31, 23, 59, 59, 0, time.UTC))
	fmt.Println(filepath.ToSlash(m.File("/zu/ide/receipts/test-repo")))
	// Output: /zu/ide/receipts/test-repo/2025/01/receipts.jsonl
}
