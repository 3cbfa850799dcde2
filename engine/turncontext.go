package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// TurnContext is the editor context a client sends with a user message
// (the "context" object of client.user_message in the WebSocket contract);
// the JSON tags are the contract's names, so a transport decodes the wire
// object straight into it. Every member is optional.
//
// Positions follow VS Code's API, so an extension passes them through
// unchanged: lines (Position.Line, LineRange, Diagnostic.Line,
// Mention.Line) are 0-based and characters are 0-based UTF-16 code units.
// The context section the model reads shows lines 1-based, as editors and
// the engine's tools and search hits do.
//
// The engine does not trust it: every path in it is confined to the
// workspace (".." that climbs out, absolute paths elsewhere and symlinks
// leading out are refused and noted), and what it contributes to the
// model's message is capped (see ContextBudget).
type TurnContext struct {
	// ActiveEditor is the focused editor; nil when none has focus.
	ActiveEditor *ActiveEditor `json:"active_editor,omitempty"`
	// OpenEditors are the editor tabs open in the client.
	OpenEditors []OpenEditor `json:"open_editors,omitempty"`
	// Diagnostics are the problems the editor reports (compiler errors,
	// linter warnings).
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// TerminalOutput is the last command run in the client's terminal.
	TerminalOutput *TerminalOutput `json:"terminal_output,omitempty"`
	// GitContext is the repository state as the client's git sees it.
	GitContext *GitContext `json:"git_context,omitempty"`
	// Mentions are the files and symbols the user named with @.
	Mentions []Mention `json:"mentions,omitempty"`
	// Command is the slash command the message was sent with: SlashFix,
	// SlashTest, SlashExplain or SlashRefactor (case and a missing slash
	// are forgiven); "" for none. An unknown command is gathered as none,
	// and the section says so.
	Command string `json:"command,omitempty"`
}

// Slash commands of TurnContext.Command. Each chooses what is gathered
// (see the contract's "Context gathering strategy") and adds a one-line
// instruction to the message.
const (
	SlashFix      = "/fix"
	SlashTest     = "/test"
	SlashExplain  = "/explain"
	SlashRefactor = "/refactor"
)

// ActiveEditor is the focused editor.
type ActiveEditor struct {
	// FilePath is the file, workspace-relative (slash-separated) or
	// absolute inside the workspace.
	FilePath string `json:"file_path"`
	// Language is the editor's language id ("typescript", "go").
	Language string `json:"language,omitempty"`
	// Selection is the selected range; a Selection whose Start equals End
	// is the cursor. Nil when unknown.
	Selection *Selection `json:"selection,omitempty"`
	// VisibleRange is the range of lines on screen; nil when unknown.
	VisibleRange *LineRange `json:"visible_range,omitempty"`
	// ContentHash is "sha256:" and the lowercase hex SHA-256 of the
	// editor's text; when it differs from the file on disk the editor has
	// unsaved changes.
	ContentHash string `json:"content_hash,omitempty"`
}

// Selection is a range of text, from Start to End (exclusive), as VS Code's
// Selection: Start may come after End when selected backwards.
type Selection struct {
	Start Position `json:"start"`
	End   Position `json:"end"`
}

// Position is a place in a text document.
type Position struct {
	// Line is 0-based.
	Line int `json:"line"`
	// Character is the 0-based offset in the line, in UTF-16 code units.
	Character int `json:"character"`
}

// LineRange is a range of whole lines, 0-based, both ends inclusive.
type LineRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// OpenEditor is an open editor tab.
type OpenEditor struct {
	// FilePath is workspace-relative or absolute inside the workspace.
	FilePath string `json:"file_path"`
	// IsDirty is true when the editor has unsaved changes.
	IsDirty bool `json:"is_dirty"`
	// Visible is true when the editor is on screen.
	Visible bool `json:"visible"`
}

// Diagnostic is one problem the editor reports.
type Diagnostic struct {
	// FilePath is workspace-relative or absolute inside the workspace.
	FilePath string `json:"file_path"`
	// Severity is "error", "warning", "information" or "hint".
	Severity string `json:"severity"`
	Message  string `json:"message"`
	// Line is 0-based; Character is 0-based, in UTF-16 code units.
	Line      int `json:"line"`
	Character int `json:"character"`
	// Source is the reporting tool ("typescript", "eslint", "gopls").
	Source string `json:"source,omitempty"`
}

