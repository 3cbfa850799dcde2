package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The first-hour test runs in a network namespace of its own, where only
// the loopback interface exists. It is the test binary itself, started
// again with these variables.
const (
	// offlineCloneEnv names the fresh copy of the repository the child
	// works in; its presence makes TestFirstHourOffline the child.
	offlineCloneEnv = "PLEXUS_OFFLINE_CLONE"
	// requireNetnsEnv, set to 1 (scripts/test.sh sets it when it runs as
	// root), makes the test fail instead of skip when it cannot create a
	// network namespace.
	requireNetnsEnv = "PLEXUS_REQUIRE_NETNS"
)

// TestFirstHourOffline does what a new user does in the first hour, on a
// fresh copy of the repository, with an empty HOME and no network (a
// network namespace with only loopback): the README's tour (its own
// command, with the binary under test as the one it builds), plexus
// models, plexus serve --transport http with curl /v1/models, and the
// plugin tutorial (build, check, install, list, run). Everything must
// work, and nothing may try to reach an address outside loopback: the
// namespace's counters of packets that
// found no route (Ip OutNoRoutes, Ip6 OutNoRoutes in /proc/net/snmp*),
// which every attempt to connect or send to such an address increments,
// must not move, and a DNS server on loopback (as resolv.conf may name)
// must get no query. Both detectors are first shown to see a dial out.
func TestFirstHourOffline(t *testing.T) {
	if clone := os.Getenv(offlineCloneEnv); clone != "" {
		firstHourInNamespace(t, clone)
		return
	}
	if testing.Short() {
		t.Skip("builds plexus and a plugin in a fresh copy of the repository")
	}
	clone := freshClone(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFirstHourOffline$", "-test.v", "-test.timeout=60m")
	cmd.Env = append(os.Environ(), offlineCloneEnv+"="+clone, testBinEnv+"="+plexusBin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		msg := fmt.Sprintf("cannot create a network namespace (%v): run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)", err)
		if os.Getenv(requireNetnsEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	err := cmd.Wait()
	t.Logf("in the network namespace:\n%s", out.String())
	if err != nil {
		t.Fatalf("the first hour failed offline (%v); see the log above", err)
	}
}

// testBinEnv, when set, is the plexus binary TestMain uses instead of
// building one (the first-hour child reuses its parent's).
const testBinEnv = "PLEXUS_TEST_BIN"

// freshClone copies the repository's tracked files, as a clone has them,
// to a new directory.
func freshClone(t *testing.T) string {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z")
	ls.Dir = repoRoot
	list, err := ls.Output()
	if err != nil {
		t.Skipf("the repository's files cannot be listed (git ls-files: %v)", err)
	}
	dst := filepath.Join(t.TempDir(), "plexus")
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(repoRoot, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(src)
			if err := os.Symlink(target, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// firstHourInNamespace is the child: it runs in the new network namespace.
func firstHourInNamespace(t *testing.T, clone string) {
	loopbackUp(t)
	// The detectors see a dial out and a name lookup.
	dns := watchLoopbackDNS(t)
	before := noRoutes(t)
	if _, err := net.DialTimeout("tcp", "192.0.2.1:443", 2*time.Second); err == nil {
		t.Fatal("a dial to 192.0.2.1 succeeded: this is not a namespace without network")
	}
	net.DefaultResolver.LookupHost(context.Background(), "api.openai.com")
	if noRoutes(t) == before {
		t.Fatal("the no-route counters did not move for a dial out: they cannot show that nothing dialled out")
	}
	if dns.loopback && dns.queries.Load() == 0 {
		t.Fatal("the loopback DNS server of resolv.conf saw no query for a lookup: it cannot show that nothing looked up a name")
	}

	home := t.TempDir()
	tmp := t.TempDir()
	gopath, gocache, gomodcache := goEnv(t, "GOPATH"), goEnv(t, "GOCACHE"), goEnv(t, "GOMODCACHE")
	env := []string{"HOME=" + home, "TMPDIR=" + tmp, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		// Go with the caches a developer has, and no network.
		"GOPATH=" + gopath, "GOCACHE=" + gocache, "GOMODCACHE=" + gomodcache, "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly"}
	start, noRoutesBefore, dnsBefore := time.Now(), noRoutes(t), dns.queries.Load()
	run := func(what string, wantCode int, name string, args ...string) result {
		t.Helper()
		// Only a hang may reach the timeout: a loaded machine is slow.
		r := runIn(t, 15*time.Minute, clone, env, "", name, args...)
		if r.code != wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, wantCode, r.stdout, r.stderr)
		}
		t.Logf("%s: exit %d", what, r.code)
		return r
	}

	// 1. The README's first command, as it is written there, but for its
	// go build: the binary under test is put where it builds it (building
	// it again here would only time the linker on a loaded machine).
	line := readmeLine(t, filepath.Join(clone, "README.md"), "examples/replay/tour.jsonl \"Give me a tour")
	build, tour, ok := strings.Cut(line, " && ")
	if !ok || build != "go build -o bin/plexus ./cmd/plexus" {
		t.Fatalf("the README's first command is no longer `go build -o bin/plexus ./cmd/plexus && bin/plexus run ...`: %q", line)
	}
	copyFile(t, plexusBin, filepath.Join(clone, "bin", "plexus"))
	r := run("the README's tour", 0, "sh", "-c", tour)
	if !strings.Contains(r.stderr, "— completed") || !strings.Contains(r.stderr, "list_files") {
		t.Errorf("the tour did not complete:\n%s", r.stderr)
	}

	// 2. plexus models: nothing is configured and no Ollama runs; each
	// provider says so, and nothing is contacted.
	r = run("plexus models", 1, "bin/plexus", "models")
	for _, want := range []string{"ollama: no Ollama server is reachable at http://127.0.0.1:11434", "openai: not configured: set OPENAI_API_KEY", "replay: not configured: set PLEXUS_REPLAY_DIR"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("plexus models does not say %q:\n%s", want, r.stderr)
		}
	}
	r = run("plexus models with the tour's model", 0, "bin/plexus", "models", "--model", "replay:examples/replay/tour.jsonl")
	if !strings.Contains(r.stdout, "replay:examples/replay/tour.jsonl") {
		t.Errorf("plexus models --model replay:... does not list it:\n%s", r.stdout)
	}

	// 3. The HTTP server on its default address, and curl /v1/models.
	serveHTTPAndCurl(t, clone, env, home)

	// 4. The plugin tutorial.
	bin := filepath.Join(tmp, "plexus-tool-loc")
	run("go build of the example plugin", 0, "go", "build", "-o", bin, "./examples/plexus-tool-loc")
	run("plexus plugins check", 0, "bin/plexus", "plugins", "check", bin)
	run("plexus plugins install", 0, "bin/plexus", "plugins", "install", "./examples/plexus-tool-loc")
	if r := run("plexus plugins", 0, "bin/plexus", "plugins"); !strings.Contains(r.stdout, "count_lines_of_code") {
		t.Errorf("plexus plugins does not list the installed tool:\n%s", r.stdout)
	}
	if r := run("plexus run with the plugin", 0, "bin/plexus", "run", "--model", "replay:cmd/plexus/testdata/loc.jsonl", "How much code is there?"); !strings.Contains(r.stderr, "count_lines_of_code") {
		t.Errorf("the turn did not call the plugin:\n%s", r.stderr)
	}

	if after := noRoutes(t); after != noRoutesBefore {
		t.Errorf("something tried to reach an address outside loopback: the no-route counters went from %v to %v", noRoutesBefore, after)
	}
	if n := dns.queries.Load(); n != dnsBefore {
		t.Errorf("%d DNS queries reached the loopback DNS server", n-dnsBefore)
	}
	t.Logf("the first hour took %v offline", time.Since(start).Round(time.Second))
}

// serveHTTPAndCurl runs plexus serve --transport http as the README does
// (its default address, the token generated under HOME) and asks
// /v1/models with curl.
func serveHTTPAndCurl(t *testing.T, clone string, env []string, home string) {
	t.Helper()
	cmd := exec.Command("bin/plexus", "serve", "--transport", "http", "-w", ".", "--model", "replay:examples/replay/tour.jsonl")
	cmd.Dir, cmd.Env = clone, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := httpServingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	url, ok := <-found
	if !ok {
		t.Fatalf("plexus serve --transport http did not start:\n%s", log.String())
	}
	if url != "http://127.0.0.1:3199" {
		t.Errorf("serving %s, want the README's http://127.0.0.1:3199", url)
	}
	token, err := os.ReadFile(filepath.Join(home, ".local", "share", "plexus", "http-token"))
	if err != nil {
		t.Fatalf("the README's token file: %v", err)
	}
	var body []byte
	if curl, err := exec.LookPath("curl"); err == nil {
		c := exec.Command(curl, "-s", "-H", "Authorization: Bearer "+strings.TrimSpace(string(token)), "localhost:3199/v1/models")
		c.Env = env
		if body, err = c.Output(); err != nil {
			t.Fatalf("curl /v1/models: %v", err)
		}
	} else {
		req, _ := http.NewRequest("GET", url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		body = buf.Bytes()
	}
	var list struct {
		Models []struct {
			Provider  string `json:"provider"`
			ModelName string `json:"model_name"`
		} `json:"models"`
		NotConfigured []struct{ Provider string } `json:"not_configured"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /v1/models: %v: %s", err, body)
	}
	if len(list.Models) != 1 || list.Models[0].ModelName != "examples/replay/tour.jsonl" ||
		len(list.NotConfigured) != 1 || list.NotConfigured[0].Provider != "openai" {
		t.Errorf("GET /v1/models: %s", body)
	}
	t.Logf("curl /v1/models: %s", bytes.TrimSpace(body))
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// readmeLine returns the README line containing s.
func readmeLine(t *testing.T, path, s string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("the README has no line with %q", s)
	return ""
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// loopbackUp brings up lo, which a new network namespace has down.
func loopbackUp(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("bring lo up: %v", err)
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback == 0 {
			t.Fatalf("the namespace has interface %s besides loopback", i.Name)
		}
	}
}

// noRoutes returns the namespace's counters of packets that found no
// route: IPv4's and IPv6's OutNoRoutes.
func noRoutes(t *testing.T) [2]int64 {
	t.Helper()
	var out [2]int64
	snmp, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(snmp), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "Ip: ") || !strings.HasPrefix(lines[i+1], "Ip: ") {
			continue
		}
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for k, n := range names {
			if n == "OutNoRoutes" && k < len(values) {
				out[0], _ = strconv.ParseInt(values[k], 10, 64)
			}
		}
		break
	}
	if snmp6, err := os.ReadFile("/proc/net/snmp6"); err == nil { // absent without IPv6
		for _, l := range strings.Split(string(snmp6), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "Ip6OutNoRoutes" {
				out[1], _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return out
}

// dnsWatch counts the DNS queries that reach the loopback nameservers of
// resolv.conf (a stub resolver such as 127.0.0.53), which the no-route
// counters cannot see.
type dnsWatch struct {
	loopback bool
	queries  atomic.Int64
}

func watchLoopbackDNS(t *testing.T) *dnsWatch {
	t.Helper()
	w := &dnsWatch{}
	data, _ := os.ReadFile("/etc/resolv.conf")
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		ip := net.ParseIP(f[1])
		if ip == nil || !ip.IsLoopback() {
			continue
		}
		w.loopback = true
		addr := net.JoinHostPort(ip.String(), "53")
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("listen on the loopback nameserver %s: %v", addr, err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 512)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				w.queries.Add(1)
			}
		}()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on the loopback nameserver %s: %v", addr, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				w.queries.Add(1)
				c.Close()
			}
		}()
	}
	return w
}
