package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// Kind says what sort of action a Request is.
type Kind string

// Kinds of action.
const (
	// KindToolCall: a tool call that is neither of the others.
	KindToolCall Kind = "tool_call"
	// KindPatchApply: applying a proposed patch to workspace files.
	KindPatchApply Kind = "patch_apply"
	// KindCommand: running a command line, whether the engine runs it
	// (run_command, ServerRunner) or the client does (LocalTerminal).
	KindCommand Kind = "command"
)

// Request describes one action for Decide, Assess and RememberedRule.
type Request struct {
	// Kind is the sort of action. "" means KindCommand when Command is
	// set and KindToolCall otherwise; another unknown value is denied.
	Kind Kind
	// Tool is the spec of the tool whose call led to the action (for a
	// patch, the tool that proposed it). Rules match Tool.Name; an action
	// no tool started leaves Tool zero, and rules then see the name
	// string(Kind) ("patch_apply", "command"). Rules for "patch_apply"
	// also match a patch that names its tool.
	Tool engine.ToolSpec
	// Paths are the workspace-relative, slash-separated paths the action
	// reads or changes (for a command, its working directory if not the
	// root). "" means the root. A path that is absolute or climbs out of
	// the workspace with .. is denied.
	// With a command line, the paths are secondary: rules with paths judge
	// them (a deny there denies the command), but a path that no such
	// rule matches adds nothing, and the command's parts decide.
	Paths []string
	// Deletes are workspace-relative paths the action deletes; rules see
	// them like Paths.
	Deletes []string
	// Command is the command line the action runs, if any.
	Command string
}

// Decision is Decide's answer.
type Decision struct {
	Action Action `json:"action"`
	// Reason says, for people, which rule decided and why (or which
	// built-in default did).
	Reason string `json:"reason"`
	// Rule is a copy of the rule whose action was taken; nil when a
	// built-in default decided or the request was invalid.
	Rule *Rule `json:"rule,omitempty"`
	// RuleIndex is Rule's index in the policy's rules, -1 when Rule is
	// nil.
	RuleIndex int `json:"rule_index"`
	// Subject is the path or the part of the command line the decision
	// turned on; "" when it concerns the action as a whole.
	Subject string `json:"subject,omitempty"`
	// Risk is Assess(req).
	Risk engine.Risk `json:"risk"`
}

// request is a Request checked and prepared.
type request struct {
	kind    Kind
	tool    string // the name rules match
	spec    engine.ToolSpec
	paths   []string // cleaned Paths then Deletes, without repeats
	deleted map[string]bool
	line    *cmdLine // nil without a command
	// changes: the action may change something.
	changes bool
}

// prepare checks and prepares req.
func prepare(req Request) (*request, error) {
	r := &request{kind: req.Kind, spec: req.Tool, tool: req.Tool.Name, deleted: map[string]bool{}}
	if r.kind == "" {
		r.kind = KindToolCall
		if req.Command != "" {
			r.kind = KindCommand
		}
	}
	switch r.kind {
	case KindToolCall, KindPatchApply, KindCommand:
	default:
		return nil, fmt.Errorf("unknown kind of action %q (want %q, %q or %q)", truncate(string(r.kind), 64), KindToolCall, KindPatchApply, KindCommand)
	}
	if r.tool == "" {
		r.tool = string(r.kind)
	}
	seen := map[string]bool{}
	for i, list := range [][]string{req.Paths, req.Deletes} {
		for _, p := range list {
			c, err := cleanPath(p)
			if err != nil {
				return nil, err
			}
			if i == 1 {
				r.deleted[c] = true
			}
			if !seen[c] {
				seen[c] = true
				r.paths = append(r.paths, c)
			}
		}
	}
	if req.Command != "" {
		if strings.IndexByte(req.Command, 0) >= 0 {
			return nil, fmt.Errorf("the command line contains a NUL byte, which no shell can be given")
		}
		r.line = parseLine(req.Command)
	}
	r.changes = r.kind != KindToolCall || !req.Tool.ReadOnly || len(req.Deletes) > 0
	return r, nil
}

// cleanPath cleans a workspace-relative path, refusing ones that leave the
// workspace.
func cleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", truncate(p, 80))
	}
	if p == "" {
		return ".", nil
	}
	if path.IsAbs(p) {
		return "", fmt.Errorf("path %q is absolute; the policy judges workspace-relative paths only", truncate(p, 80))
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q is outside the workspace", truncate(p, 80))
	}
	return c, nil
}

// subjectKind says what a subject is.
type subjectKind uint8

const (
	subjCall    subjectKind = iota // the action as a whole (no paths, no command)
	subjPath                       // one path
	subjCommand                    // one part of the command line
)

