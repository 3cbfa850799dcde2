package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-agent/plexus/engine"
)

func newRunCmd(g *globalFlags) *cobra.Command {
	var verbose bool
	var record string
	cmd := &cobra.Command{
		Use:   "run [flags] MESSAGE...",
		Short: "Run one agent turn on the workspace and stream it to the terminal",
		Long: `Run one agent turn: the model reads the workspace through tools and answers.

The answer streams to stdout as it is generated; tool calls (one line each,
with a summary of the result), the plan and the closing summary go to stderr,
so 'plexus run ... > answer.md' keeps only the answer. With no MESSAGE
arguments the message is read from stdin.

Tools that change files or run commands need approval: on a terminal you are
asked for each call; otherwise they are denied unless --approve-all is given.

--record FILE appends the model's responses to FILE as a replay script, so
the turn can be played again offline with --model replay:FILE (the tools
run again for real).`,
		Example: `  plexus run --model replay:examples/replay/tour.jsonl "Give me a tour of this repository"
  plexus run -w ~/src/app --model ollama:qwen2.5-coder:7b "Where is the HTTP router set up?"
  plexus run --model openai:gpt-4o-mini --approve-all "Run the tests and summarise failures"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg := strings.TrimSpace(strings.Join(args, " "))
			in := cmd.InOrStdin()
			tty := isTerminal(in)
			if msg == "" && !tty {
				b, err := io.ReadAll(in)
				if err != nil {
					return fmt.Errorf("read the message from stdin: %w", err)
				}
				msg = strings.TrimSpace(string(b))
			}
			if msg == "" {
				return usageErr("no message: pass it as arguments (plexus run \"explain main.go\") or on stdin")
			}
			var rec io.Writer
			if record != "" {
				f, err := os.OpenFile(record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return usageErr("--record: %v", err)
				}
				defer f.Close()
				rec = f
			}
			rt, err := newRuntime(g, cmd.ErrOrStderr(), true, rec)
			if err != nil {
				return err
			}
			defer rt.Close()
			sess, err := rt.engine.NewSession(rt.workspace, "")
			if err != nil {
				return err
			}
			r := &renderer{out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), verbose: verbose}
			opts := engine.TurnOptions{ApproveAll: g.approveAll, OnEvent: r.event}
			if !g.approveAll && tty {
				opts.Host = &terminalHost{in: bufio.NewReader(in), out: cmd.ErrOrStderr(), before: r.breakLine}
			}
			res, err := sess.Run(cmd.Context(), engine.TurnInput{Message: msg}, opts)
			if err != nil {
				return err
			}
			switch res.Status {
			case engine.TurnCompleted:
				return nil
			case engine.TurnCancelled:
				return &exitError{code: 130}
			}
			return &exitError{code: 1}
		},
	}
	cmd.Flags().BoolVar(&g.approveAll, "approve-all", false, "approve every call that needs approval (file writes, commands) without asking")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also show thinking, tool starts, progress and output")
	cmd.Flags().StringVar(&record, "record", "", "append the model's responses to this file as a replay script")
	return cmd
}

// isTerminal reports whether r is a character device (a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// renderer prints a turn's events for a person: tokens to out, everything
// else to errw, each tool call as one line with its result summary.
type renderer struct {
	out, errw io.Writer
	verbose   bool
	midLine   bool // out has text not ended by a newline
	lastErr   string
}

// breakLine ends a partial line of answer text before a status line.
func (r *renderer) breakLine() {
	if r.midLine {
		fmt.Fprintln(r.out)
		r.midLine = false
	}
}

func (r *renderer) status(format string, args ...any) {
	r.breakLine()
	fmt.Fprintf(r.errw, format+"\n", args...)
}

func (r *renderer) event(e engine.Event) {
	switch d := e.Data.(type) {
	case *engine.TokenEvent:
		io.WriteString(r.out, d.Text)
		if d.Text != "" {
			r.midLine = !strings.HasSuffix(d.Text, "\n")
		}
	case *engine.ThinkingEvent:
		if r.verbose {
			r.status("· %s: %s", d.Phase, d.Message)
		}
	case *engine.PlanEvent:
		var b strings.Builder
		b.WriteString("Plan:")
		for _, s := range d.Steps {
			fmt.Fprintf(&b, "\n  %d. %s", s.Number, s.Description)
			if len(s.FilesInvolved) > 0 {
				fmt.Fprintf(&b, " (%s)", strings.Join(s.FilesInvolved, ", "))
			}
		}
		r.status("%s", b.String())
	case *engine.RetrievalEvent:
		r.status("· %s: %s", d.Stage, d.Message)
	case *engine.PatchProposedEvent:
		if !d.RequiresApproval || r.verbose {
			// An approval shows the diffs itself.
			for _, f := range d.Set.Files {
				r.status("%s", strings.TrimRight(indent(f.Diff, "  "), "\n"))
			}
		}
	case *engine.PatchResultEvent:
		r.patchResult(d)
	case *engine.ToolCallEvent:
		r.toolCall(d)
	case *engine.ErrorEvent:
		switch {
		case !d.Recoverable:
			r.lastErr = d.Message
		case d.Code == engine.CodeInternal:
			r.status("warning: %s", d.Message)
		}
	case *engine.FinalEvent:
		r.final(d)
	}
}

func (r *renderer) toolCall(d *engine.ToolCallEvent) {
	call := strings.TrimSpace(d.Name + " " + formatArgs(d.Args))
	switch d.Status {
	case engine.ToolStarted:
		if r.verbose {
			r.status("→ %s", call)
		}
	case engine.ToolRunning:
		if !r.verbose || d.Update == nil {
			return
		}
		if p := d.Update.Progress; p != nil {
			r.status("  … %s%s", p.Message, timeLeft(d.Remaining))
		}
		if o := d.Update.Output; o != nil {
			r.status("  %s", strings.TrimRight(o.Text, "\n"))
		}
	case engine.ToolCompleted:
		r.status("✓ %s — %s (%s)", call, d.Summary, shortDuration(d.Duration))
	case engine.ToolFailed:
		r.status("✗ %s — %s", call, d.Error)
	case engine.ToolDenied:
		r.status("⊘ %s — %s", call, d.Error)
	}
}

func (r *renderer) patchResult(d *engine.PatchResultEvent) {
	switch d.Status {
	case engine.PatchApplied, engine.PatchPartiallyApplied:
		msg := "applied " + strings.Join(d.Applied, ", ")
		if len(d.Rejected) > 0 {
			msg += "; not applied: " + strings.Join(d.Rejected, ", ")
		}
		if d.AppliedID != "" {
			msg += " (undo: plexus undo " + d.AppliedID + ")"
		}
		r.status("✎ %s", msg)
	case engine.PatchRejected:
		r.status("⊘ changes to %s not applied — %s", strings.Join(d.Rejected, ", "), d.Reason)
	default:
		r.status("✗ changes not applied (%s) — %s", d.Status, d.Reason)
	}
}

func (r *renderer) final(d *engine.FinalEvent) {
	r.breakLine()
	md := d.Metadata
	facts := []string{string(d.Status)}
	if md.RetrievedSnippets > 0 {
		facts = append(facts, plural(md.RetrievedSnippets, "snippet")+" retrieved")
	}
	if md.ToolCalls > 0 {
		facts = append(facts, plural(md.ToolCalls, "tool call"))
	}
	if md.TokensUsed > 0 {
		facts = append(facts, fmt.Sprintf("%d tokens", md.TokensUsed))
	}
	facts = append(facts, md.Duration.Round(10*time.Millisecond).String(), md.Model)
	if len(md.FilesModified) > 0 {
		facts = append(facts, "modified "+strings.Join(md.FilesModified, ", "))
	}
	fmt.Fprintf(r.errw, "— %s\n", strings.Join(facts, " · "))
	if d.Status != engine.TurnCompleted {
		msg := d.Error
		if r.lastErr != "" && d.Status == engine.TurnError {
			msg = r.lastErr
		}
		fmt.Fprintf(r.errw, "plexus: %s\n", msg)
	}
}

// shortDuration rounds to milliseconds, showing "<1ms" rather than "0s".
// timeLeft is " (1m52s left)" for the time left before a tool call's
// deadline, in whole seconds; "" when unknown.
func timeLeft(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " (" + max(d.Truncate(time.Second), time.Second).String() + " left)"
}

func shortDuration(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// formatArgs renders a tool call's arguments compactly: key=value pairs in
// key order, long values cut.
func formatArgs(raw json.RawMessage) string {
	var args map[string]any
	if json.Unmarshal(raw, &args) != nil {
		return cut(string(raw), 80)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := args[k].(type) {
		case string:
			v = x
			if strings.ContainsAny(v, " \t\n\"") || v == "" {
				v = strconv.Quote(cut(v, 60)) // unlike JSON, keeps < > & readable
			}
		case []any:
			v = fmt.Sprintf("[%d items]", len(x))
		case map[string]any:
			v = "{…}"
		default:
			b, _ := json.Marshal(x)
			v = string(b)
		}
		parts = append(parts, k+"="+cut(v, 60))
	}
	return cut(strings.Join(parts, " "), 120)
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// terminalHost asks the person at the terminal to approve each call.
type terminalHost struct {
	in     *bufio.Reader
	out    io.Writer
	before func()
}

func (h *terminalHost) RequestApproval(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	h.before()
	if req.PatchSet != nil {
		return h.approvePatch(ctx, req)
	}
	fmt.Fprintf(h.out, "? Allow %s %s\n  risk %s: %s\n", req.Tool, formatArgs(req.Args), req.Risk.Level, strings.Join(req.Risk.Reasons, "; "))
	if req.Preview != nil {
		fmt.Fprintf(h.out, "  %s: %s\n", req.Preview.Type, req.Preview.Content)
	}
	a, err := h.ask(ctx, "  [y]es / [N]o: ")
	if err != nil {
		return engine.ApprovalDecision{}, err
	}
	switch a {
	case "y", "yes":
		return engine.ApprovalDecision{Approved: true, Reason: "approved at the terminal"}, nil
	case eofAnswer:
		return engine.ApprovalDecision{Reason: "no answer (end of input)"}, nil
	}
	return engine.ApprovalDecision{Reason: "the user denied it at the terminal"}, nil
}

// approvePatch shows each file's diff and asks for all, none, or file by
// file.
func (h *terminalHost) approvePatch(ctx context.Context, req engine.ApprovalRequest) (engine.ApprovalDecision, error) {
	set := req.PatchSet
	fmt.Fprintf(h.out, "? Apply %s (risk %s)\n", plural(len(set.Files), "changed file"), req.Risk.Level)
	if set.Rationale != "" {
		fmt.Fprintf(h.out, "  why: %s\n", cut(set.Rationale, 200))
	}
	for _, f := range set.Files {
		fmt.Fprint(h.out, indent(f.Diff, "  "))
	}
	prompt := "  [y]es / [N]o: "
	if len(set.Files) > 1 {
		prompt = "  [y]es, all / [n]o / [f]ile by file: "
	}
	a, err := h.ask(ctx, prompt)
	if err != nil {
		return engine.ApprovalDecision{}, err
	}
	switch {
	case a == "y" || a == "yes":
		return engine.ApprovalDecision{Approved: true, Scope: "all", Reason: "approved at the terminal"}, nil
	case (a == "f" || a == "file") && len(set.Files) > 1:
		var files []string
		for _, f := range set.Files {
			a, err := h.ask(ctx, fmt.Sprintf("  %s %s? [y/N]: ", f.Op, f.Path))
			if err != nil {
				return engine.ApprovalDecision{}, err
			}
			if a == "y" || a == "yes" {
				files = append(files, f.Path)
			}
		}
		if len(files) == 0 {
			return engine.ApprovalDecision{Reason: "the user declined every file at the terminal"}, nil
		}
		return engine.ApprovalDecision{Approved: true, Scope: "file", Files: files, Reason: "approved file by file at the terminal"}, nil
	case a == eofAnswer:
		return engine.ApprovalDecision{Reason: "no answer (end of input)"}, nil
	}
	return engine.ApprovalDecision{Reason: "the user declined the change at the terminal"}, nil
}

// eofAnswer stands for the end of input instead of an answer.
const eofAnswer = "\x00eof"

// ask prints prompt and reads one answer line (lower-cased, trimmed), or
// ctx's error.
func (h *terminalHost) ask(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(h.out, prompt)
	answer := make(chan string, 1)
	go func() {
		line, err := h.in.ReadString('\n')
		if err != nil && line == "" {
			line = eofAnswer
		}
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		if a == eofAnswer {
			fmt.Fprintln(h.out)
		}
		return a, nil
	case <-ctx.Done():
		fmt.Fprintln(h.out)
		return "", ctx.Err()
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	if !strings.HasSuffix(s, "\n") && s != "" {
		b.WriteString("\n")
	}
	return b.String()
}
