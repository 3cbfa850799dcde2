#!/usr/bin/env bash
# The tests, from a fresh machine: installs what they need, checks
# formatting and vet, then runs `go test -race` with the tests that need an
# installed tool made mandatory (they fail instead of skipping).
#
#   scripts/test.sh                      everything: install, gofmt, vet, go test -race ./...
#   scripts/test.sh ./engine/...         the same for some packages only
#   scripts/test.sh -run TestX ./cmd/plexus   go test flags pass through
#   scripts/test.sh --install-only       only install what the tests need
#   scripts/test.sh --no-install         skip the installs (tests of tools not
#                                        installed then skip, saying so)
#
# For quick runs without any of this, `go test ./...` works on its own: the
# tests that need ollama, node packages or bubblewrap skip with a message
# naming what is missing.
#
# Needs Go 1.26; installs the rest: ollama v0.6.5 (built with
# `go install`, about 3 minutes the first time; gcc for its cgo),
# bubblewrap and Node.js/npm (apt-get, with sudo when not root) and the
# npm dependencies of examples/clients/* and plugins/mcp/testdata/npm.
# Safe to run again: each step is skipped when its result is there. As
# root it also makes the first-hour test mandatory, which needs a network
# namespace (cmd/plexus/offline_test.go).
#
# .ci/run calls this script with PLEXUS_CHECK_GENERATED=1 (regenerate the
# plugin contracts' Go code with buf and compare; without it the test
# compares checksums only) and -count=1.
#
# Adding an install step: give it its own commented block in the
# "Install" section below, idempotent, working as root or through sudo,
# and export the PLEXUS_REQUIRE_* variable that makes its tests mandatory.
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
only_install=0
flags=()
pkgs=()
value=0 # the next argument is the value of a go test flag
for arg in "$@"; do
  if [ "$value" = 1 ]; then flags+=("$arg"); value=0; continue; fi
  case "$arg" in
    --no-install) install=0 ;;
    --install-only) only_install=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    # go test flags that take a value, given as a separate argument
    -run|-skip|-bench|-benchtime|-count|-timeout|-p|-parallel|-cpu|-tags|-shuffle|-fuzz|-fuzztime|-list|-coverprofile|-coverpkg|-covermode|-cpuprofile|-memprofile|-blockprofile|-mutexprofile|-trace|-outputdir|-o|-exec|-vet|-ldflags|-gcflags)
      flags+=("$arg"); value=1 ;;
    -*) flags+=("$arg") ;;
    *) pkgs+=("$arg") ;;
  esac
done
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

step() { echo "== $*"; }
die() { echo "scripts/test.sh: $*" >&2; exit 1; }

# root runs commands as root: directly when we are root, else through sudo.
root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root to run: $* (install sudo, or run as root)"
  fi
}

apt_updated=0
# apt_install PKG... installs Debian packages, running apt-get update once;
# it fails (saying so) without apt-get or root.
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "apt-get not found: install $* with your system's package manager" >&2
    return 1
  fi
  if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "need root (or sudo) to install $*" >&2
    return 1
  fi
  if [ "$apt_updated" = 0 ]; then
    root apt-get update -qq >/dev/null || return 1
    apt_updated=1
  fi
  root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v go >/dev/null 2>&1 || die "go not found: install Go 1.26 (https://go.dev/dl/) and put it on PATH"
gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

if [ "$install" = 1 ]; then
  # ---------------------------------------------------------------- Install

  # A real Ollama server for the model-provider tests (see
  # internal/ollamatest): v0.6.5 builds from the Go module proxy (newer
  # versions' module zips lack vendored headers); it needs cgo and gcc.
  if ! command -v ollama >/dev/null 2>&1; then
    if ! command -v gcc >/dev/null 2>&1; then
      step "installing gcc (to build ollama)"
      apt_install gcc libc6-dev || die "ollama needs gcc (cgo): install it, then run again"
    fi
    step "installing ollama v0.6.5 into $gobin (go install, about 3 minutes)"
    CGO_ENABLED=1 go install -ldflags "-X github.com/ollama/ollama/version.Version=0.6.5" \
      github.com/ollama/ollama@v0.6.5
  fi
  echo "ollama: $(command -v ollama)"
  export PLEXUS_REQUIRE_OLLAMA=1

  # bubblewrap, so the shell tool's sandbox tests cover both sandboxes
  # (Landlock needs nothing installed). Without it those tests skip,
  # saying so; a failed install is a warning, not an error.
  if ! command -v bwrap >/dev/null 2>&1; then
    step "installing bubblewrap"
    apt_install bubblewrap || echo "warning: could not install bubblewrap; its sandbox tests will skip"
  fi

  # Node.js and the npm dependencies of the example clients (the npm
  # package ws drives a /fix turn over WebSocket, vscode-jsonrpc drives the
  # LSP-framed stdio front-end as VS Code does) and of the MCP tests (the
  # servers server-filesystem and server-everything). Every
  # examples/clients/* with a package-lock.json is installed; `npm ci` runs
  # again only when its package-lock.json changed.
  if ! command -v npm >/dev/null 2>&1; then
    step "installing Node.js and npm"
    apt_install nodejs npm || die "the tests need Node.js and npm (https://nodejs.org): install them, then run again"
  fi
  for dir in examples/clients/*/ plugins/mcp/testdata/npm/; do
    dir="${dir%/}"
    [ -f "$dir/package-lock.json" ] || continue
    stamp="$dir/node_modules/.plexus-package-lock.sha256"
    sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
      step "npm ci --prefix $dir"
      npm ci --prefix "$dir" --no-audit --no-fund
      echo "$sum" >"$stamp"
    fi
  done
  export PLEXUS_REQUIRE_NODE=1

  # PostgreSQL and ripgrep go here, each in its own block as above.

  # ------------------------------------------------------------ end Install
fi
[ "$only_install" = 0 ] || exit 0

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet "${pkgs[@]}"

# The first-hour test (cmd/plexus/offline_test.go) runs in a network
# namespace with only loopback; root can always create one, so there it is
# mandatory (elsewhere it needs unprivileged user namespaces, or skips).
if [ "$(id -u)" = 0 ]; then export PLEXUS_REQUIRE_NETNS=1; fi

# go test's default -timeout (10 minutes per package) is a bet on the
# machine's speed: cmd/plexus alone takes longer than that on a loaded
# 2-core machine. A test that hangs still fails, after an hour.
case " ${flags[*]} " in
  *" -timeout "*|*" -timeout="*) ;;
  *) flags+=(-timeout 60m) ;;
esac

step "go test -race ${flags[*]} ${pkgs[*]}"
go test -race "${flags[@]}" "${pkgs[@]}"
