package plugins_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/plugins"
)

// copyPlugin copies the test plugin binary into dir as name (a real copy,
// so that it can be changed).
func copyPlugin(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(pluginBin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLockWriteAndRead(t *testing.T) {
	dir := t.TempDir()
	lock, err := plugins.ReadLock(dir)
	if err != nil || len(lock.Entries()) != 0 {
		t.Fatalf("missing lock file: %v %v", lock.Entries(), err)
	}
	sum := strings.Repeat("ab", 32)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range []plugins.LockEntry{
		{Kind: "tool", Name: "zeta", File: "plexus-tool-zeta", SHA256: sum, ProtocolVersions: []int{1}, InstalledAt: at},
		{Kind: "model", Name: "alpha", File: "plexus-model-alpha", Version: "v1.2.3", Revision: "abc", SHA256: sum, ProtocolVersions: []int{1}, Source: "example.com/a@v1.2.3", InstalledAt: at},
		{Kind: "tool", Name: "beta", File: "plexus-tool-beta", SHA256: sum, ProtocolVersions: []int{1}, InstalledAt: at},
	} {
		if err := lock.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Put(plugins.LockEntry{Kind: "tool", Name: "beta", File: "plexus-tool-beta", SHA256: strings.Repeat("cd", 32), ProtocolVersions: []int{1}, InstalledAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := lock.Put(plugins.LockEntry{Kind: "tool", Name: "x", File: "plexus-model-x", SHA256: sum}); err == nil {
		t.Error("an entry whose file name does not match was accepted")
	}
	if err := lock.Write(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, plugins.LockFileName))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	again, err := plugins.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range again.Entries() {
		got = append(got, e.Kind+"/"+e.Name+"/"+e.SHA256[:2])
	}
	if want := []string{"model/alpha/ab", "tool/beta/cd", "tool/zeta/ab"}; !slices.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	e, ok := again.Entry(plugins.Ref{Kind: "model", Name: "alpha"})
	if !ok || e.Version != "v1.2.3" || e.Source != "example.com/a@v1.2.3" || !e.InstalledAt.Equal(at) {
		t.Errorf("entry %+v", e)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	for _, bad := range []string{`{"version":2,"plugins":[]}`, `{"version":1,"plugins":[],"x":1}`, `{"version":1}{}`, `[]`,
		`{"version":1,"plugins":[{"kind":"tool","name":"a","file":"plexus-tool-a","sha256":"AB","protocol_versions":[1]}]}`} {
		if _, err := plugins.DecodeLock([]byte(bad)); err == nil {
			t.Errorf("DecodeLock(%s) succeeded", bad)
		}
	}
}

func FuzzDecodeLock(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	f.Add([]byte(`{"version":1,"plugins":[{"kind":"tool","name":"a","file":"plexus-tool-a","sha256":"` + sum + `","protocol_versions":[1],"installed_at":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"plugins":[]}`))
	f.Add([]byte(`{"version":1,"plugins":[{"kind":"model","name":"a","file":"plexus-model-a","sha256":"` + sum + `"},{"kind":"model","name":"a","file":"plexus-model-a","sha256":"` + sum + `"}]}`))
	f.Add([]byte(`{"version":"1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := plugins.DecodeLock(b)
		if err != nil {
			return
		}
		// What decodes is valid: it can be put into a lock, written and
		// read back unchanged.
		dir := t.TempDir()
		lock, _ := plugins.ReadLock(dir)
		for _, e := range entries {
			if err := lock.Put(e); err != nil {
				t.Fatalf("decoded entry %+v is not valid: %v", e, err)
			}
		}
		if err := lock.Write(); err != nil {
			t.Fatal(err)
		}
		again, err := plugins.ReadLock(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Entries()) != len(entries) {
			t.Fatalf("%d entries after a round trip, want %d", len(again.Entries()), len(entries))
		}
	})
}

func TestUnlockedPluginIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(pluginBin, filepath.Join(dir, "plexus-tool-test")); err != nil {
		t.Fatal(err)
	}
	ts := newManager(t, plugins.Options{Dirs: []string{dir}}).Toolset()
	_, err := ts.Tools(context.Background())
	want := filepath.Join(dir, "plexus-tool-test") + " is not in " + filepath.Join(dir, plugins.LockFileName) + ", so it is not launched; install it with `plexus plugins install "
	if !errors.Is(err, plugins.ErrNotLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
}

func TestChangedBinaryFailsChecksum(t *testing.T) {
	dir := t.TempDir()
	bin := copyPlugin(t, dir, "plexus-tool-test")
	lockFiles(t, dir, "plexus-tool-test")
	m := newManager(t, plugins.Options{Dirs: []string{dir}})
	if _, _, err := invoke(t, m.Toolset(), "noop", `{}`); err != nil {
		t.Fatalf("installed binary: %v", err)
	}
	m.Close()

	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	want, _ := plugins.ReadLock(dir)
	entry, _ := want.Entry(plugins.Ref{Kind: "tool", Name: "test"})
	got, _ := plugins.FileSHA256(bin)

	logs := &logBuffer{}
	m = newManager(t, plugins.Options{Dirs: []string{dir}, Logger: slogText(logs)})
	_, err = m.Toolset().Tools(context.Background())
	var ce *plugins.ChecksumError
	if !errors.Is(err, plugins.ErrChecksumMismatch) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a checksum error", err)
	}
	if ce.Want != entry.SHA256 || ce.Got != got || ce.Path != bin || ce.LockFile != filepath.Join(dir, plugins.LockFileName) {
		t.Errorf("checksum error %+v; want sums %s / %s", ce, entry.SHA256, got)
	}
	for _, w := range []string{bin, ce.LockFile, entry.SHA256, got, "plexus plugins install", "plexus plugins verify"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if !strings.Contains(logs.String(), "plugin failed to start") {
		t.Errorf("the refusal was not logged:\n%s", logs)
	}

	res := plugins.Verify([]string{dir})
	if len(res) != 1 || res[0].State != plugins.VerifyModified || !errors.Is(res[0].Err, plugins.ErrChecksumMismatch) {
		t.Errorf("verify = %+v", res)
	}
}

func TestVerify(t *testing.T) {
	dir := pluginDir(t, "plexus-tool-test", "plexus-model-test")
	if err := os.Symlink(pluginBin, filepath.Join(dir, "plexus-tool-stray")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "plexus-model-test")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range plugins.Verify([]string{dir, filepath.Join(dir, "missing")}) {
		got = append(got, r.Ref.Kind+"/"+r.Ref.Name+"="+string(r.State))
	}
	want := []string{"model/test=missing", "tool/test=ok", "tool/stray=not-locked"}
	if !slices.Equal(got, want) {
		t.Errorf("verify = %v, want %v", got, want)
	}
	os.WriteFile(filepath.Join(dir, plugins.LockFileName), []byte("{"), 0o644)
	if r := plugins.Verify([]string{dir}); len(r) != 1 || r[0].State != plugins.VerifyLockError {
		t.Errorf("corrupt lock file: %+v", r)
	}
}

func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins")
	ctx := context.Background()
	inst, err := plugins.Install(ctx, plugins.InstallOptions{Source: pluginBin, Name: "plexus-tool-test", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := plugins.FileSHA256(pluginBin)
	e := inst.Entry
	if e.Kind != "tool" || e.Name != "test" || e.File != "plexus-tool-test" || e.SHA256 != sum || e.Version != "(devel)" ||
		!slices.Equal(e.ProtocolVersions, []int{plugins.ProtocolVersion}) || e.Source != pluginBin || inst.Replaced || len(inst.Tools) != 13 {
		t.Errorf("installed %+v, %d tools", inst, len(inst.Tools))
	}
	fi, err := os.Stat(inst.Path)
	if err != nil || fi.Mode().Perm() != 0o755 || inst.Path != filepath.Join(dir, "plexus-tool-test") {
		t.Errorf("binary %s: %v %v", inst.Path, fi, err)
	}
	lock, err := plugins.ReadLock(dir)
	if got, _ := lock.Entry(plugins.Ref{Kind: "tool", Name: "test"}); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("lock entry %+v, %v; want %+v", got, err, e)
	}
	// A model under a model name; a reinstall replaces the entry.
	if _, err := plugins.Install(ctx, plugins.InstallOptions{Source: pluginBin, Name: "plexus-model-test", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if again, err := plugins.Install(ctx, plugins.InstallOptions{Source: inst.Path, Dir: dir}); err != nil || !again.Replaced {
		t.Fatalf("reinstall: %+v %v", again, err)
	}
	m := newManager(t, plugins.Options{Dirs: []string{dir}})
	if _, _, err := invoke(t, m.Toolset(), "noop", `{}`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Models()["test"].ListModels(ctx); err != nil {
		t.Fatal(err)
	}

	hello := filepath.Join(t.TempDir(), "hello")
	if err := os.WriteFile(hello, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts plugins.InstallOptions
		want string
		is   error
	}{
		{"name from a file that is not a plugin name", plugins.InstallOptions{Source: pluginBin}, "cannot tell the plugin's kind and name from \"testplugin\"", nil},
		{"bad name", plugins.InstallOptions{Source: pluginBin, Name: "plexus-tool-Bad"}, `--name "plexus-tool-Bad": want plexus-tool-NAME`, nil},
		{"not a plugin", plugins.InstallOptions{Source: hello, Name: "plexus-tool-hello"}, `not a Plexus plugin: it printed "hello" on stdout instead of the plugin handshake`, plugins.ErrNotPlugin},
		{"no such file", plugins.InstallOptions{Source: "./no/such/plugin"}, "no such file or directory", nil},
		{"bad package", plugins.InstallOptions{Source: "example.invalid/x@"}, "not a file, a directory or a Go package path", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Dir = dir
			_, err := plugins.Install(ctx, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".plexus-plugins.lock.lk", "plexus-model-test", plugins.LockFileName, "plexus-tool-test"}; !slices.Equal(names, want) {
		t.Errorf("plugin directory holds %v, want %v", names, want)
	}
	if err := plugins.Uninstall(dir, plugins.Ref{Kind: "model", Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := plugins.Uninstall(dir, plugins.Ref{Kind: "model", Name: "test"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("second uninstall: %v", err)
	}
	if r := plugins.Verify([]string{dir}); len(r) != 1 || r[0].State != plugins.VerifyOK {
		t.Errorf("verify after uninstall: %+v", r)
	}
}

// TestInstallWrongKind installs a tool plugin under a model name: the
// handshake works, but it does not serve the model service.
func TestInstallWrongKind(t *testing.T) {
	src := filepath.Join(t.TempDir(), "plexus-model-words")
	build := exec.Command("go", "build", "-o", src, "../examples/plexus-tool-loc")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	_, err := plugins.Install(context.Background(), plugins.InstallOptions{Source: src, Dir: t.TempDir()})
	if !errors.Is(err, plugins.ErrNotPlugin) || !strings.Contains(err.Error(), "is not a model plugin") || !strings.Contains(err.Error(), "does not serve the model service") {
		t.Errorf("err = %v", err)
	}
}

// pluginEnvOf calls the test plugin's env tool.
func pluginEnvOf(t *testing.T, ts engine.Toolset) (env []string, socketDir string) {
	t.Helper()
	res, _, err := invoke(t, ts, "env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Env       []string `json:"env"`
		SocketDir string   `json:"socket_dir"`
	}
	if err := json.Unmarshal(res.Content, &r); err != nil {
		t.Fatal(err)
	}
	return r.Env, r.SocketDir
}

func TestPluginEnvironmentIsAllowListed(t *testing.T) {
	t.Setenv("PLEXUS_TEST_SECRET", "hunter2")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("LC_PLEXUS_TEST", "allowed by LC_*")
	t.Setenv("PLEXUS_TEST_EXTRA", "allowed by Options.Env")
	t.Setenv("PLEXUS_TEST_ONLY_TOOL", "allowed by Options.PluginEnv")
	ts := newManager(t, plugins.Options{
		Env:       []string{"PLEXUS_TEST_EXTRA"},
		PluginEnv: map[plugins.Ref][]string{{Kind: "model", Name: "test"}: {"PLEXUS_TEST_ONLY_*"}, {Kind: "tool", Name: "test"}: {"PLEXUS_TEST_ONLY_TOOL"}},
	}).Toolset()
	env, _ := pluginEnvOf(t, ts)
	names := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		names[k] = v
	}
	for _, secret := range []string{"PLEXUS_TEST_SECRET", "OPENAI_API_KEY"} {
		if _, ok := names[secret]; ok {
			t.Errorf("%s reached the plugin", secret)
		}
	}
	for _, k := range []string{"PATH", "LC_PLEXUS_TEST", "PLEXUS_TEST_EXTRA", "PLEXUS_TEST_ONLY_TOOL", plugins.Handshake.MagicCookieKey} {
		if _, ok := names[k]; !ok {
			t.Errorf("%s did not reach the plugin; it got %v", k, env)
		}
	}
}

func TestSocketsInPrivateDirectory(t *testing.T) {
	m := newManager(t, plugins.Options{RuntimeDir: t.TempDir()})
	_, socketDir := pluginEnvOf(t, m.Toolset())
	if socketDir != m.SocketDir() {
		t.Fatalf("plugin socket directory %q, want the manager's %q", socketDir, m.SocketDir())
	}
	fi, err := os.Stat(socketDir)
	if err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("socket directory: %v %v", fi, err)
	}
	entries, _ := os.ReadDir(socketDir)
	sockets := 0
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 {
			sockets++
		}
	}
	if sockets != 1 {
		t.Errorf("%d sockets in %s (%v), want the plugin's one", sockets, socketDir, entries)
	}
	m.Close()
	if _, err := os.Stat(socketDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory left after Close: %v", err)
	}
}

// startDebugPlugin runs the test plugin as plexus-tool-test --debug and
// returns the process and the reattach configurations it printed.
func startDebugPlugin(t *testing.T) (*exec.Cmd, map[plugins.Ref]plugins.ReattachConfig) {
	t.Helper()
	link := filepath.Join(t.TempDir(), "plexus-tool-test")
	if err := os.Symlink(pluginBin, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, plugins.DebugFlag)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read the debug line: %v", err)
	}
	value, ok := strings.CutPrefix(strings.TrimSpace(line), plugins.EnvReattach+"='")
	value, ok2 := strings.CutSuffix(value, "'")
	if !ok || !ok2 {
		t.Fatalf("debug line %q: want %s='...'", line, plugins.EnvReattach)
	}
	cfgs, err := plugins.ParseReattach(value)
	if err != nil {
		t.Fatal(err)
	}
	rc, ok := cfgs[plugins.Ref{Kind: "tool", Name: "test"}]
	if len(cfgs) != 1 || !ok || rc.Pid != cmd.Process.Pid || rc.Protocol != "grpc" || rc.Addr.Network != "unix" {
		t.Fatalf("reattach config %+v (pid %d)", cfgs, cmd.Process.Pid)
	}
	return cmd, cfgs
}

func TestDebugReattach(t *testing.T) {
	cmd, cfgs := startDebugPlugin(t)
	pid := cmd.Process.Pid
	for round := 1; round <= 2; round++ {
		logs := &logBuffer{}
		m := newManager(t, plugins.Options{Dirs: []string{}, Reattach: cfgs, Logger: slogText(logs)})
		if got := pidOf(t, m.Toolset()); got != pid {
			t.Fatalf("round %d: the tool ran in pid %d, want the debugged %d", round, got, pid)
		}
		res, _, err := invoke(t, m.Toolset(), "echo", `{"text":"attached"}`)
		if err != nil || !strings.Contains(string(res.Content), "attached") {
			t.Fatalf("round %d: %s %v", round, res.Content, err)
		}
		if infos := m.Plugins(); len(infos) != 1 || infos[0].Attach == nil || infos[0].Lock != nil {
			t.Errorf("plugins = %+v", infos)
		}
		m.Close()
		time.Sleep(100 * time.Millisecond)
		if !alive(pid) {
			t.Fatalf("round %d: Close stopped the debugged plugin", round)
		}
		if !strings.Contains(logs.String(), "attaching to a plugin in debug mode") {
			t.Errorf("no warning about the debug attach:\n%s", logs)
		}
	}

	// When it goes away, the host says so and does not relaunch it.
	m := newManager(t, plugins.Options{Dirs: []string{}, Reattach: cfgs})
	pidOf(t, m.Toolset())
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the debug plugin did not exit cleanly on SIGINT: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := invoke(t, m.Toolset(), "noop", `{}`)
		if err != nil && strings.Contains(err.Error(), plugins.ErrDebugPluginGone.Error()) {
			if !strings.Contains(err.Error(), "does not relaunch") || !strings.Contains(err.Error(), plugins.DebugFlag) {
				t.Errorf("err = %v", err)
			}
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("after the debugged plugin exited: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParseReattach(t *testing.T) {
	good := `{"tool/x":{"protocol":"grpc","protocol_version":1,"pid":7,"addr":{"network":"unix","address":"/tmp/s"}}}`
	cfgs, err := plugins.ParseReattach(good)
	if err != nil || cfgs[plugins.Ref{Kind: "tool", Name: "x"}].Addr.Address != "/tmp/s" {
		t.Fatalf("%+v %v", cfgs, err)
	}
	if line := plugins.FormatReattach(cfgs); line != plugins.EnvReattach+"='"+good+"'" {
		t.Errorf("FormatReattach = %s", line)
	}
	for _, tt := range []struct{ in, want string }{
		{`{`, "is not a JSON object"},
		{`{"tool":{}}`, `"tool": want KIND/NAME`},
		{`{"tool/X":{}}`, `name "X"`},
		{`{"tool/x":{"protocol":"netrpc"}}`, `protocol "netrpc"`},
		{`{"tool/x":{"protocol":"grpc","protocol_version":9}}`, "protocol_version 9"},
		{`{"tool/x":{"protocol":"grpc","protocol_version":1,"pid":0}}`, "pid 0"},
		{`{"tool/x":{"protocol":"grpc","protocol_version":1,"pid":1,"addr":{"network":"udp","address":"a"}}}`, "want network unix or tcp"},
	} {
		if _, err := plugins.ParseReattach(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseReattach(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseReattach(f *testing.F) {
	f.Add(`{"tool/x":{"protocol":"grpc","protocol_version":1,"pid":7,"addr":{"network":"unix","address":"/tmp/s"}}}`)
	f.Add(`{"model/a-b":{"protocol":"grpc","protocol_version":1,"pid":1,"addr":{"network":"tcp","address":"127.0.0.1:1"}}}`)
	f.Add(`{}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, s string) {
		cfgs, err := plugins.ParseReattach(s)
		if err != nil {
			return
		}
		line := plugins.FormatReattach(cfgs)
		value := strings.TrimSuffix(strings.TrimPrefix(line, plugins.EnvReattach+"='"), "'")
		again, err := plugins.ParseReattach(value)
		if err != nil || !reflect.DeepEqual(again, cfgs) {
			t.Fatalf("round trip of %q: %v, %v; want %v", s, again, err, cfgs)
		}
	})
}

func slogText(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestConcurrentInstalls installs four plugins into one directory at
// once: every one ends up in the lock file.
func TestConcurrentInstalls(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	build := exec.Command("go", "build", "-o", src, "../examples/plexus-tool-loc")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	names := []string{"a", "b", "c", "d"}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = plugins.Install(context.Background(), plugins.InstallOptions{Source: src, Name: "plexus-tool-" + n, Dir: dir})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("install %s: %v", names[i], err)
		}
	}
	lock, err := plugins.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := lock.Entry(plugins.Ref{Kind: plugins.KindTool, Name: n}); !ok {
			t.Errorf("plugin %s is not in the lock file", n)
		}
	}
	if r := plugins.Verify([]string{dir}); len(r) != len(names) {
		t.Errorf("verify: %+v", r)
	}
}

// TestInstallPluginThatFailsAtStart: a process that exits before the
// handshake is not called "not a plugin" (it may be one missing a
// variable), and the error says where to look.
func TestInstallPluginThatFailsAtStart(t *testing.T) {
	src := filepath.Join(t.TempDir(), "plexus-tool-dies")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho 'OPENAI_API_KEY is not set' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err := plugins.Install(context.Background(), plugins.InstallOptions{Source: src, Dir: dir})
	if err == nil || errors.Is(err, plugins.ErrNotPlugin) || !strings.Contains(err.Error(), "may have failed at startup") || !strings.Contains(err.Error(), "nothing was installed") {
		t.Errorf("err = %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "plexus-tool-dies")); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("the failed plugin was left in the directory: %v", statErr)
	}
}

// TestManagerHashesOncePerIdentity: a third-party plugin's binary is
// hashed at its first launch only; later Managers sharing the
// VerifiedCache (later plexus processes) check its file identity instead
// (issue 16: every launch hashed the whole binary, 20 MB here).
func TestManagerHashesOncePerIdentity(t *testing.T) {
	dir := pluginDir(t, "plexus-tool-test")
	cache := filepath.Join(t.TempDir(), "verified.json")
	// A hash within 2 s of the binary's last change is not recorded (see
	// racyWindow); the test binary may have just been built.
	if fi, err := os.Stat(pluginBin); err == nil {
		ctime := time.Unix(fi.Sys().(*syscall.Stat_t).Ctim.Unix())
		time.Sleep(time.Until(ctime.Add(2100 * time.Millisecond)))
	}
	launch := func() string {
		logs := &logBuffer{}
		m := newManager(t, plugins.Options{Dirs: []string{dir}, VerifiedCache: cache,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if _, _, err := invoke(t, m.Toolset(), "noop", `{}`); err != nil {
			t.Fatal(err)
		}
		m.Close()
		return logs.String()
	}
	if logs := launch(); !strings.Contains(logs, "plugin binary hashed") {
		t.Fatalf("first launch did not hash the binary:\n%s", logs)
	}
	for i := range 2 {
		logs := launch()
		if strings.Contains(logs, "plugin binary hashed") || !strings.Contains(logs, "verified by its file identity") {
			t.Fatalf("launch %d hashed the binary again:\n%s", i+2, logs)
		}
	}
}

// TestInstallRefusesBuiltinName: a plugin installed under the name of a
// built-in would never run (the built-in always wins), so Install refuses
// it and says what to do (issue 20 item 9: it succeeded and the warning
// came only at use).
func TestInstallRefusesBuiltinName(t *testing.T) {
	dir := t.TempDir()
	_, err := plugins.Install(context.Background(), plugins.InstallOptions{Source: pluginBin, Name: "plexus-tool-fs", Dir: dir,
		Builtins: []plugins.Ref{{Kind: "tool", Name: "fs"}, {Kind: "model", Name: "ollama"}}})
	if !errors.Is(err, plugins.ErrShadowed) || !strings.Contains(err.Error(), `"fs" is the name of a built-in tool plugin`) ||
		!strings.Contains(err.Error(), "--name plexus-tool-NAME") {
		t.Fatalf("err = %v, want ErrShadowed saying to choose another name", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused install left %v", entries)
	}
	// The same name as another kind is no clash.
	if _, err := plugins.Install(context.Background(), plugins.InstallOptions{Source: pluginBin, Name: "plexus-model-fs", Dir: dir,
		Builtins: []plugins.Ref{{Kind: "tool", Name: "fs"}}}); err != nil {
		t.Fatal(err)
	}
}