// TerminalOutput is a command run in the client's terminal and its output.
type TerminalOutput struct {
	Command string `json:"command"`
	// ExitCode is nil while the command runs or when unknown.
	ExitCode *int   `json:"exit_code,omitempty"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	// Timestamp is when it ran, RFC 3339 ("2025-12-30T10:30:45Z"). It is
	// kept as the client's text and shown as is, so a malformed stamp does
	// not fail the whole message.
	Timestamp string `json:"timestamp,omitempty"`
}

// GitContext is the repository state as the client reports it.
type GitContext struct {
	Branch string `json:"branch,omitempty"`
	// StagedFiles and ModifiedFiles are workspace-relative paths.
	StagedFiles   []string `json:"staged_files,omitempty"`
	ModifiedFiles []string `json:"modified_files,omitempty"`
	// RecentCommits are the latest commits, newest first.
	RecentCommits []GitCommit `json:"recent_commits,omitempty"`
}

// GitCommit is one commit of GitContext.
type GitCommit struct {
	SHA     string `json:"sha"`
	Message string `json:"message"`
	Author  string `json:"author,omitempty"`
	// Timestamp is RFC 3339, kept as the client's text.
	Timestamp string `json:"timestamp,omitempty"`
}

// Mention types (Mention.Type).
const (
	MentionFile   = "file"
	MentionSymbol = "symbol"
)

// Mention is a file or symbol the user named with @.
type Mention struct {
	// Type is MentionFile or MentionSymbol.
	Type string `json:"type"`
	// Path is the mentioned file (MentionFile).
	Path string `json:"path,omitempty"`
	// Name, FilePath and Line (0-based) locate a mentioned symbol
	// (MentionSymbol). Without FilePath the symbol is looked up in the
	// code index, when the engine has one.
	Name     string `json:"name,omitempty"`
	FilePath string `json:"file_path,omitempty"`
	Line     int    `json:"line,omitempty"`
}

// Merge applies a client.context_update to c: each member present in
// update (a non-nil pointer or slice, a non-empty Command) replaces c's
// whole member; the others are kept. Decoded from JSON, a member left out
// or null keeps the old value and an empty list ("diagnostics": [])
// replaces it, clearing it. c then shares update's members (nothing is
// copied). A nil update changes nothing; c must not be nil.
func (c *TurnContext) Merge(update *TurnContext) {
	if update == nil {
		return
	}
	if update.ActiveEditor != nil {
		c.ActiveEditor = update.ActiveEditor
	}
	if update.OpenEditors != nil {
		c.OpenEditors = update.OpenEditors
	}
	if update.Diagnostics != nil {
		c.Diagnostics = update.Diagnostics
	}
	if update.TerminalOutput != nil {
		c.TerminalOutput = update.TerminalOutput
	}
	if update.GitContext != nil {
		c.GitContext = update.GitContext
	}
	if update.Mentions != nil {
		c.Mentions = update.Mentions
	}
	if update.Command != "" {
		c.Command = update.Command
	}
}

// ContextBudget is the most bytes the editor context section adds to a
// user message: 48 KiB, about 12k tokens, a little over a third of a
// 32k-token context window. Each piece has its own, smaller cap first
// (marked where it cuts). The pieces are laid out in order of priority
// (command, active file, selection, diagnostics, mentions, the command's
// extras, open editors); the first that does not fit the budget is cut,
// the rest are named as left out, and the notes (missing or refused files)
// always come last.
const ContextBudget = 48 << 10

// Caps of the pieces of the context section, in bytes unless named
// otherwise.
const (
	maxSelectionBytes  = 16 << 10
	maxDiagnostics     = 30  // diagnostics listed
	maxDiagnosticBytes = 400 // one diagnostic's message
	maxOpenEditors     = 40
	maxStdoutBytes     = 8 << 10 // the tail of the terminal's stdout
	maxStderrBytes     = 4 << 10 // the tail of its stderr
	maxGitDiffBytes    = 16 << 10
	maxGitFiles        = 30 // staged and modified files listed, each
	maxGitCommits      = 5
	diagWindowLines    = 3 // lines shown each side of a diagnostic (/fix)
	maxDiagWindows     = 8
	maxWindowBytes     = 2 << 10
	maxSourceBytes     = 16 << 10 // the active file (/test, /refactor)
	maxTestFiles       = 3
	maxTestFileBytes   = 12 << 10
	maxScopeBytes      = 12 << 10 // the scope around the cursor (/explain)
	scopeWindowLines   = 15       // lines each side when no scope is found
	maxImportFiles     = 4        // imported files shown (/refactor)
	maxImportBytes     = 4 << 10
	maxImportsListed   = 30
	maxDependents      = 20
	maxMentions        = 10
	maxMentionBytes    = 8 << 10
	maxNotesBytes      = 2 << 10
	maxFocusBytes      = 1 << 10 // selection text added to the retrieval query
	maxReadBytes       = 4 << 20 // larger files are not read at all
	maxWalkFiles       = 5000    // files a search for dependents reads without an index
	budgetReserve      = 512     // for the note of what the budget left out
	gitTimeout         = 5 * time.Second
)

// gathered is the editor context of a turn, ready for the model.
type gathered struct {
	// text is the section appended to the user message.
	text string
	// focus is what the retrieval query gains: the selected text and the
	// diagnostics' messages.
	focus string
	// refused are the paths refused for leaving the workspace.
	refused []string
}

// query is the retrieval query of a turn whose message is msg.
func (g gathered) query(msg string) string {
	if g.focus == "" {
		return msg
	}
	return msg + "\n" + g.focus
}

// editorContext gathers the turn's editor context; refused paths are
// reported as one recoverable error event.
func (t *turn) editorContext(ctx context.Context, c *TurnContext) gathered {
	if c == nil {
		return gathered{}
	}
	g := gatherContext(ctx, t.s.workspace.Root, t.e.opts.Searcher, c)
	if len(g.refused) > 0 {
		t.emit(&ErrorEvent{Code: CodePolicyViolation, Recoverable: true,
			Message: "editor context: paths outside the workspace were not read: " + truncate(strings.Join(g.refused, ", "), 500)})
	}
	return g
}

// gatherContext builds the editor context section for c in the workspace
// at root (absolute, symlinks resolved), following the contract's "Context
// gathering strategy":
//
//   - Always: the active file (path, language, unsaved changes), the
//     selected text, the diagnostics, the mentioned files and symbols, the
//     open editors (paths only).
//   - /fix: the terminal output (tails), the lines around each
//     diagnostic, the client's git state and the workspace's
//     `git diff HEAD`.
//   - /test: the active file, its tests (or, for a test, its source) found
//     by naming convention (see testConvention), the terminal output.
//   - /explain: the selection, or with none the function or block around
//     the cursor: the smallest chunk of the code index (s) holding the
//     cursor when s is set, else found by braces (or by indentation, for
//     Python); else the lines around the cursor.
//   - /refactor: the active file, the workspace files it imports (Go
//     packages of its module, relative JavaScript/TypeScript imports,
//     Python imports; see parseImports) and its dependents (files importing
//     it: candidates from s.SearchText when s is set, else from a bounded
//     walk, confirmed by parsing their imports; for other languages, files
//     naming it).
//
// Missing, unreadable and refused files are noted in the section, never
// fatal. Paths in the section are workspace-relative.
func gatherContext(ctx context.Context, root string, s Searcher, c *TurnContext) gathered {
	fsys, err := os.OpenRoot(root)
	if err != nil {
		return gathered{text: fmt.Sprintf("\n\n[editor context not included: the workspace cannot be opened: %v]", err)}
	}
	defer fsys.Close()
	g := &gatherer{ctx: ctx, root: root, fsys: fsys, search: s, mods: map[string]goModule{}}
	parts := g.parts(c)
	if len(parts) == 0 && len(g.notes) == 0 {
		return gathered{}
	}
	slices.Sort(g.refused)
	return gathered{text: renderContext(parts, g.notes, ContextBudget), focus: g.focus, refused: slices.Compact(g.refused)}
}

// gatherer collects the pieces of one context section.
type gatherer struct {
	ctx    context.Context
	root   string
	fsys   *os.Root
	search Searcher // nil without a code index

	notes   []string
	refused []string
	focus   string
	mods    map[string]goModule // by directory
}

func (g *gatherer) notef(format string, args ...any) {
	g.notes = append(g.notes, fmt.Sprintf(format, args...))
}

// part is one piece of the section: a heading and a body, fenced as code
// when code.
type part struct {
	title string
	body  string
	code  bool
	lang  string
}

// instructions are the lines the slash commands add.
var instructions = map[string]string{
	SlashFix:      "Fix the problems the diagnostics and the failing output show; propose the change as edits.",
	SlashTest:     "Write or update tests for the active file (or its selection), following the conventions of its existing tests; propose them as edits.",
	SlashExplain:  "Explain what the selected code (or the code around the cursor) does and how; change nothing.",
	SlashRefactor: "Refactor the selected code (or the active file) without changing its behaviour, updating its dependents; propose the change as edits.",
}

// slashCommand normalises a TurnContext.Command: "Fix" and "/FIX" are
// SlashFix. known is false for a command that is not one of the four.
func slashCommand(c string) (cmd string, known bool) {
	c = strings.ToLower(strings.TrimSpace(c))
	if c == "" {
		return "", true
	}
	if !strings.HasPrefix(c, "/") {
		c = "/" + c
	}
	_, known = instructions[c]
	return c, known
}

// parts gathers the pieces of the section in order of priority.
func (g *gatherer) parts(c *TurnContext) []part {
	var parts []part
	cmd, known := slashCommand(c.Command)
	switch {
	case !known:
		parts = append(parts, part{title: "Command", body: fmt.Sprintf("%q is not a known command (known: /fix, /test, /explain, /refactor); the context was gathered as for a message without one.", truncate(c.Command, 40))})
		cmd = ""
	case cmd != "":
		parts = append(parts, part{title: "Command " + cmd, body: instructions[cmd]})
	}

	ed := c.ActiveEditor
	var active *fileText
	var family string
	if ed != nil {
		var p []part
		active, p = g.activeEditor(ed, c.OpenEditors)
		parts = append(parts, p...)
		family = langFamily(g.display(ed.FilePath), ed.Language)
	}
	diags := sortedDiagnostics(c.Diagnostics)
	if p, ok := g.diagnostics(diags); ok {
		parts = append(parts, p)
	}
	parts = append(parts, g.mentions(c.Mentions)...)

	switch cmd {
	case SlashFix:
		parts = append(parts, g.terminal(c.TerminalOutput, "the failing output")...)
		parts = append(parts, g.diagnosticWindows(diags, active)...)
		parts = append(parts, g.git(c.GitContext)...)
	case SlashTest:
		parts = append(parts, g.tests(active)...)
		parts = append(parts, g.terminal(c.TerminalOutput, "the recent test output")...)
	case SlashExplain:
		switch {
		case active == nil || !selectionEmpty(ed.Selection):
		case ed.Selection == nil:
			g.notef("the client sent neither a selection nor a cursor position, so no code around the cursor is shown")
		default:
			parts = append(parts, g.scope(active, family, ed.Selection.Start.Line))
		}
	case SlashRefactor:
		if active != nil {
			parts = append(parts, part{title: "Content of the active file " + active.rel, body: capHead(string(active.data), maxSourceBytes), code: true, lang: fenceLang(active.rel, ed.Language)})
			parts = append(parts, g.imports(active, family)...)
			parts = append(parts, g.dependents(active, family))
		}
	}
	if cmd != "" && ed == nil {
		g.notef("%s works on the active editor, and the client sent none", cmd)
	}
	if p, ok := g.openEditors(c.OpenEditors); ok {
		parts = append(parts, p)
	}

	var focus []string
	for i, d := range diags {
		if i == 5 {
			break
		}
		focus = append(focus, truncate(oneLine(d.Message), 200))
	}
	for _, m := range c.Mentions {
		if m.Type == MentionSymbol && m.Name != "" {
			focus = append(focus, truncate(m.Name, 100))
		}
	}
	g.focus = strings.TrimSpace(g.focus + "\n" + strings.Join(focus, "\n"))
	return parts
}

// activeEditor describes the active editor and its selection. The file is
// nil when it cannot be read (noted).
func (g *gatherer) activeEditor(ed *ActiveEditor, open []OpenEditor) (*fileText, []part) {
	rel := g.display(ed.FilePath)
	title := "Active file " + rel
	if ed.Language != "" {
		title += " (" + ed.Language + ")"
	}
	f, err := g.read(ed.FilePath)
	if err != nil {
		g.notef("the active file is not included: %v", err)
		return nil, []part{{title: title, body: "It could not be read (see the notes)."}}
	}
	lines := f.lines()
	var info []string
	info = append(info, fmt.Sprintf("%d lines.", len(lines)))
	dirty := false
	for _, o := range open {
		if o.IsDirty && g.display(o.FilePath) == f.rel {
			dirty = true
		}
	}
	if h, ok := strings.CutPrefix(ed.ContentHash, "sha256:"); ok {
		sum := sha256.Sum256(f.data)
		if !strings.EqualFold(h, hex.EncodeToString(sum[:])) {
			dirty = true
		}
	} else if ed.ContentHash != "" {
		g.notef("the content hash %q is not sha256:<hex>; it was not compared", truncate(ed.ContentHash, 80))
	}
	if dirty {
		info = append(info, "The editor has unsaved changes: the text here is the file as saved on disk and may differ from what the user sees.")
	}
	if v := ed.VisibleRange; v != nil {
		info = append(info, fmt.Sprintf("Visible: lines %d-%d.", v.Start+1, v.End+1))
	}
	parts := []part{{title: title, body: strings.Join(info, " ")}}
	sel := ed.Selection
	switch {
	case sel == nil:
	case selectionEmpty(sel):
		parts[0].body += fmt.Sprintf(" Cursor: line %d, column %d.", sel.Start.Line+1, sel.Start.Character+1)
	default:
		text, from, to := selectedText(lines, *sel)
		g.focus = truncate(text, maxFocusBytes)
		parts = append(parts, part{title: fmt.Sprintf("Selection in %s, lines %d-%d", f.rel, from+1, to+1),
			body: capHead(text, maxSelectionBytes), code: true, lang: fenceLang(f.rel, ed.Language)})
	}
	return f, parts
}

func selectionEmpty(s *Selection) bool { return s == nil || s.Start == s.End }

// selectedText is the text of sel in lines, with the 0-based first and
// last line it spans (clamped to the file).
func selectedText(lines []string, sel Selection) (text string, from, to int) {
	a, b := sel.Start, sel.End
	if b.Line < a.Line || b.Line == a.Line && b.Character < a.Character {
		a, b = b, a
	}
	last := len(lines) - 1
	if last < 0 || a.Line > last || b.Line < 0 {
		clamp := func(l int) int { return min(max(l, 0), max(last, 0)) }
		return "", clamp(a.Line), clamp(b.Line)
	}
	if a.Line < 0 {
		a = Position{}
	}
	if b.Line > last {
		b = Position{Line: last, Character: utf16Len(lines[last])}
	}
	if a.Line == b.Line {
		l := lines[a.Line]
		i, j := utf16Offset(l, a.Character), utf16Offset(l, b.Character)
		return l[i:j], a.Line, b.Line
	}
	var sb strings.Builder
	sb.WriteString(lines[a.Line][utf16Offset(lines[a.Line], a.Character):])
	for k := a.Line + 1; k < b.Line; k++ {
		sb.WriteString("\n" + lines[k])
	}
	sb.WriteString("\n" + lines[b.Line][:utf16Offset(lines[b.Line], b.Character)])
	to = b.Line
	if b.Character == 0 {
		to-- // a selection of whole lines ends at the start of the next
	}
	return sb.String(), a.Line, to
}

// utf16Offset is the byte offset in line of the position n UTF-16 code
// units in, clamped to the line.
func utf16Offset(line string, n int) int {
	units := 0
	for i, r := range line {
		if units >= n {
			return i
		}
		units++
		if r >= 0x10000 {
			units++
		}
	}
	return len(line)
}

func utf16Len(line string) int {
	n := 0
	for _, r := range line {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// mentions gathers the @-mentioned files and symbols.
func (g *gatherer) mentions(ms []Mention) []part {
	var parts []part
	for i, m := range ms {
		if i == maxMentions {
			g.notef("%d more mentions were left out", len(ms)-maxMentions)
			break
		}
		switch m.Type {
		case MentionFile:
			f, err := g.read(m.Path)
			if err != nil {
				g.notef("the mentioned file is not included: %v", err)
				continue
			}
			parts = append(parts, part{title: "Mentioned file " + f.rel, body: capHead(string(f.data), maxMentionBytes), code: true, lang: fenceLang(f.rel, "")})
		case MentionSymbol:
			if p, ok := g.symbol(m); ok {
				parts = append(parts, p)
			}
		default:
			g.notef("a mention of unknown type %q was ignored", truncate(m.Type, 40))
		}
	}
	return parts
}

// symbol shows the code of a mentioned symbol: the scope that starts at
// (or just above) its line, else the lines around it.
func (g *gatherer) symbol(m Mention) (part, bool) {
	file, line := m.FilePath, m.Line
	if file == "" && g.search != nil && m.Name != "" {
		hits, err := g.search.SearchSymbols(g.ctx, g.root, SymbolQuery{Query: m.Name, Limit: 1})
		if err == nil && len(hits) > 0 {
			file, line = hits[0].Path, hits[0].StartLine-1
		}
	}
	if file == "" {
		g.notef("the mentioned symbol %q is not included: no file was given and the code index does not know it", truncate(m.Name, 80))
		return part{}, false
	}
	f, err := g.read(file)
	if err != nil {
		g.notef("the mentioned symbol %q is not included: %v", truncate(m.Name, 80), err)
		return part{}, false
	}
	lines := f.lines()
	line = min(max(line, 0), max(len(lines)-1, 0))
	start, end, ok := heuristicScope(lines, line, langFamily(f.rel, ""))
	if !ok || start < line-10 || start > line {
		start, end = max(line-scopeWindowLines, 0), min(line+scopeWindowLines, len(lines)-1)
	}
	return part{title: fmt.Sprintf("Mentioned symbol %s in %s, lines %d-%d", truncate(m.Name, 80), f.rel, start+1, end+1),
		body: capHead(strings.Join(lines[start:end+1], "\n"), maxMentionBytes), code: true, lang: fenceLang(f.rel, "")}, true
}

// severityRank orders diagnostics: errors first.
func severityRank(s string) int {
	switch strings.ToLower(s) {
	case "error":
		return 0
	case "warning":
		return 1
	case "information", "info":
		return 2
	case "hint":
		return 3
	}
	return 4
}

func sortedDiagnostics(ds []Diagnostic) []Diagnostic {
	ds = slices.Clone(ds)
	slices.SortStableFunc(ds, func(a, b Diagnostic) int { return severityRank(a.Severity) - severityRank(b.Severity) })
	return ds
}

// diagnostics lists the diagnostics, errors first.
func (g *gatherer) diagnostics(ds []Diagnostic) (part, bool) {
	if len(ds) == 0 {
		return part{}, false
	}
	var b strings.Builder
	for i, d := range ds {
		if i == maxDiagnostics {
			fmt.Fprintf(&b, "[… %d more not shown]\n", len(ds)-maxDiagnostics)
			break
		}
		fmt.Fprintf(&b, "- %s:%d:%d %s", g.display(d.FilePath), d.Line+1, d.Character+1, oneLine(d.Severity))
		if d.Source != "" {
			fmt.Fprintf(&b, " [%s]", truncate(oneLine(d.Source), 40))
		}
		fmt.Fprintf(&b, ": %s\n", truncate(oneLine(d.Message), maxDiagnosticBytes))
	}
	return part{title: fmt.Sprintf("Diagnostics (%d)", len(ds)), body: strings.TrimSuffix(b.String(), "\n")}, true
}

// diagnosticWindows shows the lines around each diagnostic (/fix),
// windows of one file merged when they overlap.
func (g *gatherer) diagnosticWindows(ds []Diagnostic, active *fileText) []part {
	type window struct{ from, to int }
	var order []string
	byFile := map[string][]int{}
	for _, d := range ds {
		if len(byFile) == maxDiagWindows && byFile[d.FilePath] == nil {
			continue
		}
		if byFile[d.FilePath] == nil {
			order = append(order, d.FilePath)
		}
		byFile[d.FilePath] = append(byFile[d.FilePath], d.Line)
	}
	var parts []part
	shown := 0
	for _, p := range order {
		var f *fileText
		if active != nil && g.display(p) == active.rel {
			f = active
		} else {
			var err error
			if f, err = g.read(p); err != nil {
				g.notef("the code around the diagnostics of %s is not included: %v", g.display(p), err)
				continue
			}
		}
		lines := f.lines()
		marks := map[int]bool{}
		var ws []window
		diagLines := slices.Clone(byFile[p])
		slices.Sort(diagLines)
		for _, l := range diagLines {
			if l < 0 || l >= len(lines) {
				continue
			}
			marks[l] = true
			w := window{max(l-diagWindowLines, 0), min(l+diagWindowLines, len(lines)-1)}
			if n := len(ws); n > 0 && w.from <= ws[n-1].to+1 {
				ws[n-1].to = max(ws[n-1].to, w.to)
				continue
			}
			ws = append(ws, w)
		}
		for _, w := range ws {
			if shown == maxDiagWindows {
				return parts
			}
			shown++
			parts = append(parts, part{title: fmt.Sprintf("Code around the diagnostics: %s, lines %d-%d (> marks a diagnostic's line)", f.rel, w.from+1, w.to+1),
				body: capHead(numbered(lines, w.from, w.to, marks), maxWindowBytes), code: true})
		}
	}
	return parts
}

// numbered renders lines[from..to] with 1-based numbers, marking the
// lines in marks with ">".
func numbered(lines []string, from, to int, marks map[int]bool) string {
	width := len(fmt.Sprint(to + 1))
	var b strings.Builder
	for i := from; i <= to; i++ {
		m := " "
		if marks[i] {
			m = ">"
		}
		fmt.Fprintf(&b, "%s%*d| %s\n", m, width, i+1, lines[i])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ansiRE matches terminal escape sequences (colours, cursor moves).
var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)`)