// subject is one thing a request is judged on.
type subject struct {
	kind subjectKind
	path string
	part int
	// secondary: a path of a request with a command line (its working
	// directory). Only rules with paths judge it, and when none matches
	// it adds nothing: the command's parts decide.
	secondary bool
}

// subjects lists what r is judged on: each path and each part of its
// command line, or the action as a whole when it has neither.
func (r *request) subjects() []subject {
	var out []subject
	secondary := r.line != nil && len(r.line.parts) > 0
	for _, p := range r.paths {
		out = append(out, subject{kind: subjPath, path: p, secondary: secondary})
	}
	if r.line != nil {
		for i := range r.line.parts {
			out = append(out, subject{kind: subjCommand, part: i})
		}
	}
	if len(out) == 0 {
		out = append(out, subject{kind: subjCall})
	}
	return out
}

// text names a subject for Decision.Subject.
func (r *request) text(s subject) string {
	switch s.kind {
	case subjPath:
		return s.path
	case subjCommand:
		return displayTokens(r.line.parts[s.part].toks, 120)
	}
	return ""
}

// describe names a subject in a sentence.
func (r *request) describe(s subject) string {
	switch s.kind {
	case subjPath:
		verb := "on"
		if r.deleted[s.path] {
			verb = "deleting"
		}
		if r.kind == KindPatchApply && r.spec.Name == "" {
			return fmt.Sprintf("the patch %s %s", verb, s.path)
		}
		return fmt.Sprintf("%s %s %s", r.tool, verb, s.path)
	case subjCommand:
		return "`" + displayTokens(r.line.parts[s.part].toks, 80) + "`"
	}
	switch {
	case r.kind == KindPatchApply && r.spec.Name == "":
		return "the patch"
	case r.kind == KindCommand && r.spec.Name == "":
		return "the command"
	}
	return r.tool
}

// hit is how one rule matches one subject.
type hit struct {
	rule int
	// subj: the glob that matched has no wildcards (2), has some (1),
	// the rule has no paths or commands (0).
	subj    int
	literal int
	exact   bool
}

// matcher matches the rules of a policy against one request.
type matcher struct {
	rules   []compiledRule
	req     *request
	applies []bool            // the rule's tool and ChangesOnly fit the request
	whole   map[*cmdGlob]bool // whole-line globs, matched once
}

func newMatcher(rules []compiledRule, req *request) *matcher {
	m := &matcher{rules: rules, req: req, applies: make([]bool, len(rules)), whole: map[*cmdGlob]bool{}}
	for i := range rules {
		r := &rules[i]
		// A patch is judged under the name of the tool that proposed it
		// and under "patch_apply" alike.
		toolFits := r.tool.match(req.tool) || req.kind == KindPatchApply && r.tool.match(string(KindPatchApply))
		m.applies[i] = toolFits && (!r.ChangesOnly || req.changes)
	}
	return m
}

// match reports whether rule i matches subject s, and how.
func (m *matcher) match(i int, s subject) (hit, bool) {
	if !m.applies[i] {
		return hit{}, false
	}
	r := &m.rules[i]
	h := hit{rule: i}
	better := func(exact bool, literal int) {
		rank := 1
		if exact {
			rank = 2
		}
		if rank > h.subj || rank == h.subj && literal > h.literal {
			h.subj, h.literal, h.exact = rank, literal, exact
		}
	}
	switch {
	case len(r.paths) > 0:
		if s.kind != subjPath {
			return hit{}, false
		}
		for _, g := range r.paths {
			if g.match(s.path) {
				better(g.exact, g.literal)
			}
		}
	case len(r.cmds) > 0:
		if s.kind != subjCommand {
			return hit{}, false
		}
		for _, g := range r.cmds {
			if m.matchCommand(g, s.part) {
				better(g.exact, g.literal)
			}
		}
	default:
		return h, true
	}
	return h, h.subj > 0
}

// matchCommand matches a command glob against one part of the request's
// command line, or (a glob with operators) against the whole line, which
// then covers every part.
func (m *matcher) matchCommand(g *cmdGlob, part int) bool {
	if m.req.line.err != nil {
		// The raw words of a line the parser rejects: only a glob
		// without operators can be looked for in them.
		return !g.whole && g.search(m.req.line.elems[part])
	}
	if !g.whole {
		return g.match(m.req.line.elems[part])
	}
	ok, done := m.whole[g]
	if !done {
		ok = g.match(m.req.line.whole)
		m.whole[g] = ok
	}
	return ok
}

