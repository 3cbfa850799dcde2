package policy

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
)

// levelRank orders risk levels; unknown levels rank below low.
func levelRank(l engine.RiskLevel) int {
	switch l {
	case engine.RiskLow:
		return 0
	case engine.RiskMedium:
		return 1
	case engine.RiskHigh:
		return 2
	case engine.RiskCritical:
		return 3
	}
	return -1
}

// finding is one reason for a risk level.
type finding struct {
	level  engine.RiskLevel
	reason string
}

// findings collects the reasons of an assessment.
type findings []finding

func (f *findings) add(level engine.RiskLevel, format string, args ...any) {
	*f = append(*f, finding{level: level, reason: fmt.Sprintf(format, args...)})
}

// maxReasons bounds the reasons of one assessment.
const maxReasons = 8

// risk turns findings into a Risk: the worst level; its reasons worst
// first, without repeats, leaving out low ones when the level is higher.
func (f findings) risk(reversible bool) engine.Risk {
	r := engine.Risk{Level: engine.RiskLow, Reasons: []string{}}
	for _, x := range f {
		if levelRank(x.level) > levelRank(r.Level) {
			r.Level = x.level
		}
	}
	sorted := slices.Clone(f)
	slices.SortStableFunc(sorted, func(a, b finding) int { return cmp.Compare(levelRank(b.level), levelRank(a.level)) })
	seen := map[string]bool{}
	dropped := 0
	for _, x := range sorted {
		if seen[x.reason] || x.level == engine.RiskLow && r.Level != engine.RiskLow {
			continue
		}
		seen[x.reason] = true
		if len(r.Reasons) == maxReasons {
			dropped++
			continue
		}
		r.Reasons = append(r.Reasons, x.reason)
	}
	if dropped > 0 {
		r.Reasons[maxReasons-1] = fmt.Sprintf("%s (and %d more reasons)", r.Reasons[maxReasons-1], dropped)
	}
	r.Reversible = reversible || r.Level == engine.RiskLow
	return r
}

// Assess grades the risk of the action req describes, with reasons for
// people, as protocols/jsonrpc-unix-socket.md words it. It is a documented
// heuristic, not a proof:
//
//   - A command line (Request.Command) is graded by its parts (see the
//     package doc, "Command risk"), the worst part deciding; the tool's
//     declared risk is its worst case and is not used. A command line the
//     shell parser rejects is at least medium, with a reason quoting the
//     parser's error.
//   - A tool call of a read-only tool is low, unless it reads a file that
//     commonly holds secrets (medium: the contents go to the model).
//   - A tool call that changes files is medium (not reversible: the
//     engine keeps no copy of what a tool writes); one without paths is
//     medium too (it may change anything). The tool's declared risk
//     (ToolSpec.Risk) raises the level if it is higher.
//   - A patch apply is medium and reversible (the engine can undo an
//     applied patch).
//   - Changing or deleting certain paths raises the level to high:
//     anything in a .git directory, CI and automation configuration
//     (.github/workflows/, .gitlab-ci.yml, .circleci/, git hooks, …),
//     lockfiles (go.sum, package-lock.json, Cargo.lock, …), and any
//     deletion.
//   - A path outside the workspace makes it high (Decide denies it).
//
// Reversible is true for low risk and for patch applies.
func Assess(req Request) engine.Risk {
	r, err := prepare(req)
	return assess(r, err)
}

// assess is Assess of a request prepare returned (with its error).
func assess(r *request, err error) engine.Risk {
	var f findings
	if err != nil {
		f.add(engine.RiskHigh, "%s", err.Error())
		return f.risk(false)
	}
	reversible := false
	switch {
	case r.line != nil:
		f = append(f, assessLine(r.line, 0)...)
	case r.kind == KindCommand:
		f.add(engine.RiskLow, "the command is empty")
	case r.kind == KindPatchApply:
		f.add(engine.RiskMedium, "applies a patch to %s; the engine can undo it", listPaths(r.paths))
		reversible = true
	default:
		base := engine.RiskMedium
		switch {
		case !r.changes:
			base = engine.RiskLow
			f.add(base, "%s only reads", r.tool)
		case len(r.paths) > 0:
			f.add(base, "%s changes %s", r.tool, listPaths(r.paths))
		default:
			f.add(base, "%s can change files or run processes", r.tool)
		}
		if d := r.spec.Risk; levelRank(d) > levelRank(base) {
			f.add(d, "%s declares its risk as %s", r.tool, d)
		}
	}
	if r.line == nil {
		for _, p := range r.paths {
			assessPath(&f, r, p)
		}
	}
	return f.risk(reversible)
}

// listPaths names up to three paths.
func listPaths(paths []string) string {
	switch {
	case len(paths) == 0:
		return "no files"
	case len(paths) <= 3:
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more files", strings.Join(paths[:3], ", "), len(paths)-3)
}

// assessPath adds what is special about path p to f.
func assessPath(f *findings, r *request, p string) {
	if !r.changes {
		if secretFile(p) {
			f.add(engine.RiskMedium, "%s may hold secrets (keys, passwords, tokens); reading it sends them to the model", p)
		}
		return
	}
	if r.deleted[p] {
		f.add(engine.RiskHigh, "deletes %s", p)
	}
	segs := strings.Split(p, "/")
	switch {
	case slices.Contains(segs, ".git"):
		f.add(engine.RiskHigh, "changes %s inside .git, git's own data: a wrong edit can corrupt the repository", p)
	case automationFile(p):
		f.add(engine.RiskHigh, "changes %s, CI or automation configuration that runs commands by itself (often with the repository's secrets)", p)
	case lockfiles[path.Base(p)]:
		f.add(engine.RiskHigh, "changes the lockfile %s: builds will fetch and run the dependency versions it names", p)
	case secretFile(p):
		f.add(engine.RiskMedium, "changes %s, which may hold secrets", p)
	}
}

// lockfiles are the base names of dependency lockfiles.
var lockfiles = map[string]bool{
	"go.sum": true, "package-lock.json": true, "npm-shrinkwrap.json": true, "yarn.lock": true,
	"pnpm-lock.yaml": true, "bun.lock": true, "bun.lockb": true, "Cargo.lock": true,
	"poetry.lock": true, "Pipfile.lock": true, "uv.lock": true, "pdm.lock": true,
	"Gemfile.lock": true, "composer.lock": true, "mix.lock": true, "pubspec.lock": true,
	"Podfile.lock": true, "packages.lock.json": true, "flake.lock": true, "gradle.lockfile": true,
	"Package.resolved": true,
}

// automationFile reports whether p configures CI or something else that
// runs commands by itself.
func automationFile(p string) bool {
	for _, prefix := range []string{".github/workflows/", ".github/actions/", ".circleci/", ".buildkite/", ".husky/", ".githooks/", ".gitlab/ci/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	switch p {
	case ".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml", ".drone.yml",
		"Jenkinsfile", ".pre-commit-config.yaml", "lefthook.yml", ".vscode/tasks.json", "cloudbuild.yaml", "appveyor.yml":
		return true
	}
	return false
}

// secretFile reports whether p's name is one that commonly holds secrets.
func secretFile(p string) bool {
	base := path.Base(p)
	switch base {
	case ".env", "id_rsa", "id_ecdsa", "id_ed25519", "id_dsa", ".netrc", ".pgpass", ".npmrc", ".pypirc":
		return true
	case ".env.example", ".env.sample", ".env.template", ".env.dist":
		return false
	}
	if strings.HasPrefix(base, ".env.") {
		return true
	}
	switch path.Ext(base) {
	case ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore":
		return true
	}
	return false
}
