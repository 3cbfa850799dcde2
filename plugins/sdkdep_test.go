package plugins_test

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/plugins"
)

// The ways a plugin in a module of its own depends on the SDK, as the
// README's "Write a tool plugin" gives them (issue 20 item 6): a
// published version, a local checkout through replace or go.work, each
// installed with `plexus plugins install ./DIR`; and a module published
// with a replace directive, refused by `plugins install MODULE@VERSION`
// with an explanation.

// helloMain is the plugin of these tests: one tool, "hello".
const helloMain = `package main

import (
	"context"

	"github.com/plexus-agent/plexus/plugins"
)

type input struct {
	Name string ` + "`" + `json:"name" jsonschema:"who to greet"` + "`" + `
}

type hello struct{}

func (hello) Describe() plugins.ToolInfo {
	return plugins.ToolInfo{Name: "hello", Description: "Greet someone by name.", ReadOnly: true}
}

func (hello) Invoke(_ context.Context, _ *plugins.Call, in input) (string, error) {
	return "hello, " + in.Name, nil
}

func main() { plugins.Serve(plugins.NewTool(hello{})) }
`

// repoRoot is the checkout these tests run in: the SDK's local checkout.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goIn runs the go command in dir and fails the test if it fails.
func goIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newPluginModule makes a directory with `go mod init MODULE` and the
// plugin's main.go.
func newPluginModule(t *testing.T, module string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plexus-tool-hello")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goIn(t, dir, "mod", "init", module)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloMain), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// offline makes the go commands of the test (and those Install runs) use
// no network: modules come from the module cache, which holds every
// dependency of this checkout; go.sum entries are taken from it.
func offline(t *testing.T, proxy string) {
	t.Setenv("GOPROXY", proxy)
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GOWORK", "")
}

// installed installs the plugin from source and checks that it offers its
// tool.
func installed(t *testing.T, source string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	inst, err := plugins.Install(ctx, plugins.InstallOptions{Source: source, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("plexus plugins install %s: %v", source, err)
	}
	if len(inst.Tools) != 1 || inst.Tools[0].Name != "hello" || inst.Entry.Name != "hello" {
		t.Fatalf("installed %+v", inst)
	}
}

// TestSDKFromCheckoutWithReplace: go mod edit -replace to a checkout, go
// get the SDK package, plexus plugins install ./DIR.
func TestSDKFromCheckoutWithReplace(t *testing.T) {
	offline(t, "off")
	dir := newPluginModule(t, "example.com/plexus-tool-hello")
	goIn(t, dir, "mod", "edit", "-replace", "github.com/plexus-agent/plexus="+repoRoot(t))
	goIn(t, dir, "get", "github.com/plexus-agent/plexus/plugins")
	installed(t, dir)
}

// TestSDKFromCheckoutWithGoWork: go work init with the plugin and a
// checkout, plexus plugins install ./DIR.
func TestSDKFromCheckoutWithGoWork(t *testing.T) {
	offline(t, "off")
	dir := newPluginModule(t, "example.com/plexus-tool-hello")
	goIn(t, dir, "work", "init", ".", repoRoot(t))
	installed(t, dir)
}

// TestSDKPublishedVersion publishes the SDK (the packages plugins needs)
// and two plugin modules on a module proxy in a directory: go get of a
// published SDK version, then plexus plugins install ./DIR; plexus plugins
// install MODULE@VERSION of a module that requires it; and of one whose
// go.mod replaces the SDK with a local directory, which is refused with an
// explanation that names the replace (it failed with go install's words).
func TestSDKPublishedVersion(t *testing.T) {
	proxy := newModuleProxy(t)
	unique := fmt.Sprintf("%d%d", os.Getpid(), time.Now().UnixNano())
	sdkVersion := "v0.1.0-plexustest." + unique
	root := repoRoot(t)
	proxy.publish("github.com/plexus-agent/plexus", sdkVersion, root, sdkFiles(t, root))
	offline(t, "file://"+proxy.dir)

	dir := newPluginModule(t, "example.com/plexustest"+unique+"/plexus-tool-hello")
	goIn(t, dir, "get", "github.com/plexus-agent/plexus/plugins@"+sdkVersion)
	installed(t, dir)

	proxy.publish("example.com/plexustest"+unique+"/plexus-tool-hello", "v1.0.0", dir, []string{"go.mod", "go.sum", "main.go"})
	installed(t, "example.com/plexustest"+unique+"/plexus-tool-hello@v1.0.0")

	goIn(t, dir, "mod", "edit", "-module", "example.com/plexustest"+unique+"/plexus-tool-hello2", "-replace", "github.com/plexus-agent/plexus=../plexus")
	proxy.publish("example.com/plexustest"+unique+"/plexus-tool-hello2", "v1.0.0", dir, []string{"go.mod", "go.sum", "main.go"})
	_, err := plugins.Install(context.Background(), plugins.InstallOptions{Source: "example.com/plexustest" + unique + "/plexus-tool-hello2@v1.0.0", Name: "plexus-tool-hello2", Dir: t.TempDir()})
	for _, want := range []string{
		"cannot be installed by version",
		"replace github.com/plexus-agent/plexus => ../plexus",
		"run `plexus plugins install ./DIR` in it",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("install of a module with a replace: error lacks %q:\n%v", want, err)
		}
	}
}

// sdkFiles lists the files, relative to root, of the packages of this
// module that package plugins needs, with go.mod and go.sum.
func sdkFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if eq .Module.Path "github.com/plexus-agent/plexus"}}{{.Dir}}{{end}}{{end}}`, "./plugins")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, d := range strings.Fields(string(out)) {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				rel, _ := filepath.Rel(root, filepath.Join(d, e.Name()))
				files = append(files, filepath.ToSlash(rel))
			}
		}
	}
	return files
}

// moduleProxy is a GOPROXY in a directory (the go command's file://
// protocol: MODULE/@v/list, VERSION.info, VERSION.mod, VERSION.zip). What
// the go command downloads from it into the module cache is removed at
// the end of the test.
type moduleProxy struct {
	t   *testing.T
	dir string
}

func newModuleProxy(t *testing.T) *moduleProxy {
	return &moduleProxy{t: t, dir: t.TempDir()}
}

// publish serves files of dir (relative, slash-separated) as module
// path@version.
func (p *moduleProxy) publish(path, version, dir string, files []string) {
	t := p.t
	at := filepath.Join(p.dir, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(path + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644)
	os.WriteFile(filepath.Join(at, version+".info"), []byte(`{"Version":"`+version+`","Time":"2026-11-01T00:00:00Z"}`), 0o644)
	list, _ := os.ReadFile(filepath.Join(at, "list"))
	os.WriteFile(filepath.Join(at, "list"), append(list, version+"\n"...), 0o644)
	t.Cleanup(func() { forgetModule(path, version) })
}

// forgetModule removes path@version from the module cache.
func forgetModule(path, version string) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return
	}
	cache := strings.TrimSpace(string(out))
	extracted := filepath.Join(cache, filepath.FromSlash(path)+"@"+version)
	filepath.WalkDir(extracted, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(extracted)
	dl := filepath.Join(cache, "cache", "download", filepath.FromSlash(path), "@v")
	entries, _ := os.ReadDir(dl)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), version+".") {
			os.Remove(filepath.Join(dl, e.Name()))
		}
	}
	if entries, _ := os.ReadDir(dl); !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != "list" && e.Name() != "list.lock" }) {
		os.RemoveAll(filepath.Dir(dl))
	}
	removeEmptyParents(filepath.Dir(extracted), cache)
	removeEmptyParents(filepath.Dir(filepath.Dir(dl)), cache)
}

// removeEmptyParents removes dir and its parents below stop while they are
// empty.
func removeEmptyParents(dir, stop string) {
	for strings.HasPrefix(dir, stop+string(filepath.Separator)) && os.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
}