// terminal shows the last terminal command and the tails of its output.
func (g *gatherer) terminal(t *TerminalOutput, what string) []part {
	if t == nil {
		g.notef("the client sent no terminal output (%s)", what)
		return nil
	}
	title := "Terminal output"
	if t.Command != "" {
		title += " of `" + truncate(oneLine(t.Command), 200) + "`"
	}
	var facts []string
	if t.ExitCode != nil {
		facts = append(facts, fmt.Sprintf("exit code %d", *t.ExitCode))
	}
	if t.Timestamp != "" {
		facts = append(facts, "at "+truncate(oneLine(t.Timestamp), 40))
	}
	if len(facts) > 0 {
		title += " (" + strings.Join(facts, ", ") + ")"
	}
	stdout := capTail(ansiRE.ReplaceAllString(t.Stdout, ""), maxStdoutBytes)
	stderr := capTail(ansiRE.ReplaceAllString(t.Stderr, ""), maxStderrBytes)
	var body string
	switch {
	case stdout != "" && stderr != "":
		body = stdout + "\n[stderr:]\n" + stderr
	case stderr != "":
		body = "[stderr:]\n" + stderr
	case stdout != "":
		body = stdout
	default:
		body = "[no output]"
	}
	return []part{{title: title, body: body, code: true}}
}