// outranks reports whether hit a decides over hit b among allow and ask
// rules: rules not from Default over default ones, then the more specific
// match (an exact glob, a glob, no patterns; more literal characters; an
// exact tool name, a tool glob, "*"), then the more authoritative source
// (user, remembered, similar), then the newer rule, then ask over allow,
// then the earlier rule.
func (m *matcher) outranks(a, b hit) bool {
	ra, rb := &m.rules[a.rule], &m.rules[b.rule]
	da, db := ra.Source != SourceDefault, rb.Source != SourceDefault
	switch {
	case da != db:
		return da
	case a.subj != b.subj:
		return a.subj > b.subj
	case a.literal != b.literal:
		return a.literal > b.literal
	case ra.tool.rank() != rb.tool.rank():
		return ra.tool.rank() > rb.tool.rank()
	case ra.Source.rank() != rb.Source.rank():
		return ra.Source.rank() > rb.Source.rank()
	case !ra.Created.Equal(rb.Created):
		return ra.Created.After(rb.Created)
	case ra.Action != rb.Action:
		return ra.Action == Ask
	}
	return a.rule < b.rule
}

// verdict is the decision on one subject.
type verdict struct {
	action Action
	rule   int // -1: a built-in default
	exact  bool
	reason string
}

// judge decides one subject: a matching deny rule wins; then the allow or
// ask rule that outranks the others; then the built-in default. It
// reports false for a secondary subject no path rule matches.
func (m *matcher) judge(s subject) (verdict, bool) {
	var deny, best *hit
	for i := range m.rules {
		if s.secondary && len(m.rules[i].paths) == 0 {
			continue
		}
		h, ok := m.match(i, s)
		if !ok {
			continue
		}
		if m.rules[i].Action == Deny {
			if deny == nil || m.outranks(h, *deny) {
				deny = &h
			}
			continue
		}
		if best == nil || m.outranks(h, *best) {
			best = &h
		}
	}
	switch {
	case deny != nil:
		return verdict{action: Deny, rule: deny.rule, exact: deny.exact, reason: "denied by " + m.summary(deny.rule)}, true
	case best != nil:
		a := m.rules[best.rule].Action
		word := "allowed by "
		if a == Ask {
			word = "needs approval by "
		}
		return verdict{action: a, rule: best.rule, exact: best.exact, reason: word + m.summary(best.rule)}, true
	case s.secondary:
		return verdict{}, false
	}
	return m.fallback(), true
}

// fallback is the built-in default for actions no rule matches.
func (m *matcher) fallback() verdict {
	r := m.req
	switch {
	case r.kind == KindPatchApply:
		return verdict{action: Ask, rule: -1, reason: "applying a patch needs approval unless a rule allows it"}
	case r.kind == KindCommand:
		return verdict{action: Ask, rule: -1, reason: "running a command needs approval unless a rule allows it"}
	case r.spec.NeedsApproval:
		return verdict{action: Ask, rule: -1, reason: r.tool + " needs approval (its spec says so) unless a rule allows it"}
	case len(r.deleted) > 0:
		return verdict{action: Ask, rule: -1, reason: r.tool + " deletes files, which needs approval unless a rule allows it"}
	case r.spec.ReadOnly:
		return verdict{action: Allow, rule: -1, reason: r.tool + " only reads, so it runs without asking"}
	}
	return verdict{action: Allow, rule: -1, reason: r.tool + " does not need approval (its spec says so)"}
}

// summary describes rule i for a Reason.
func (m *matcher) summary(i int) string {
	return ruleSummary(i, &m.rules[i].Rule)
}

// ruleSummary describes a rule in words: "rules[0], a default rule for
// every tool on paths **/.git/**: why".
func ruleSummary(i int, r *Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rules[%d], a %s rule for ", i, r.Source)
	if r.Tool == "*" {
		b.WriteString("every tool")
	} else {
		fmt.Fprintf(&b, "tool %q", r.Tool)
	}
	quoteList := func(list []string) string {
		q := make([]string, 0, len(list))
		for j, s := range list {
			if j == 3 {
				q = append(q, fmt.Sprintf("and %d more", len(list)-3))
				break
			}
			q = append(q, fmt.Sprintf("%q", truncate(s, 60)))
		}
		return strings.Join(q, ", ")
	}
	switch {
	case len(r.Paths) > 0:
		b.WriteString(" on paths " + quoteList(r.Paths))
	case len(r.Commands) > 0:
		b.WriteString(" on commands " + quoteList(r.Commands))
	}
	if r.ChangesOnly {
		b.WriteString(" when it changes something")
	}
	if r.Reason != "" {
		b.WriteString(": " + r.Reason)
	}
	return b.String()
}

// maxMatchElems bounds the length of a command line Decide matches
// against command globs (here-document bodies count as one), which keeps
// the time of one match below len(glob) × maxMatchElems steps.
const maxMatchElems = 64 << 10

