package fs

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// maxListedLines caps the line numbers an ambiguous old_string's error
// lists.
const maxListedLines = 10

// maxQuotedLine caps the bytes of a file line quoted in a hint.
const maxQuotedLine = 120

// EditResult is the content of an edit_file result: what is proposed.
type EditResult struct {
	// Path is the file as the call named it, workspace-relative with
	// slashes.
	Path string `json:"path"`
	// Target is the file the edit changes when Path is a symlink or goes
	// through one (workspace-relative); empty when it is Path itself.
	Target string `json:"target,omitempty"`
	// Replacements is how many occurrences of old_string are replaced: 1
	// unless replace_all.
	Replacements int `json:"replacements"`
	// LinesRemoved and LinesAdded count the lines the edit takes out and
	// puts in (a line changed in place counts once in each).
	LinesRemoved int `json:"lines_removed"`
	LinesAdded   int `json:"lines_added"`
	// Bytes is the size of the proposed content.
	Bytes int `json:"bytes"`
	// SHA256 is "sha256:" and the hex digest of the proposed content.
	SHA256 string `json:"sha256"`
	// Status is StatusProposed.
	Status string `json:"status"`
}

type editArgs struct {
	Path               *string   `json:"path"`
	OldString          *string   `json:"old_string"`
	NewString          *string   `json:"new_string"`
	ReplaceAll         *bool     `json:"replace_all"`
	Rationale          *string   `json:"rationale"`
	AcceptanceCriteria *[]string `json:"acceptance_criteria"`
}

func (t *Tools) editFile(ctx context.Context, root *workspace.Root, ov overlay, raw []byte) (engine.ToolResult, error) {
	const tool = EditFileTool
	var a editArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	switch {
	case a.Path == nil || *a.Path == "":
		return engine.ToolResult{}, toolkit.Missing(tool, "path", "the file to edit, relative to the workspace root")
	case a.OldString == nil:
		return engine.ToolResult{}, toolkit.Missing(tool, "old_string", "the exact text to replace, copied from the file")
	case a.NewString == nil:
		return engine.ToolResult{}, toolkit.Missing(tool, "new_string", "the text to put in its place; use \"\" to remove old_string")
	case *a.OldString == "":
		return engine.ToolResult{}, toolkit.Invalid(tool, "old_string", "is empty; give the exact text to replace, or use write_file to create a file or replace all of its content")
	case *a.OldString == *a.NewString:
		return engine.ToolResult{}, toolkit.Invalid(tool, "new_string", "is the same as old_string, so nothing would change")
	}
	old, repl := *a.OldString, *a.NewString
	replaceAll := a.ReplaceAll != nil && *a.ReplaceAll

	p, err := t.editTarget(tool, root, *a.Path)
	if err != nil {
		return engine.ToolResult{}, err
	}
	cur, err := t.current(tool, root, ov, p)
	switch {
	case err != nil:
		return engine.ToolResult{}, err
	case !cur.exists && cur.pending:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %s does not exist for this call: an earlier call of this response proposed deleting it; use write_file to create it again", tool, p.show)
	case !cur.exists:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %q does not exist in the workspace %s; use write_file to create a file, or list_files to find the right path", tool, p.given, root.Dir())
	case bytes.IndexByte(cur.content[:min(len(cur.content), binarySniffBytes)], 0) >= 0:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a binary file (it has a NUL byte near the start); edit_file only edits text", tool, p.show)
	}
	content := string(cur.content)

	var at []int
	if replaceAll {
		at = occurrences(content, old)
	} else if i := strings.Index(content, old); i >= 0 {
		if lines := overlapping(content, old); len(lines) > 1 {
			return engine.ToolResult{}, toolkit.Invalid(tool, "old_string", "occurs %d times in %s (at %s); include more of the surrounding lines in old_string so that it matches one place only, or set replace_all to true to replace every occurrence",
				len(lines), p.show, atLines(lines))
		}
		at = []int{i}
	}
	if len(at) == 0 {
		msg := fmt.Sprintf("was not found in %s", p.show)
		if cur.pending {
			msg += " (as edited earlier in this response)"
		}
		msg += "; read the file again with read_file and copy the exact text, whitespace and indentation included"
		if hint := nearMiss(content, old); hint != "" {
			msg += ". " + hint
		}
		return engine.ToolResult{}, toolkit.Invalid(tool, "old_string", "%s", msg)
	}
	if err := ctx.Err(); err != nil {
		return engine.ToolResult{}, toolkit.CtxError(tool, err)
	}
	out, added, removed := replaceAt(content, old, repl, at)
	if len(out) > t.opts.MaxFileBytes {
		return engine.ToolResult{}, toolkit.Invalid(tool, "new_string", "would make %s %s, more than the %s the file tools edit", p.show, formatBytes(int64(len(out))), formatBytes(int64(t.opts.MaxFileBytes)))
	}
	data := []byte(out)
	res := EditResult{
		Path: p.show, Target: targetOf(p), Replacements: len(at), LinesRemoved: removed, LinesAdded: added,
		Bytes: len(data), SHA256: digest(data), Status: StatusProposed,
	}
	summary := fmt.Sprintf("proposed %s changed in %s", plural(max(added, removed), "line", "lines"), shownAs(p))
	if len(at) > 1 {
		summary += fmt.Sprintf(" (%d replacements)", len(at))
	}
	return proposal(res, summary, engine.FileEdit{Path: p.file(), Base: cur.content, BaseExists: true, New: data})
}

// occurrences returns the offsets of the non-overlapping occurrences of
// old (not empty) in s, left to right, as strings.ReplaceAll replaces them.
func occurrences(s, old string) []int {
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], old)
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + len(old)
	}
}