// git shows the client's view of the repository and the workspace's diff.
func (g *gatherer) git(gc *GitContext) []part {
	var parts []part
	if gc != nil {
		var b strings.Builder
		if gc.Branch != "" {
			fmt.Fprintf(&b, "Branch: %s\n", truncate(oneLine(gc.Branch), 200))
		}
		list := func(name string, files []string) {
			if len(files) == 0 {
				return
			}
			shown := make([]string, 0, min(len(files), maxGitFiles))
			for _, f := range files[:min(len(files), maxGitFiles)] {
				shown = append(shown, g.display(f))
			}
			fmt.Fprintf(&b, "%s: %s", name, strings.Join(shown, ", "))
			if len(files) > maxGitFiles {
				fmt.Fprintf(&b, " [and %d more]", len(files)-maxGitFiles)
			}
			b.WriteString("\n")
		}
		list("Staged", gc.StagedFiles)
		list("Modified", gc.ModifiedFiles)
		for i, c := range gc.RecentCommits {
			if i == maxGitCommits {
				break
			}
			fmt.Fprintf(&b, "Commit %s: %s", truncate(oneLine(c.SHA), 12), truncate(oneLine(c.Message), 200))
			if c.Author != "" {
				fmt.Fprintf(&b, " (%s)", truncate(oneLine(c.Author), 60))
			}
			b.WriteString("\n")
		}
		if b.Len() > 0 {
			parts = append(parts, part{title: "Git state (from the editor)", body: strings.TrimSuffix(b.String(), "\n")})
		}
	}
	diff, note := gitDiff(g.ctx, g.root)
	if note != "" {
		parts = append(parts, part{title: "git diff", body: note})
	} else {
		parts = append(parts, part{title: "git diff HEAD (uncommitted changes to tracked files)", body: diff, code: true, lang: "diff"})
	}
	return parts
}

