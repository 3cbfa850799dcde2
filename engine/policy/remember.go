package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/plexus-agent/plexus/engine"
)

// runners are subcommands that name a script or task to run: "apply to
// similar" keeps the name, so `npm run build` becomes `npm run build*`
// rather than `npm run *`.
var runners = map[string]map[string]bool{
	"npm": set("run", "run-script"), "pnpm": set("run"), "yarn": set("run"), "bun": set("run"),
	"deno": set("task"), "poetry": set("run"), "uv": set("run"), "pipenv": set("run"), "pdm": set("run"),
	"hatch": set("run"), "bundle": set("exec"), "cargo": set("run"),
}

// RememberedRule returns the rule that "remember this choice"
// (similar=false) or "apply to similar" (similar=true) makes when the user
// answers action for the action req describes. Created is now.
//
// The rule names req's tool exactly (rules never generalise the tool, and
// never become "*"). Then:
//
//   - A request with a command line gets Commands (its paths are left
//     out). Remember: one glob that is exactly the command line, words
//     quoted so that nothing in them is a wildcard; with operators
//     (&&, |, ;, $(…)) it is a whole-line glob. Similar: one glob per
//     part of the line: the part's leading VAR=value words, its program,
//     its flags up to and including the first argument that is not a flag,
//     and " *" (`go test ./...` → `go test *`, `ls -la` → `ls *`); after
//     a runner subcommand (npm/pnpm/yarn/bun run, deno task, poetry/uv/
//     pipenv/pdm/hatch/cargo run, bundle exec) also the script name,
//     with * attached (`npm run build` → `npm run build*`).
//   - Otherwise a request with paths gets Paths. Remember: each path
//     exactly (glob characters escaped; a root-level name anchored with a
//     leading /, since a pattern without a slash would match the name in
//     every directory). Similar: each path's directory and everything
//     below it (`src/auth/login.ts` → `src/auth/**`), a directory covered
//     by another one left out; a file at the root stays exact, so
//     "similar" never grows into the whole workspace.
//   - A request with neither gets a rule for the tool alone.
//
// A deny is never generalised: with similar=true it is remembered exactly.
// A command line with substitutions ($(…), `…`, <(…)) is always
// remembered exactly, and so is a part whose generalisation would not
// match it (an output redirection, say). Source is SourceSimilar for a
// generalised rule, SourceRemembered otherwise.
//
// Errors wrap engine.ErrInvalidRequest: a bad action, an invalid request
// (see Decide), a command line the shell parser rejects (unbalanced quotes
// or parentheses, syntax errors), or a rule that would break the limits of
// a rule (globs of at most 4096 bytes, at most 256 paths).
func RememberedRule(req Request, action Action, similar bool, now time.Time) (Rule, error) {
	if !action.valid() {
		return Rule{}, fmt.Errorf("remember: %w: action %q is not %q, %q or %q", engine.ErrInvalidRequest, action, Allow, Ask, Deny)
	}
	r, err := prepare(req)
	if err != nil {
		return Rule{}, fmt.Errorf("remember: %w: %v", engine.ErrInvalidRequest, err)
	}
	if r.line != nil && len(r.line.whole) > maxMatchElems {
		return Rule{}, fmt.Errorf("remember: %w: the command line is too long to remember (more than %d characters)", engine.ErrInvalidRequest, maxMatchElems)
	}
	if r.line != nil && r.line.err != nil {
		return Rule{}, fmt.Errorf("remember: %w: the command line cannot be remembered: the shell parser rejects it: %s", engine.ErrInvalidRequest, describeSyntaxError(r.line.err))
	}
	general := similar && action != Deny
	rule := Rule{Tool: escapeGlob(r.tool), Action: action, Source: SourceRemembered, Created: now}
	exact := rule
	switch {
	case r.line != nil && len(r.line.parts) > 0:
		g, err := exactCommand(r.line)
		if err != nil {
			return Rule{}, err
		}
		exact.Commands = []string{g}
		if general {
			rule.Commands = similarCommands(r.line)
		}
	case len(r.paths) > 0:
		exact.Paths = exactPaths(r.paths)
		if general {
			rule.Paths = similarPaths(r.paths)
		}
	}
	exact.Reason = rememberReason(r, action, false)
	if general && (len(rule.Commands) > 0 || len(exact.Commands) == 0) &&
		(!slices.Equal(rule.Paths, exact.Paths) || !slices.Equal(rule.Commands, exact.Commands)) {
		rule.Source = SourceSimilar
		rule.Reason = rememberReason(r, action, true)
		if covers(rule, r) {
			return rule, nil
		}
	}
	// The exact rule may still break a limit (a glob longer than 4096
	// bytes, more than 256 paths).
	var pr problems
	if _, ok := compileRule(exact, "rule", &pr); !ok {
		return Rule{}, fmt.Errorf("remember: %w: the choice cannot be kept as a rule: %v", engine.ErrInvalidRequest, pr.err())
	}
	return exact, nil
}