// Decide decides whether the action req describes may run. It is safe for
// concurrent use, including with Add and Remember.
//
// Each path of the request and each part of its command line (see the
// package doc) is judged on its own (the paths of a request with a command
// line only by rules with paths, see Request.Paths):
//
//  1. A deny rule that matches it denies it, whatever its source.
//  2. Otherwise the matching allow or ask rule that outranks the others
//     decides: any rule not from Default over default ones; then the
//     more specific match (a glob without wildcards, a glob, a rule without
//     paths or commands; then more literal characters in the glob; then
//     an exact tool name, a tool glob, "*"); then the source (user,
//     remembered, similar); then the newer rule; then ask over allow.
//  3. With no matching rule, the built-in default: patch applies and
//     commands ask; tools whose spec needs approval ask; a tool call
//     that deletes files asks; read-only tools and tools that need no
//     approval run.
//
// The request is denied if any path or part is denied, asks if any asks,
// and is allowed only if every one is allowed. Finally, an allowed action
// whose risk (Assess) is critical asks instead unless every path and part
// was allowed by a glob without wildcards: a broad rule never waves
// through `rm -rf ~`. A request with an unknown Kind, a path outside the
// workspace or a NUL byte in its command line is denied; a command line
// longer than 64Ki characters (not counting here-document bodies) is
// asked about without matching rules. A command line that the shell parser
// (mvdan.cc/sh/v3/syntax, bash) rejects is asked about, with a reason
// that quotes the parser's error, unless a rule denies it (globs without
// operators are looked for in its raw words; see the package doc).
func (p *Policy) Decide(req Request) Decision {
	r, err := prepare(req)
	d := Decision{RuleIndex: -1, Risk: assess(r, err)}
	if err != nil {
		d.Action = Deny
		d.Reason = "denied: " + err.Error()
		return d
	}
	if r.line != nil && len(r.line.whole) > maxMatchElems {
		d.Action = Ask
		d.Reason = fmt.Sprintf("the command line is too long to match against the rules (more than %d characters outside here-documents), so it needs approval", maxMatchElems)
		return d
	}
	p.mu.RLock()
	rules := p.rules
	p.mu.RUnlock() // addRule never changes the array rules points to

	m := newMatcher(rules, r)
	var subjects []subject
	var verdicts []verdict
	decisive := 0
	for _, s := range r.subjects() {
		v, ok := m.judge(s)
		if !ok {
			continue
		}
		subjects, verdicts = append(subjects, s), append(verdicts, v)
		if v.action.severity() > verdicts[decisive].action.severity() {
			decisive = len(verdicts) - 1
		}
	}
	v := verdicts[decisive]
	d.Action = v.action
	d.Subject = r.text(subjects[decisive])
	d.Reason = r.describe(subjects[decisive]) + ": " + v.reason
	if v.action == Allow && len(subjects) > 1 {
		what := "paths and parts of the command"
		switch {
		case r.line == nil:
			what = "paths"
		case len(r.paths) == 0:
			what = "parts of the command"
		}
		d.Reason = fmt.Sprintf("all %d %s are allowed; %s", len(subjects), what, d.Reason)
		d.Subject = ""
	}
	if v.rule >= 0 {
		rule := rules[v.rule].Rule.clone()
		d.Rule, d.RuleIndex = &rule, v.rule
	}
	if r.line != nil && r.line.err != nil {
		unparsed(&d, r.line.err)
		return d
	}
	if d.Action == Allow && d.Risk.Level == engine.RiskCritical {
		for _, v := range verdicts {
			if !v.exact {
				d.Action = Ask
				d.Reason = fmt.Sprintf("%s; but its risk is critical (%s) and no rule names it exactly, so it needs approval", d.Reason, firstReason(d.Risk))
				d.Rule, d.RuleIndex = nil, -1
				break
			}
		}
	}
	return d
}

// unparsed turns the decision on a command line the shell parser rejects
// into Ask, unless a rule denies it.
func unparsed(d *Decision, err error) {
	why := fmt.Sprintf("the shell parser rejects the command line (%s)", describeSyntaxError(err))
	if d.Action == Deny {
		if d.Rule != nil && len(d.Rule.Commands) > 0 {
			d.Reason += "; " + why + ", so the rule was matched against its raw words"
		}
		return
	}
	d.Action = Ask
	d.Reason = why + ", so no rule can allow it and it needs approval"
	d.Rule, d.RuleIndex, d.Subject = nil, -1, ""
}

func firstReason(r engine.Risk) string {
	if len(r.Reasons) == 0 {
		return string(r.Level)
	}
	return r.Reasons[0]
}
