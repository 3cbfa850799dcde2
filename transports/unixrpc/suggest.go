package unixrpc

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds of the suggestion rules' work, whatever the client sends:
// at most maxSuggestHistory earlier commands are looked at, and a word
// longer than maxSuggestWord bytes is never compared by edit distance
// (no program name is that long), so editDistance's cost is bounded.
const (
	maxSuggestHistory = 50
	maxSuggestWord    = 64
	maxSuggestEdits   = 2
)

// Suggestion sources (suggestion.inline's source).
const (
	sourceOutput  = "command_output"
	sourceHistory = "command_history"
	sourceTypo    = "typo_correction"
	sourceRules   = "rules"
)

var (
	// didYouMean finds a tool's own correction in its output: cargo's
	// "Did you mean `test`?", npm's "Did you mean this?\n  install", git's
	// "The most similar command is\n\tstatus".
	didYouMean = regexp.MustCompile("(?i)(?:did you mean(?: this| one of these)?\\??|the most similar commands? (?:is|are))[:\\s]*[`'\"]?([^`'\"\\n?]+?)[`'\"]?\\s*(?:\\?|\\n|$)")
	// unknownWord finds the word a tool did not know: "no such command:
	// `tset`", "'sttaus' is not a git command", `unknown command "biuld"`.
	unknownWord = regexp.MustCompile("(?i)(?:no such (?:sub)?command:?\\s*[`'\"]?([\\w.:-]+)|[`'\"]([\\w.:-]+)[`'\"] is not a [\\w-]+ command|unknown (?:sub)?command:?\\s*[`'\"]?([\\w.:-]+))")
	// notFound is a shell's "command not found".
	notFound = regexp.MustCompile(`(?i)(?:command not found|not found)`)
)

// knownPrograms are names a typo is corrected towards besides the ones in
// the command history.
var knownPrograms = []string{
	"git", "go", "cargo", "rustc", "npm", "npx", "yarn", "pnpm", "node", "python", "python3", "pip", "pytest",
	"make", "docker", "kubectl", "ls", "cd", "cat", "grep", "rg", "find", "sed", "awk", "curl", "ssh",
	"vim", "nvim", "code", "gcc", "clang", "cmake", "java", "mvn", "gradle", "dotnet", "ruby", "bundle",
}

// suggestCommand computes suggestion.inline from the recent commands and
// output, deterministically (no model call), when the last command
// failed. The rules, first match wins:
//
//  1. The output names a correction ("Did you mean `test`?", git's "most
//     similar command"): the failed command with the unknown word
//     replaced by it (confidence 0.9, source command_output).
//  2. An earlier command in the history extends the failed one and
//     succeeded (cargo test -- --nocapture after cargo test): that
//     command (0.87, command_history).
//  3. The shell says the program was not found and its name is within
//     two edits of a program used before or a common one: the command
//     with the name corrected (0.75, typo_correction).
//  4. A failed test run (cargo test, go test, pytest, npm test, yarn
//     test): the same run with its output shown (0.6, rules).
func suggestCommand(cmds []recentCommand, output string) (suggestionParams, bool) {
	if len(cmds) == 0 {
		return suggestionParams{}, false
	}
	last := cmds[len(cmds)-1]
	failed := strings.TrimSpace(last.Command)
	if failed == "" || last.ExitCode == nil || *last.ExitCode == 0 {
		return suggestionParams{}, false
	}
	words := strings.Fields(failed)
	// Only the last maxSuggestHistory earlier commands count.
	hist := cmds[max(0, len(cmds)-1-maxSuggestHistory) : len(cmds)-1]

	if m := didYouMean.FindStringSubmatch(output); m != nil {
		hint := strings.TrimSpace(m[1])
		if s := applyHint(words, hint, output); s != "" && s != failed {
			return suggestionParams{Suggestion: s, Confidence: 0.9, Source: sourceOutput,
				Context: "The output of `" + failed + "` suggests this correction"}, true
		}
	}

	for i := len(hist) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hist[i].Command)
		if len(h) > len(failed) && h[len(failed)] == ' ' && strings.HasPrefix(h, failed) && hist[i].ExitCode != nil && *hist[i].ExitCode == 0 {
			return suggestionParams{Suggestion: h, Confidence: 0.87, Source: sourceHistory,
				Context: "You ran this earlier and it succeeded"}, true
		}
	}

	if len(words[0]) <= maxSuggestWord && notFound.MatchString(output) {
		known := map[string]bool{}
		var cands []string
		add := func(p string) {
			if p != "" && len(p) <= maxSuggestWord && !known[p] {
				known[p] = true
				cands = append(cands, p)
			}
		}
		for _, c := range hist {
			if f := strings.Fields(c.Command); len(f) > 0 && c.ExitCode != nil && *c.ExitCode == 0 {
				add(f[0])
			}
		}
		for _, p := range knownPrograms {
			add(p)
		}
		if best := closest(words[0], cands); best != "" {
			s := strings.Join(append([]string{best}, words[1:]...), " ")
			return suggestionParams{Suggestion: s, Confidence: 0.75, Source: sourceTypo,
				Context: "`" + words[0] + "` was not found; did you mean `" + best + "`?"}, true
		}
	}

	if s := verboseTestRun(words); s != "" {
		return suggestionParams{Suggestion: s, Confidence: 0.6, Source: sourceRules,
			Context: "Rerun the failing tests with their output shown"}, true
	}
	return suggestionParams{}, false
}

