package policy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plexus-agent/plexus/engine/workspace"
)

// Version is the version of the policy document this package reads and
// writes (the document's "version" field).
const Version = 1

// Action is what a rule or Decision says about an action.
type Action string

// Actions.
const (
	// Allow: run it without asking.
	Allow Action = "allow"
	// Ask: ask the user (through the Host) first.
	Ask Action = "ask"
	// Deny: refuse it without asking.
	Deny Action = "deny"
)

func (a Action) valid() bool { return a == Allow || a == Ask || a == Deny }

// severity orders actions: deny > ask > allow.
func (a Action) severity() int {
	switch a {
	case Deny:
		return 2
	case Ask:
		return 1
	}
	return 0
}

// Source says where a rule came from.
type Source string

// Sources.
const (
	// SourceUser: written by the user (in the policy document or a
	// settings screen).
	SourceUser Source = "user"
	// SourceRemembered: made by "remember this choice" for exactly the
	// action approved or denied.
	SourceRemembered Source = "remembered"
	// SourceSimilar: made by "apply to similar", generalised (see
	// RememberedRule).
	SourceSimilar Source = "similar"
	// SourceDefault: part of Default().
	SourceDefault Source = "default"
)

// rank orders sources for Decide: user > remembered > similar > default.
func (s Source) rank() int {
	switch s {
	case SourceUser:
		return 3
	case SourceRemembered:
		return 2
	case SourceSimilar:
		return 1
	}
	return 0
}

func (s Source) valid() bool {
	return s == SourceUser || s == SourceRemembered || s == SourceSimilar || s == SourceDefault
}

// Rule is one policy rule. The zero Source means SourceUser. A rule
// matches an action when its tool pattern matches the tool, ChangesOnly
// (if set) holds, and its paths or commands (if any) match; see the
// package doc for how.
type Rule struct {
	// Tool is a tool name or a glob of names (*, ?, [...] as in
	// path.Match); "*" matches every tool.
	Tool string `json:"tool"`
	// Paths are workspace-relative path globs (workspace.Glob syntax, and
	// a leading / anchors a pattern without other slashes at the root).
	Paths []string `json:"paths,omitempty"`
	// Commands are command globs, matched against command lines.
	Commands []string `json:"commands,omitempty"`
	// ChangesOnly limits the rule to actions that can change something:
	// patch applies, commands, and calls of tools not marked read-only.
	ChangesOnly bool   `json:"changes_only,omitempty"`
	Action      Action `json:"action"`
	// Reason says why, for people; Decision.Reason quotes it.
	Reason  string    `json:"reason,omitempty"`
	Source  Source    `json:"source"`
	Created time.Time `json:"created_at,omitzero"`
}

// clone returns a deep copy of r.
func (r Rule) clone() Rule {
	r.Paths = slices.Clone(r.Paths)
	r.Commands = slices.Clone(r.Commands)
	return r
}

// ExecutionMode says who runs commands.
type ExecutionMode string

// Execution modes, as protocols/http-websocket-sessions.md names them.
const (
	// LocalTerminal: the client runs each approved command in the user's
	// terminal and reports the result (the default).
	LocalTerminal ExecutionMode = "local_terminal"
	// ServerRunner: the engine runs commands itself, sandboxed, with time
	// and output limits.
	ServerRunner ExecutionMode = "server_runner"
)

// CommandSettings are the workspace's settings for commands. The zero
// value means LocalTerminal, no network in the sandbox, no extra
// environment.
type CommandSettings struct {
	// Mode says who runs commands; "" means LocalTerminal.
	Mode ExecutionMode `json:"mode"`
	// Sandbox configures ServerRunner; LocalTerminal ignores it.
	Sandbox Sandbox `json:"sandbox"`
	// Env names environment variables passed to commands the engine runs
	// (ServerRunner) on top of its own base allow-list. Names only: the
	// values come from the engine's environment.
	Env []string `json:"env"`
}

// Sandbox configures the ServerRunner sandbox.
type Sandbox struct {
	// Network lets sandboxed commands use the network; false (the
	// default) cuts them off from it.
	Network bool `json:"network"`
}