// Remember adds the rule RememberedRule(req, action, similar, now) makes
// (replacing a duplicate, see Add) and returns it. It is safe for
// concurrent use.
func (p *Policy) Remember(req Request, action Action, similar bool) (Rule, error) {
	r, err := RememberedRule(req, action, similar, time.Now().UTC())
	if err != nil {
		return Rule{}, err
	}
	if err := p.Add(r); err != nil {
		return Rule{}, fmt.Errorf("remember: %w", err)
	}
	return r, nil
}

// exactCommand is the glob for exactly line.
func exactCommand(line *cmdLine) (string, error) {
	g, ok := renderTokens(line.toks)
	back, err := parsePattern(g)
	if !ok || err != nil || !slices.Equal(back, line.toks) {
		why := "it cannot be written as a glob"
		if err != nil {
			why = err.Error()
		}
		return "", fmt.Errorf("remember: %w: the command line cannot be remembered: %s", engine.ErrInvalidRequest, why)
	}
	return g, nil
}

// similarCommands generalises each part of line; nil when a part cannot
// be generalised.
func similarCommands(line *cmdLine) []string {
	if line.hasSubs() {
		return nil
	}
	var out []string
	for i := range line.parts {
		g := similarPart(line.parts[i].words)
		if g == "" {
			return nil
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// similarPart generalises one part's words, or returns "".
func similarPart(words []string) string {
	i := 0
	for i < len(words) && isAssignment(words[i]) {
		i++
	}
	if i == len(words) || words[i] == "" || strings.HasPrefix(words[i], "-") {
		return ""
	}
	prog := path.Base(words[i])
	keep := words[:i+1]
	suffix := " *"
	j := i + 1
	for j < len(words) && strings.HasPrefix(words[j], "-") {
		j++
	}
	if j < len(words) {
		keep = words[:j+1]
		if runners[prog][words[j]] {
			k := j + 1
			for k < len(words) && strings.HasPrefix(words[k], "-") {
				k++
			}
			if k < len(words) && words[k] != "" {
				keep, suffix = words[:k+1], "*"
			}
		}
	}
	q := make([]string, len(keep))
	for n, w := range keep {
		q[n] = quoteWord(w)
	}
	return strings.Join(q, " ") + suffix
}

// exactPaths is one exact glob per path.
func exactPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = exactPath(p)
	}
	return out
}

// exactPath is the glob that matches exactly p.
func exactPath(p string) string {
	g := escapeGlob(p)
	if !strings.Contains(p, "/") {
		return "/" + g
	}
	return g
}

// similarPaths generalises paths to their directories.
func similarPaths(paths []string) []string {
	var dirs, files []string
	for _, p := range paths {
		if d := path.Dir(p); d != "." {
			dirs = append(dirs, d)
		} else {
			files = append(files, p)
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var out []string
	var kept []string
	for _, d := range dirs {
		if slices.ContainsFunc(kept, func(k string) bool { return strings.HasPrefix(d, k+"/") }) {
			continue
		}
		kept = append(kept, d)
		out = append(out, escapeGlob(d)+"/**")
	}
	for _, f := range files {
		out = append(out, exactPath(f))
	}
	return out
}

// covers reports whether rule matches every path and part of r.
func covers(rule Rule, r *request) bool {
	var pr problems
	cr, ok := compileRule(rule, "rule", &pr)
	if !ok {
		return false
	}
	m := newMatcher([]compiledRule{cr}, r)
	for _, s := range r.subjects() {
		if s.secondary {
			continue
		}
		if _, ok := m.match(0, s); !ok {
			return false
		}
	}
	return true
}

// rememberReason says why a remembered rule exists.
func rememberReason(r *request, action Action, similar bool) string {
	verb := map[Action]string{Allow: "allowed", Ask: "asked to be asked about", Deny: "denied"}[action]
	what := r.tool
	switch {
	case r.line != nil && len(r.line.parts) > 0:
		what = "`" + displayTokens(r.line.toks, 80) + "`"
	case len(r.paths) > 0:
		what = r.tool + " on " + listPaths(r.paths)
	}
	if similar {
		return fmt.Sprintf("the user %s %s and similar actions", verb, what)
	}
	return fmt.Sprintf("the user %s %s and chose to remember it", verb, what)
}