// gitDiff runs `git diff HEAD` in root (restricted to it with --relative,
// within gitTimeout, without external diff programs, text conversion or
// the fsmonitor hook; clean filters such as git-lfs still run, as in any
// git diff) and returns the diff, capped at maxGitDiffBytes, or a one-line
// note saying why there is none (git missing, not a repository, no
// changes, a failure). Before the first commit it shows what is staged.
func gitDiff(ctx context.Context, root string) (diff, note string) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return "", "git is not installed on the server, so there is no diff."
	}
	run := func(args ...string) (*capWriter, string, error) {
		ctx, cancel := context.WithTimeout(ctx, gitTimeout)
		defer cancel()
		sub := args[0]
		args = append([]string{"--no-pager", "-c", "core.fsmonitor=false", "-c", "core.quotepath=false"}, args...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = root
		cmd.Env = gitEnv()
		out, errOut := &capWriter{limit: maxGitDiffBytes}, &capWriter{limit: 1 << 10}
		cmd.Stdout, cmd.Stderr = out, errOut
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("git %s did not finish within %s", sub, gitTimeout)
		}
		return out, strings.TrimSpace(string(errOut.buf)), err
	}
	diffArgs := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--relative"}
	_, stderr, err := run("rev-parse", "--verify", "--quiet", "HEAD")
	var exit *exec.ExitError
	switch {
	case err == nil:
		diffArgs = append(diffArgs, "HEAD", "--")
	case strings.Contains(stderr, "not a git repository"):
		return "", "The workspace is not a git repository, so there is no diff."
	case errors.As(err, &exit) && exit.ExitCode() == 1 && stderr == "":
		diffArgs = append(diffArgs, "--cached", "--") // no commit yet: what is staged
	default:
		return "", "git failed, so there is no diff: " + firstLine(stderr, err)
	}
	out, stderr, err := run(diffArgs...)
	if err != nil {
		return "", "git diff failed: " + firstLine(stderr, err)
	}
	if out.n == 0 {
		return "", "No uncommitted changes to tracked files."
	}
	d := string(out.buf)
	if out.n > len(out.buf) {
		if i := strings.LastIndexByte(d, '\n'); i > 0 {
			d = d[:i] // diff lines end in a newline; no rune is split
		}
		d += fmt.Sprintf("\n[… cut: %d of %d bytes shown]", len(d), out.n)
	}
	return d, ""
}

// gitEnv is the environment of git: the server's without GIT_* variables
// (which could point git elsewhere), never prompting, taking no optional
// locks.
func gitEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GIT_") })
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}

func firstLine(stderr string, err error) string {
	if stderr == "" {
		return err.Error()
	}
	l, _, _ := strings.Cut(stderr, "\n")
	return truncate(l, 300)
}