// overlapping returns the 1-based line numbers where old (not empty)
// starts in s, overlapping occurrences included, one entry per
// occurrence.
func overlapping(s, old string) []int {
	var lines []int
	line, counted := 1, 0
	for i := 0; ; i++ {
		j := strings.Index(s[i:], old)
		if j < 0 {
			return lines
		}
		i += j
		line += strings.Count(s[counted:i], "\n")
		counted = i
		lines = append(lines, line)
	}
}

// atLines formats the line numbers of occurrences, each line once:
// "line 3", "lines 3, 17 and 40"; at most maxListedLines of them.
func atLines(lines []int) string {
	lines = slices.Compact(slices.Clone(lines))
	if len(lines) == 1 {
		return fmt.Sprintf("line %d", lines[0])
	}
	var parts []string
	for _, l := range lines[:min(len(lines), maxListedLines)] {
		parts = append(parts, fmt.Sprint(l))
	}
	if len(lines) > maxListedLines {
		return "lines " + strings.Join(parts, ", ") + ", ..."
	}
	last := len(parts) - 1
	return "lines " + strings.Join(parts[:last], ", ") + " and " + parts[last]
}

// replaceAt replaces old by repl at the offsets at (increasing, not
// overlapping) of s and counts the lines removed and added: replacements
// whose lines touch form one region, compared line by line without the
// lines that stay the same at its ends.
func replaceAt(s, old, repl string, at []int) (out string, added, removed int) {
	var b strings.Builder
	b.Grow(len(s) + len(at)*(len(repl)-len(old)))
	done := 0
	for g := 0; g < len(at); {
		start := strings.LastIndexByte(s[:at[g]], '\n') + 1
		end := lineEnd(s, at[g]+len(old))
		h := g + 1
		for h < len(at) && at[h] < end {
			end = lineEnd(s, at[h]+len(old))
			h++
		}
		var before, after strings.Builder
		pos := start
		for _, i := range at[g:h] {
			before.WriteString(s[pos : i+len(old)])
			after.WriteString(s[pos:i])
			after.WriteString(repl)
			pos = i + len(old)
		}
		before.WriteString(s[pos:end])
		after.WriteString(s[pos:end])
		r, a := lineDelta(before.String(), after.String())
		removed += r
		added += a
		b.WriteString(s[done:start])
		b.WriteString(after.String())
		done = end
		g = h
	}
	b.WriteString(s[done:])
	return b.String(), added, removed
}

// lineEnd returns the offset just past the end of the line holding offset
// i of s (past its newline), or len(s).
func lineEnd(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// lineDelta counts the lines of before and after (whole lines each) that
// differ once the equal lines at both ends are set aside.
func lineDelta(before, after string) (removed, added int) {
	b, a := splitLines(before), splitLines(after)
	for len(b) > 0 && len(a) > 0 && b[0] == a[0] {
		b, a = b[1:], a[1:]
	}
	for len(b) > 0 && len(a) > 0 && b[len(b)-1] == a[len(a)-1] {
		b, a = b[:len(b)-1], a[:len(a)-1]
	}
	return len(b), len(a)
}

// splitLines splits s after each newline; a last line without one counts.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// nearMiss explains, when it can tell cheaply, why old does not occur in
// content: the file's line endings differ, or old matches the file up to
// a line that differs (quoted), or old's first line matches a line except
// for whitespace. "" when none of these holds.
func nearMiss(content, old string) string {
	if !strings.Contains(old, "\r") && strings.Contains(content, "\r\n") && strings.Contains(content, strings.ReplaceAll(old, "\n", "\r\n")) {
		return "The file has Windows (CRLF, \\r\\n) line endings: old_string must use \\r\\n too"
	}
	// The longest prefix of old that occurs in content (containment is
	// monotone in the prefix length, so a binary search finds it).
	lo, hi := 0, len(old) // old[:lo] occurs, old[:hi+1] does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if strings.Contains(content, old[:mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if nl := strings.IndexByte(old, '\n'); nl >= 0 && lo > nl {
		// At least the first line matches: show where the two part.
		at := strings.Index(content, old[:lo]) + lo
		if at == len(content) {
			return "old_string matches the end of the file but goes on past it"
		}
		line := strings.Count(content[:at], "\n") + 1
		return fmt.Sprintf("old_string matches the file up to line %d, which reads %s where old_string has %s",
			line, quoteLine(lineAround(content, at)), quoteLine(lineAround(old, lo)))
	}
	first := ""
	for l := range strings.SplitSeq(old, "\n") {
		if first = strings.Join(strings.Fields(l), " "); first != "" {
			break
		}
	}
	if first == "" {
		return ""
	}
	for i, l := range splitLines(content) {
		if strings.Join(strings.Fields(l), " ") == first {
			return fmt.Sprintf("Line %d reads %s, which matches the first line of old_string except for whitespace", i+1, quoteLine(l))
		}
	}
	return ""
}

// lineAround returns the line of s that holds offset i, without its
// newline.
func lineAround(s string, i int) string {
	start := strings.LastIndexByte(s[:i], '\n') + 1
	return strings.TrimSuffix(s[start:lineEnd(s, i)], "\n")
}

// quoteLine quotes a line for a message, cut to maxQuotedLine bytes.
func quoteLine(l string) string {
	l = strings.TrimSuffix(l, "\n")
	if len(l) > maxQuotedLine {
		return fmt.Sprintf("%q...", cutUTF8([]byte(l), maxQuotedLine))
	}
	return fmt.Sprintf("%q", l)
}