// applyHint puts a tool's correction into the failed command: a hint
// with spaces is a whole command; a single word replaces the word the
// output names as unknown, else the subcommand (the second word).
func applyHint(words []string, hint, output string) string {
	if hint == "" {
		return ""
	}
	if strings.ContainsAny(hint, " \t") {
		return hint
	}
	if m := unknownWord.FindStringSubmatch(output); m != nil {
		bad := m[1] + m[2] + m[3]
		for i, w := range words {
			if w == bad {
				out := append([]string(nil), words...)
				out[i] = hint
				return strings.Join(out, " ")
			}
		}
	}
	if len(words) >= 2 {
		out := append([]string(nil), words...)
		out[1] = hint
		return strings.Join(out, " ")
	}
	return ""
}

// closest returns the candidate within two edits of w (and closer than
// half its length), when exactly one is closest. Words longer than
// maxSuggestWord bytes are not compared.
func closest(w string, cands []string) string {
	if len(w) > maxSuggestWord {
		return ""
	}
	best, bestD, ties := "", maxSuggestEdits+1, 0
	n := utf8.RuneCountInString(w)
	for _, c := range cands {
		if c == w {
			return ""
		}
		// The length difference is a lower bound of the distance.
		if m := utf8.RuneCountInString(c); len(c) > maxSuggestWord || m-n > maxSuggestEdits || n-m > maxSuggestEdits {
			continue
		}
		d := editDistance(w, c)
		if d*2 > len(w) {
			continue
		}
		switch {
		case d < bestD:
			best, bestD, ties = c, d, 1
		case d == bestD:
			ties++
		}
	}
	if ties != 1 {
		return ""
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: adjacent transpositions count as one edit). It keeps three
// rows of the table (the transposition looks two rows back), so its
// memory is linear in len(b); callers bound both lengths.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1) // row i-2
	prev := make([]int, len(rb)+1)  // row i-1
	cur := make([]int, len(rb)+1)   // row i
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// verboseTestRun returns a failed test command rerun with its output
// shown; "" when the command is not a known test run or shows it already.
func verboseTestRun(w []string) string {
	cmd := strings.Join(w, " ")
	has := func(flag string) bool {
		for _, x := range w {
			if x == flag {
				return true
			}
		}
		return false
	}
	switch {
	case len(w) >= 2 && w[0] == "cargo" && w[1] == "test":
		if has("--nocapture") {
			return ""
		}
		if has("--") {
			return cmd + " --nocapture"
		}
		return cmd + " -- --nocapture"
	case len(w) >= 2 && w[0] == "go" && w[1] == "test":
		if has("-v") {
			return ""
		}
		return strings.Join(append([]string{"go", "test", "-v"}, w[2:]...), " ")
	case w[0] == "pytest" || (len(w) >= 3 && w[0] == "python" && w[1] == "-m" && w[2] == "pytest"):
		if has("-vv") || has("-s") {
			return ""
		}
		return cmd + " -vv -s"
	case len(w) >= 2 && (w[0] == "npm" || w[0] == "yarn" || w[0] == "pnpm") && w[1] == "test":
		if has("--verbose") {
			return ""
		}
		if w[0] == "npm" && !has("--") {
			return cmd + " -- --verbose"
		}
		return cmd + " --verbose"
	}
	return ""
}