// capWriter keeps the first limit bytes written to it and counts all.
type capWriter struct {
	limit int
	buf   []byte
	n     int
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if room := w.limit - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// tests gathers the active file and its tests, or its source when it is
// a test itself (/test).
func (g *gatherer) tests(active *fileText) []part {
	if active == nil {
		return nil
	}
	lang := fenceLang(active.rel, "")
	tests, sources, inFile := testConvention(active.rel)
	var parts []part
	switch {
	case len(sources) > 0:
		parts = append(parts, part{title: "Test file (active) " + active.rel, body: capHead(string(active.data), maxTestFileBytes), code: true, lang: lang})
		for _, s := range sources {
			if f, err := g.read(s); err == nil {
				return append(parts, part{title: "Source file " + f.rel, body: capHead(string(f.data), maxSourceBytes), code: true, lang: lang})
			}
		}
		return append(parts, part{title: "Source file", body: "Not found (looked for: " + strings.Join(sources, ", ") + ")."})
	case inFile:
		return []part{{title: "Source file (active) " + active.rel + "; its unit tests live in the file itself (#[cfg(test)] mod tests)", body: capHead(string(active.data), maxSourceBytes), code: true, lang: lang}}
	}
	parts = append(parts, part{title: "Source file (active) " + active.rel, body: capHead(string(active.data), maxSourceBytes), code: true, lang: lang})
	if len(tests) == 0 {
		return append(parts, part{title: "Test files", body: fmt.Sprintf("No test naming convention is known for %q files.", path.Ext(active.rel))})
	}
	found := 0
	for _, t := range tests {
		if found == maxTestFiles {
			break
		}
		f, err := g.read(t)
		if err != nil {
			continue
		}
		found++
		parts = append(parts, part{title: "Test file " + f.rel, body: capHead(string(f.data), maxTestFileBytes), code: true, lang: lang})
	}
	if found == 0 {
		parts = append(parts, part{title: "Test files", body: "None yet (looked for: " + strings.Join(tests, ", ") + ")."})
	}
	return parts
}

// scope shows the function or block around the cursor at line (0-based),
// for /explain with an empty selection.
func (g *gatherer) scope(f *fileText, family string, line int) part {
	lines := f.lines()
	line = min(max(line, 0), max(len(lines)-1, 0))
	start, end, how, ok := g.indexScope(f, lines, line)
	if !ok {
		if start, end, ok = heuristicScope(lines, line, family); ok {
			how = "found by braces"
			if family == langPython {
				how = "found by indentation"
			}
		}
	}
	if !ok {
		start, end, how = max(line-scopeWindowLines, 0), min(line+scopeWindowLines, len(lines)-1), "no enclosing function found; the lines around the cursor"
	}
	if len(lines) == 0 {
		return part{title: "Code around the cursor in " + f.rel, body: "The file is empty."}
	}
	return part{title: fmt.Sprintf("Code around the cursor: %s, lines %d-%d (%s)", f.rel, start+1, end+1, how),
		body: capHead(strings.Join(lines[start:end+1], "\n"), maxScopeBytes), code: true, lang: fenceLang(f.rel, "")}
}

// wordRE matches identifiers worth a chunk query.
var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]+`)

// indexScope asks the code index for the smallest chunk of f holding line
// (0-based): a chunk query of the words on the line (or the nearest line
// above with words), restricted to the file.
func (g *gatherer) indexScope(f *fileText, lines []string, line int) (start, end int, how string, ok bool) {
	if g.search == nil || len(lines) == 0 {
		return 0, 0, "", false
	}
	var words []string
	for l := line; l >= 0 && len(words) == 0; l-- {
		words = wordRE.FindAllString(lines[l], 8)
	}
	if len(words) == 0 {
		return 0, 0, "", false
	}
	hits, err := g.search.SearchChunks(g.ctx, g.root, ChunkQuery{Query: strings.Join(words, " "), Path: f.rel, Limit: 20})
	if err != nil {
		return 0, 0, "", false
	}
	best := -1
	for i, h := range hits {
		if h.Path != f.rel || h.StartLine-1 > line || h.EndLine-1 < line || h.EndLine > len(lines) {
			continue
		}
		if best < 0 || h.EndLine-h.StartLine < hits[best].EndLine-hits[best].StartLine {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, "", false
	}
	h := hits[best]
	how = "the code index's chunk"
	if h.Name != "" {
		how += fmt.Sprintf(" for %s %s", h.Kind, h.Name)
	}
	return h.StartLine - 1, h.EndLine - 1, how, true
}

// heuristicScope is braceScope, or indentScope for Python.
func heuristicScope(lines []string, line int, family string) (start, end int, ok bool) {
	if family == langPython {
		return indentScope(lines, line)
	}
	return braceScope(lines, line)
}

// imports lists the workspace files the active file imports, with the
// beginning of the first few (/refactor).
func (g *gatherer) imports(f *fileText, family string) []part {
	specs := parseImports(family, f.data)
	if family != langGo && family != langJS && family != langPython {
		return []part{{title: "Imports", body: "Not parsed for this language; read the file's import lines."}}
	}
	var mod goModule
	if family == langGo {
		mod = g.goModule(path.Dir(f.rel))
	}
	var listed []string
	var files []string
	for _, spec := range specs {
		for _, c := range importCandidates(family, f.rel, spec, mod) {
			if family == langGo {
				if names := g.goFiles(c); len(names) > 0 {
					listed = append(listed, fmt.Sprintf("- %q: package %s/ (%s)", spec, c, strings.Join(names, ", ")))
					break
				}
				continue
			}
			if g.isFile(c) {
				listed = append(listed, fmt.Sprintf("- %q: %s", spec, c))
				files = append(files, c)
				break
			}
		}
	}
	if len(listed) == 0 {
		return []part{{title: "Workspace files it imports", body: "None found."}}
	}
	if len(listed) > maxImportsListed {
		listed = append(listed[:maxImportsListed], fmt.Sprintf("[… %d more]", len(listed)-maxImportsListed))
	}
	parts := []part{{title: "Workspace files it imports", body: strings.Join(listed, "\n")}}
	for i, c := range files {
		if i == maxImportFiles {
			break
		}
		if imp, err := g.read(c); err == nil {
			parts = append(parts, part{title: "Imported file " + imp.rel + " (beginning)", body: capHead(string(imp.data), maxImportBytes), code: true, lang: fenceLang(imp.rel, "")})
		}
	}
	return parts
}

// goModule is the Go module holding the workspace directory dir: the
// nearest go.mod at or above it inside the workspace; zero when none.
func (g *gatherer) goModule(dir string) goModule {
	if m, ok := g.mods[dir]; ok {
		return m
	}
	var m goModule
	if f, err := g.read(path.Join(dir, "go.mod")); err == nil {
		if p := modulePath(f.data); p != "" {
			m = goModule{dir: dir, path: p}
		}
	} else if dir != "." && dir != "" {
		m = g.goModule(path.Dir(dir))
	}
	g.mods[dir] = m
	return m
}

// goFiles lists the non-test Go files of the workspace directory dir.
func (g *gatherer) goFiles(dir string) []string {
	_, real, err := g.resolve(dir)
	if err != nil {
		return nil
	}
	d, err := g.fsys.Open(filepath.FromSlash(real))
	if err != nil {
		return nil
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// dependents lists the workspace files that import the active file (for
// Go, its package), or for other languages name it (/refactor).
func (g *gatherer) dependents(f *fileText, family string) part {
	dir, base := path.Split(f.rel)
	dir = path.Clean(dir)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "index" || stem == "__init__" {
		stem = path.Base(dir)
	}
	var mod goModule
	var q TextQuery
	var fileOK func(string) bool
	switch family {
	case langGo:
		mod = g.goModule(dir)
		if mod.path == "" {
			return part{title: "Dependents", body: "Not searched: the file is in no Go module of the workspace."}
		}
		q = TextQuery{Pattern: `"` + mod.importPath(dir) + `"`, Include: "*.go"}
		fileOK = func(p string) bool { return strings.HasSuffix(p, ".go") && path.Dir(p) != dir }
	case langJS:
		q = TextQuery{Pattern: stem}
		fileOK = func(p string) bool { return isJSExt(path.Ext(p)) }
	case langPython:
		q = TextQuery{Pattern: stem, Include: "*.py"}
		fileOK = func(p string) bool { return strings.HasSuffix(p, ".py") }
	default:
		q = TextQuery{Pattern: `\b` + regexp.QuoteMeta(stem) + `\b`, Regex: true}
		if ext != "" {
			q.Include = "*" + ext
		}
		fileOK = func(p string) bool { return path.Ext(p) == ext }
	}
	if stem == "" || stem == "." {
		return part{title: "Dependents", body: "Not searched: the file has no name to look for."}
	}
	confirm := func(p string, data []byte) (string, bool) {
		if p == f.rel || !fileOK(p) {
			return "", false
		}
		if family == langOther || family == langJava || family == langRust {
			for i, l := range strings.Split(string(data), "\n") {
				if wordMatch(l, stem) {
					return fmt.Sprintf("- %s:%d: %s", p, i+1, truncate(strings.TrimSpace(l), 160)), true
				}
			}
			return "", false
		}
		want := f.rel
		if family == langGo {
			want = dir
		}
		for _, spec := range parseImports(family, data) {
			if slices.Contains(importCandidates(family, p, spec, mod), want) {
				return fmt.Sprintf("- %s (imports %q)", p, spec), true
			}
		}
		return "", false
	}

	var deps []string
	how, complete, searched := "a walk of the workspace", true, false
	if g.search != nil {
		q.Limit = 500
		res, err := g.search.SearchText(g.ctx, g.root, q, nil)
		if err == nil {
			how, complete, searched = "the code index", !res.Truncated, true
			seen := map[string]bool{}
			for _, m := range res.Matches {
				if seen[m.Path] || len(deps) == maxDependents {
					continue
				}
				seen[m.Path] = true
				if c, err := g.read(m.Path); err == nil {
					if line, ok := confirm(c.rel, c.data); ok {
						deps = append(deps, line)
					}
				}
			}
		} else {
			g.notef("the code index could not search for dependents (%v); the workspace was walked instead", err)
		}
	}
	if !searched {
		deps, complete = g.walkDependents(fileOK, confirm)
	}
	title := fmt.Sprintf("Dependents of %s (found by %s)", f.rel, how)
	if len(deps) == 0 {
		return part{title: title, body: "None found."}
	}
	body := strings.Join(deps, "\n")
	if len(deps) == maxDependents {
		body += fmt.Sprintf("\n[stopped at %d]", maxDependents)
	} else if !complete {
		body += "\n[the search was cut short; there may be more]"
	}
	return part{title: title, body: body}
}

// wordMatch reports whether word occurs in line as a whole identifier.
func wordMatch(line, word string) bool {
	isIdent := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for i := 0; ; {
		j := strings.Index(line[i:], word)
		if j < 0 {
			return false
		}
		j += i
		if (j == 0 || !isIdent(line[j-1])) && (j+len(word) == len(line) || !isIdent(line[j+len(word)])) {
			return true
		}
		i = j + 1
	}
}

// skipDirs are directories a walk for dependents does not enter, besides
// hidden ones.
var skipDirs = map[string]bool{"node_modules": true, "vendor": true, "target": true, "dist": true, "build": true, "__pycache__": true, "venv": true}

// walkDependents walks the workspace (no symlinks, no hidden or vendored
// directories, at most maxWalkFiles candidate files) for files that
// confirm accepts. complete is false when the walk stopped early.
func (g *gatherer) walkDependents(fileOK func(string) bool, confirm func(string, []byte) (string, bool)) (deps []string, complete bool) {
	visited := 0
	errStop := errors.New("stop")
	err := filepath.WalkDir(g.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if g.ctx.Err() != nil {
			return errStop
		}
		rel, _ := filepath.Rel(g.root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || skipDirs[d.Name()]) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !fileOK(rel) {
			return nil
		}
		if visited == maxWalkFiles || len(deps) == maxDependents {
			return errStop
		}
		visited++
		f, err := g.fsys.Open(filepath.FromSlash(rel))
		if err != nil {
			return nil
		}
		data, _ := io.ReadAll(io.LimitReader(f, maxImportScan))
		f.Close()
		if line, ok := confirm(rel, data); ok {
			deps = append(deps, line)
		}
		return nil
	})
	return deps, err == nil
}

// openEditors lists the open editors by path, marking unsaved ones.
func (g *gatherer) openEditors(open []OpenEditor) (part, bool) {
	if len(open) == 0 {
		return part{}, false
	}
	var b strings.Builder
	for i, o := range open {
		if i == maxOpenEditors {
			fmt.Fprintf(&b, "[… %d more]\n", len(open)-maxOpenEditors)
			break
		}
		b.WriteString("- " + g.display(o.FilePath))
		if o.IsDirty {
			b.WriteString(" (unsaved changes)")
		}
		b.WriteString("\n")
	}
	return part{title: "Open editors", body: strings.TrimSuffix(b.String(), "\n")}, true
}

// fileText is a workspace file read for the context.
type fileText struct {
	rel  string // workspace-relative, slash-separated
	data []byte
	ls   []string
}

// lines are the file's lines without their line ends.
func (f *fileText) lines() []string {
	if f.ls == nil {
		s := strings.TrimSuffix(string(f.data), "\n")
		f.ls = strings.Split(s, "\n")
		for i, l := range f.ls {
			f.ls[i] = strings.TrimSuffix(l, "\r")
		}
		if len(f.data) == 0 {
			f.ls = []string{}
		}
	}
	return f.ls
}

// escapeError is a path refused for leaving the workspace; it matches
// ErrPermissionDenied.
type escapeError struct {
	path   string
	reason string
}

func (e *escapeError) Error() string {
	return fmt.Sprintf("%q %s the workspace; it was not read", e.path, e.reason)
}

func (e *escapeError) Is(target error) bool { return target == ErrPermissionDenied }

// display is p as the section shows it: workspace-relative when it lies
// in the workspace (judged by its text only), else cleaned.
func (g *gatherer) display(p string) string {
	q := filepath.Clean(filepath.FromSlash(p))
	if filepath.IsAbs(q) {
		if rel, err := filepath.Rel(g.root, q); err == nil && !escapes(rel) {
			q = rel
		}
	}
	return truncate(oneLine(filepath.ToSlash(q)), 300)
}

func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolve confines p (relative to the root, or absolute inside it) to the
// workspace. shown is its clean relative form; real is the same file with
// symlinks resolved (realPath), for opening through the os.Root. Errors:
// *escapeError for a path that climbs out, lies outside or leads out
// through a symlink; a not-found error.
func (g *gatherer) resolve(p string) (shown, real string, err error) {
	if p == "" {
		return "", "", errors.New("no path was given")
	}
	if strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("%w: path %q contains a NUL byte", ErrInvalidRequest, p)
	}
	q := filepath.FromSlash(p)
	if filepath.IsAbs(q) {
		rel, err := filepath.Rel(g.root, filepath.Clean(q))
		if err != nil || escapes(rel) {
			return "", "", &escapeError{path: p, reason: "is outside"}
		}
		q = rel
	}
	q = filepath.Clean(q)
	if escapes(q) {
		return "", "", &escapeError{path: p, reason: "climbs out of"}
	}
	shown = filepath.ToSlash(q)
	if real = realPath(g.root, shown); real == "" {
		if _, err := os.Lstat(filepath.Join(g.root, q)); errors.Is(err, fs.ErrNotExist) {
			return shown, "", fmt.Errorf("%s does not exist: %w", shown, ErrNotFound)
		}
		return shown, "", &escapeError{path: p, reason: "leads (through a symlink) outside"}
	}
	return shown, real, nil
}

// read reads a workspace file named by the client, confined to the
// workspace; refused paths are remembered for the turn's error event.
// Errors name the path and the reason (refused, missing, a directory,
// binary, larger than maxReadBytes).
func (g *gatherer) read(p string) (*fileText, error) {
	shown, real, err := g.resolve(p)
	if err != nil {
		if _, ok := errors.AsType[*escapeError](err); ok {
			g.refused = append(g.refused, truncate(p, 200))
		}
		return nil, err
	}
	f, err := g.fsys.Open(filepath.FromSlash(real))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist: %w", shown, ErrNotFound)
		}
		return nil, fmt.Errorf("read %s: %w", shown, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", shown)
	}
	if fi.Size() > maxReadBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", shown, maxReadBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if len(data) > maxReadBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", shown, maxReadBytes>>20)
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return nil, fmt.Errorf("%s is binary", shown)
	}
	return &fileText{rel: shown, data: data}, nil
}

// isFile reports whether the workspace path p is a regular file inside the
// workspace.
func (g *gatherer) isFile(p string) bool {
	_, real, err := g.resolve(p)
	if err != nil {
		return false
	}
	fi, err := g.fsys.Stat(filepath.FromSlash(real))
	return err == nil && fi.Mode().IsRegular()
}

// fenceLang is the language tag of a code fence for the file rel.
func fenceLang(rel, languageID string) string {
	if languageID != "" && !strings.ContainsAny(languageID, "` \n") {
		return languageID
	}
	ext := strings.TrimPrefix(path.Ext(rel), ".")
	if strings.ContainsAny(ext, "` \n") {
		return ""
	}
	return ext
}