// Policy is one workspace's policy: rules and command settings. It is safe
// for concurrent use; do not copy a Policy after first use. The zero value
// is an empty policy: no rules, default settings, so Decide gives the
// built-in defaults.
type Policy struct {
	mu       sync.RWMutex
	commands CommandSettings
	rules    []compiledRule
}

// compiledRule is a rule with its patterns parsed.
type compiledRule struct {
	Rule
	tool  toolPattern
	paths []*pathGlob
	cmds  []*cmdGlob
	key   string // what makes two rules duplicates
}

// Limits of a policy.
const (
	maxRules     = 10000
	maxPatterns  = 256 // paths or commands per rule
	maxEnv       = 256
	maxTextBytes = 4096 // tool, reason
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns a policy with the given settings and rules, in order. A rule
// that duplicates an earlier one (see Add) is an error. Errors are
// *ValidationError values (joined), with paths such as "rules[1].paths[0]"
// and "commands.mode".
func New(commands CommandSettings, rules ...Rule) (*Policy, error) {
	var pr problems
	p := build(commands, rules, nil, &pr)
	if err := pr.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// build validates settings and rules into a policy, reporting problems to
// pr; rules[i] is skipped when skip[i] (it could not be read).
func build(commands CommandSettings, rules []Rule, skip []bool, pr *problems) *Policy {
	p := &Policy{}
	p.commands = checkCommands(commands, "commands", pr)
	if len(rules) > maxRules {
		pr.add("rules", "more than %d rules", maxRules)
		return p
	}
	seen := map[string]int{}
	for i, r := range rules {
		if i < len(skip) && skip[i] {
			continue
		}
		cr, ok := compileRule(r, index("rules", i), pr)
		if !ok {
			continue
		}
		if j, dup := seen[cr.key]; dup {
			pr.add(index("rules", i), "duplicates rules[%d] (same tool, paths, commands and changes_only); keep one", j)
			continue
		}
		seen[cr.key] = i
		p.rules = append(p.rules, cr)
	}
	return p
}

// Default returns the default policy: LocalTerminal, no network in the
// sandbox, no extra environment, and two rules of source "default":
//
//  1. deny, for every tool, changes to paths matching **/.git/** (inside
//     .git/ of the workspace or of a nested repository, .git itself
//     included): editing git's own files can corrupt the repository;
//     git commands are the way to change it.
//  2. ask, for every tool, before touching files that commonly hold
//     secrets (.env, .env.*, *.pem, *.key, id_rsa, id_ecdsa, id_ed25519,
//     .netrc), even to read them: reading sends their contents to the
//     model.
//
// Everything else falls to the built-in defaults (see Decide): read-only
// tools run, tools that need approval, patch applies and commands ask.
func Default() *Policy {
	p, err := New(CommandSettings{Mode: LocalTerminal}, defaultRules()...)
	if err != nil {
		panic("policy: invalid default rules: " + err.Error())
	}
	return p
}

func defaultRules() []Rule {
	return []Rule{
		{
			Tool: "*", Paths: []string{"**/.git/**"}, ChangesOnly: true, Action: Deny, Source: SourceDefault,
			Reason: "git's own files (.git/) are changed through git commands, never edited: a wrong edit can corrupt the repository",
		},
		{
			Tool: "*", Paths: []string{".env", ".env.*", "*.pem", "*.key", "id_rsa", "id_ecdsa", "id_ed25519", ".netrc"},
			Action: Ask, Source: SourceDefault,
			Reason: "the file may hold secrets (keys, passwords, tokens); even reading it sends them to the model",
		},
	}
}

// Rules returns a copy of the rules, in order.
func (p *Policy) Rules() []Rule {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Rule, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.Rule.clone()
	}
	return out
}

// Commands returns the command settings, with Mode filled in.
func (p *Policy) Commands() CommandSettings {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c := p.commands
	c.Env = slices.Clone(c.Env)
	if c.Mode == "" {
		c.Mode = LocalTerminal
	}
	if c.Env == nil {
		c.Env = []string{}
	}
	return c
}

// Add validates r and adds it to the policy. A rule that duplicates an
// existing one (same tool, same set of paths, same set of commands, same
// ChangesOnly; action, reason, source and time aside) replaces it in
// place: the newer choice wins. Errors are *ValidationError values with
// paths starting "rule".
func (p *Policy) Add(r Rule) error {
	var pr problems
	cr, ok := compileRule(r, "rule", &pr)
	if !ok {
		return pr.err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rules) >= maxRules && !slices.ContainsFunc(p.rules, func(o compiledRule) bool { return o.key == cr.key }) {
		pr.add("rule", "the policy already has %d rules", maxRules)
		return pr.err()
	}
	p.rules = addRule(p.rules, cr)
	return nil
}

// addRule returns rules with cr added or replacing its duplicate. It never
// changes the array rules points to (Decide may be reading it).
func addRule(rules []compiledRule, cr compiledRule) []compiledRule {
	out := slices.Clone(rules)
	for i := range out {
		if out[i].key == cr.key {
			out[i] = cr
			return out
		}
	}
	return append(out, cr)
}

// checkCommands validates command settings.
func checkCommands(c CommandSettings, at string, pr *problems) CommandSettings {
	switch c.Mode {
	case "":
		c.Mode = LocalTerminal
	case LocalTerminal, ServerRunner:
	default:
		pr.add(field(at, "mode"), "must be %q or %q, not %q", LocalTerminal, ServerRunner, c.Mode)
	}
	if len(c.Env) > maxEnv {
		pr.add(field(at, "env"), "more than %d names", maxEnv)
		c.Env = nil
	}
	seen := map[string]int{}
	for i, name := range c.Env {
		at := index(field(at, "env"), i)
		if !envName.MatchString(name) {
			pr.add(at, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", truncate(name, 64))
			continue
		}
		if j, ok := seen[name]; ok {
			pr.add(at, "%q repeats env[%d]", name, j)
			continue
		}
		seen[name] = i
	}
	c.Env = slices.Clone(c.Env)
	if c.Env == nil {
		c.Env = []string{}
	}
	return c
}

// compileRule validates r and parses its patterns; problems go to pr under
// the path at.
func compileRule(r Rule, at string, pr *problems) (compiledRule, bool) {
	before := len(pr.errs) + pr.more
	r = r.clone()
	if r.Source == "" {
		r.Source = SourceUser
	}
	cr := compiledRule{Rule: r}
	switch {
	case r.Tool == "":
		pr.add(field(at, "tool"), "is required: a tool name, a glob of names, or \"*\" for every tool")
	case len(r.Tool) > maxTextBytes:
		pr.add(field(at, "tool"), "longer than %d bytes", maxTextBytes)
	default:
		tp, err := compileToolPattern(r.Tool)
		if err != nil {
			pr.add(field(at, "tool"), "%v", err)
		}
		cr.tool = tp
	}
	if !r.Action.valid() {
		if r.Action == "" {
			pr.add(field(at, "action"), "is required: %q, %q or %q", Allow, Ask, Deny)
		} else {
			pr.add(field(at, "action"), "must be %q, %q or %q, not %q", Allow, Ask, Deny, truncate(string(r.Action), 64))
		}
	}
	if !r.Source.valid() {
		pr.add(field(at, "source"), "must be %q, %q, %q or %q, not %q", SourceUser, SourceRemembered, SourceSimilar, SourceDefault, truncate(string(r.Source), 64))
	}
	if len(r.Reason) > maxTextBytes {
		pr.add(field(at, "reason"), "longer than %d bytes", maxTextBytes)
	}
	if len(r.Paths) > 0 && len(r.Commands) > 0 {
		pr.add(at, "has both paths and commands; a rule matches one or the other, so split it into two rules")
	}
	var pathKeys, cmdKeys []string
	if len(r.Paths) > maxPatterns {
		pr.add(field(at, "paths"), "more than %d patterns", maxPatterns)
	} else {
		seen := map[string]int{}
		for i, s := range r.Paths {
			g, err := compilePathGlob(s)
			if err != nil {
				pr.add(index(field(at, "paths"), i), "%v", err)
				continue
			}
			if j, ok := seen[g.canon]; ok {
				pr.add(index(field(at, "paths"), i), "%q repeats paths[%d]", truncate(s, 64), j)
				continue
			}
			seen[g.canon] = i
			cr.paths = append(cr.paths, g)
			pathKeys = append(pathKeys, g.canon)
		}
	}
	if len(r.Commands) > maxPatterns {
		pr.add(field(at, "commands"), "more than %d patterns", maxPatterns)
	} else {
		seen := map[string]int{}
		for i, s := range r.Commands {
			g, err := compileCommandGlob(s)
			if err != nil {
				pr.add(index(field(at, "commands"), i), "%v", err)
				continue
			}
			if j, ok := seen[g.canon]; ok {
				pr.add(index(field(at, "commands"), i), "%q repeats commands[%d]", truncate(s, 64), j)
				continue
			}
			seen[g.canon] = i
			cr.cmds = append(cr.cmds, g)
			cmdKeys = append(cmdKeys, g.canon)
		}
	}
	if len(pr.errs)+pr.more != before {
		return compiledRule{}, false
	}
	slices.Sort(pathKeys)
	slices.Sort(cmdKeys)
	cr.key = fmt.Sprintf("%q %q %q %v", r.Tool, pathKeys, cmdKeys, r.ChangesOnly)
	return cr, true
}

// toolPattern matches tool names.
type toolPattern struct {
	src   string
	exact bool // no wildcards
	any   bool // "*"
}

// compileToolPattern checks a tool name or glob.
func compileToolPattern(s string) (toolPattern, error) {
	if _, err := path.Match(s, ""); err != nil {
		return toolPattern{}, fmt.Errorf("%w: %q has unbalanced brackets or a trailing backslash", workspace.ErrBadGlob, truncate(s, 64))
	}
	exact, _ := globLiteral(s)
	return toolPattern{src: s, exact: exact, any: s == "*"}, nil
}

func (t toolPattern) match(name string) bool {
	if t.any {
		return true
	}
	ok, _ := path.Match(t.src, name)
	return ok
}

// rank orders tool patterns by how specific they are: an exact name (2),
// a glob (1), "*" (0).
func (t toolPattern) rank() int {
	switch {
	case t.exact:
		return 2
	case t.any:
		return 0
	}
	return 1
}

// pathGlob is a compiled path glob.
type pathGlob struct {
	g *workspace.Glob
	// rootOnly: a leading / on a pattern without other slashes, which
	// then matches names at the workspace root only.
	rootOnly bool
	exact    bool
	literal  int
	canon    string
}

// compilePathGlob compiles a path glob.
func compilePathGlob(s string) (*pathGlob, error) {
	if len(s) > maxGlobBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", workspace.ErrBadGlob, maxGlobBytes)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("%w: it contains a NUL byte", workspace.ErrBadGlob)
	}
	g, err := workspace.ParseGlob(s)
	if err != nil {
		return nil, err
	}
	trimmed := strings.TrimPrefix(strings.TrimPrefix(s, "./"), "/")
	pg := &pathGlob{g: g, rootOnly: strings.HasPrefix(s, "/") && !strings.Contains(trimmed, "/")}
	pg.exact, pg.literal = globLiteral(trimmed)
	pg.canon = trimmed
	if pg.rootOnly {
		pg.canon = "/" + trimmed
	}
	return pg, nil
}

func (g *pathGlob) match(rel string) bool {
	return g.g.Match(rel) && (!g.rootOnly || !strings.Contains(rel, "/"))
}

// globLiteral reports whether a path.Match-style glob has no wildcards,
// and counts its literal characters.
func globLiteral(s string) (exact bool, literal int) {
	exact = true
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			literal++
		case '*', '?':
			exact = false
		case '[':
			exact = false
			for i < len(s) && s[i] != ']' {
				i++
			}
		default:
			literal++
		}
	}
	return exact, literal
}

// escapeGlob quotes the glob characters of a literal name.
func escapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
