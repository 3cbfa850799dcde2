// Package plugins is Plexus's plugin SDK and plugin host, on
// github.com/hashicorp/go-plugin over gRPC.
//
// Plugin authors write each tool as a Tool[In, Out]: Describe and Invoke on
// plain Go types, the input schema inferred from In and arguments
// validated against it (github.com/google/jsonschema-go), a panic failing
// only its call; main calls Serve(NewTool(t), ...). A plugin may instead
// implement engine.Toolset itself and call ServeTool. A model plugin
// implements engine.Model (optionally with Configurer) and calls
// ServeModel. Package plugintest runs either over real gRPC inside a test
// and checks a built binary against the plugin contract. The binary is
// named plexus-tool-NAME or plexus-model-NAME and installed into a plugin
// directory with Install (`plexus plugins install`).
//
// A plugin in a module of its own requires github.com/plexus-agent/plexus:
// a published version once there is one (go get
// github.com/plexus-agent/plexus/plugins@VERSION), until then a local
// checkout through a replace directive (go mod edit -replace
// github.com/plexus-agent/plexus=DIR) or a Go workspace (go work init .
// DIR); Install builds a directory with go build, so all three work for
// `plexus plugins install ./DIR`. Install of MODULE@VERSION runs go
// install, which refuses a module whose go.mod has replace directives;
// Install then explains that and names them (sdkdep_test.go tests each).
// Install refuses the name of a built-in plugin (ErrShadowed): the host
// always uses the built-in.
//
// The host side (Manager) discovers built-in and third-party plugins,
// launches each as a separate process on first use, turns the gRPC services
// of proto/plexus/v1 back into engine interfaces, supervises the processes
// (a plugin that dies during a call turns that call into an error wrapping
// engine.ErrPluginCrashed, is restarted with exponential backoff, and the
// next call goes to the new process) and stops them all on Close, leaving no
// process behind.
//
// Installation and verification:
//   - Installs and removals in a directory hold an flock on its
//     .plexus-plugins.lock.lk and reread the lock file under it.
//   - Each plugin directory has a lock file, plexus-plugins.lock (JSON,
//     {"version": 1, "plugins": [...]}, entries sorted by kind and name,
//     written atomically: temporary file, fsync, rename, mode 0644). An
//     entry holds kind, name, file (plexus-KIND-NAME), version (the Go
//     build information's main module version, "(devel)" for a local
//     build), revision (VCS revision, "+dirty" when modified), the
//     protocol_versions the handshake negotiated at install, sha256 (hex),
//     source (the file, directory or package@version) and installed_at.
//   - Install copies an executable, or builds a directory or Go package
//     (go build; go install with GOBIN set for pkg@version), launches it
//     once through the real handshake as the host would (kind check: a
//     plugin registers only its own kind's gRPC service, so the other
//     kind answers Unimplemented), renames it into place (0755) and
//     writes its lock entry, replacing an earlier one. A failed handshake
//     names its likely cause (another program's magic cookie, output on
//     stdout, another architecture or protocol version, a start-up
//     failure) and shows the last lines the plugin wrote on stderr.
//   - The host launches a third-party plugin only if its directory's lock
//     file lists it (else ErrNotLocked, with the install command to run).
//     It opens the binary, checks that open file against the entry's
//     SHA-256 and executes the same open file (on Linux through
//     /proc/self/fd; a #! script by its path, which its interpreter opens
//     again), so a file renamed over the path after the check is not what
//     runs. A mismatch is a *ChecksumError (ErrChecksumMismatch) naming the
//     file, the lock file and both sums; an unreadable binary wraps
//     ErrChecksumUnverified. A refused start counts as a failed start:
//     retried only after the usual backoff. Verify checks every entry and
//     reports binaries not in the lock file.
//   - A binary is hashed once per file identity (FileIdentity: device,
//     inode, size, modification and status-change times in nanoseconds,
//     from fstat of the open file). After a hash that matched, the
//     identity is recorded with the sum, in memory and in
//     Options.VerifiedCache (plexus uses DATA_DIR/plugins-verified.json,
//     mode 0600); a later launch whose binary still has that identity and
//     whose entry still has that sum skips the hash (a stat instead of
//     reading the file: 20 MB took 20-45 ms). Why this keeps the lock
//     file's guarantee: any write to the file sets its ctime to the
//     current time, a replaced file is another inode, and nothing but the
//     kernel sets a ctime (utimes can put the mtime back, not the ctime);
//     undoing that needs the system clock or the raw device, that is,
//     root, which owns the host anyway. A hash started within 2 s of the
//     file's last change is not recorded (a write in the same timestamp
//     tick would leave the ctime as it was: git's "racily clean" problem;
//     2 s covers the coarsest file-system timestamps), and an identity
//     that changes while the file is hashed fails the launch. The cache
//     file is ignored if it is not owned by the user or is writable by
//     others; whoever can write it runs as that user already, and a
//     record can only vouch for the exact identity that was hashed, never
//     make a changed file pass.
//   - Built-in plugins are not checksummed: they are the plexus binary the
//     user ran, re-executed (recording its own sum would be circular, and
//     anyone who can change it controls the host anyway).
//
// Process isolation:
//   - A plugin's environment is an allow-list (go-plugin SkipHostEnv):
//     DefaultEnv (PATH, HOME, USER, LOGNAME, TZ, TMPDIR, LANG, LANGUAGE,
//     LC_*, XDG_*, the proxy variables, SSL_CERT_FILE/DIR), plus
//     Options.Env for all plugins and Options.PluginEnv for one (plexus
//     gives the ollama plugin OLLAMA_*, openai OPENAI_BASE_URL and
//     OPENAI_API_KEY, replay PLEXUS_REPLAY_DIR, and shell everything,
//     because it filters each command's environment itself by its own
//     allow-list and the policy's env names), plus go-plugin's handshake
//     variables.
//   - Containment (package contain): a third-party plugin is the first
//     process of a PID namespace of its own (inside a user namespace that
//     maps only the user's ids when plexus is unprivileged), with the
//     parent-death signal SIGKILL, so every process it starts, daemons and
//     setsid included, ends when it exits, when Close stops it, and when
//     plexus is killed, even with SIGKILL. Where no namespace can be made,
//     and for built-in plugins (the shell tool contains its own commands),
//     a plugin leads a session of its own and Close kills what is left in
//     it. The mode in use is logged at debug level and shown by `plexus
//     plugins`.
//   - A plugin's stdin is /dev/null (it never sees a stdio front-end's
//     requests); its stdout carries only the handshake.
//   - Plugin sockets, and the host's side of the broker, are created in a
//     directory private to the Manager (mode 0700, under
//     $XDG_RUNTIME_DIR, else the temporary directory; removed by Close).
//
// Debugging: a plugin binary run with --debug (a built-in: `plexus plugin
// serve KIND NAME --debug`) serves in go-plugin's reattach (test) mode and
// prints one line on stdout,
//
//	PLEXUS_REATTACH_PLUGINS='{"tool/NAME":{"protocol":"grpc","protocol_version":1,"pid":123,"addr":{"network":"unix","address":"/tmp/plugin123"}}}'
//
// then serves until SIGINT or SIGTERM, host after host. With that variable
// set, the host attaches to the process (ClientConfig.Reattach) instead of
// launching the plugin, without a checksum check (it logs a warning), and
// never stops it: Close only drops the connection. When the debugged
// process exits the host does not relaunch it; calls fail with
// ErrDebugPluginGone, saying to start it again under the debugger.
// Malformed JSON in the variable is an error at startup (ParseReattach).
//
// Deadlines: a call of a tool plugin's tools has Options.Timeouts' entry
// for that plugin as its engine.ToolSpec.Timeout (plexus:
// --plugin-timeout NAME=DURATION), else the engine's Options.ToolTimeout
// (plexus: --tool-timeout); it reaches the plugin as the call context's
// deadline.
//
// Wire details:
//   - Handshake: magic cookie PLEXUS_PLUGIN, protocol versions negotiated
//     through go-plugin's VersionedPlugins (version 1 today); gRPC only.
//   - Each process serves one kind, "tool" (plexus.v1.ToolService) or
//     "model" (plexus.v1.ModelService), and registers only that service.
//   - Tool calls go over ToolService.Calls streams (calls.go): one call at
//     a time per long-lived stream, a pool of idle streams per plugin
//     process, the deadline as timeout_ms, cancellation by cancelling the
//     stream; a plugin that does not serve Calls gets Invoke, a stream per
//     call.
//   - Host callbacks (plexus.v1.HostService) are served by the host on one
//     go-plugin GRPCBroker stream per plugin process; its id travels in
//     every InvokeRequest and call_id ties a callback to its call.
//   - Plugins log to stderr (Logger returns a slog.Logger that writes the
//     JSON go-plugin parses); the host re-logs each line under the plugin's
//     name. A plugin's stdout is discarded, never mixed into the engine's.
package plugins