// oneLine replaces line ends with spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// capHead cuts s to at most n bytes (at a line end when one is in the
// second half), marking the cut.
func capHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	for len(cut) > 0 && !utf8.RuneStart(s[len(cut)]) {
		cut = cut[:len(cut)-1]
	}
	if i := strings.LastIndexByte(cut, '\n'); i > n/2 {
		cut = cut[:i]
	}
	return cut + fmt.Sprintf("\n[… cut: %d of %d bytes shown]", len(cut), len(s))
}

// capTail keeps the last n bytes of s (from a line start when one is in
// the first half), marking the cut.
func capTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	if i := strings.IndexByte(s[start:], '\n'); i >= 0 && i < n/2 {
		start += i + 1
	}
	return fmt.Sprintf("[… %d earlier bytes cut]\n", start) + s[start:]
}

// fence returns a code fence longer than any run of backticks in body.
func fence(body string) string {
	longest, run := 0, 0
	for i := 0; i < len(body); i++ {
		if body[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// contextHeader opens the section.
const contextHeader = "\n\n## Editor context\nGathered from the user's editor. Paths are relative to the workspace; line numbers are 1-based.\n"

func (p part) render(body string) string {
	if !p.code {
		return "\n### " + p.title + "\n" + body + "\n"
	}
	body = strings.TrimSuffix(body, "\n")
	f := fence(body)
	return "\n### " + p.title + "\n" + f + p.lang + "\n" + body + "\n" + f + "\n"
}

// renderContext lays the parts out in order within budget bytes: the part
// that does not fit is cut (when enough room is left to be worth it) and
// the rest are named as left out. The notes come last, capped at
// maxNotesBytes.
func renderContext(parts []part, notes []string, budget int) string {
	var nb strings.Builder
	if len(notes) > 0 {
		nb.WriteString("\n### Notes\n")
		for _, n := range notes {
			nb.WriteString("- " + n + "\n")
		}
	}
	notesText := capHead(nb.String(), maxNotesBytes-64)
	var b strings.Builder
	b.WriteString(contextHeader)
	avail := budget - len(contextHeader) - len(notesText) - budgetReserve
	var left []string
	for i, p := range parts {
		s := p.render(p.body)
		if len(s) <= avail {
			b.WriteString(s)
			avail -= len(s)
			continue
		}
		const marker = "[cut: the context budget is spent]\n"
		room := avail - len(p.render("")) - len(marker) - 64
		if room >= 256 {
			b.WriteString(p.render(capHead(p.body, room)) + marker)
		} else {
			left = append(left, p.title)
		}
		for _, q := range parts[i+1:] {
			left = append(left, q.title)
		}
		break
	}
	if len(left) > 0 {
		s := fmt.Sprintf("\n[left out, the context budget of %d KiB being spent: %s]", budget>>10, strings.Join(left, "; "))
		b.WriteString(truncate(s, budgetReserve-8) + "\n")
	}
	b.WriteString(notesText)
	return b.String()
}
