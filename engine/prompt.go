package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

const defaultSystemPrompt = `You are Plexus, a coding agent working in the repository at {{workspace}}. Every path you pass to a tool is relative to that directory.

- Look before you answer: use list_files, search_text and read_file to find the code the request is about, and name the files and lines you relied on.
- For a task of more than one step, first call update_plan with numbered steps and the files each involves.
- Change files or run commands only when the request calls for it. Such tools need the user's approval and may be denied; then say what you would have done.
- Keep the final answer short and concrete.`

func (e *Engine) systemPrompt(root string) string {
	p := e.opts.SystemPrompt
	if p == "" {
		p = defaultSystemPrompt
	}
	return strings.ReplaceAll(p, "{{workspace}}", root)
}

// userContent is the user message followed by the editor context section
// (see gatherContext; "" when the turn has none) and its attachments. Text
// attachments are read (up to MaxAttachmentBytes each); binary ones and
// unreadable ones are named with the reason they were left out.
func (t *turn) userContent(in TurnInput, editorContext string) string {
	if len(in.Attachments) == 0 {
		return in.Message + editorContext
	}
	var b strings.Builder
	b.WriteString(in.Message)
	b.WriteString(editorContext)
	for _, a := range in.Attachments {
		path := a.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(t.s.workspace.Root, path)
		}
		text, note := readAttachment(path, a.MIME, t.e.opts.MaxAttachmentBytes)
		if note != "" {
			t.emit(&ErrorEvent{Code: CodeInternal, Message: fmt.Sprintf("attachment %s: %s", a.Path, note), Recoverable: true})
			fmt.Fprintf(&b, "\n\n[attachment %s (%s) not included: %s]", a.Path, a.MIME, note)
			continue
		}
		fmt.Fprintf(&b, "\n\nAttached file %s (%s):\n```\n%s\n```", a.Path, a.MIME, text)
	}
	return b.String()
}

func readAttachment(path, mime string, limit int) (text, note string) {
	f, err := os.Open(path)
	if err != nil {
		return "", err.Error()
	}
	defer f.Close()
	buf := make([]byte, limit+1)
	n, _ := f.Read(buf)
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	data := buf[:n]
	if bytes.IndexByte(data, 0) >= 0 || (!utf8.Valid(data) && !strings.HasPrefix(mime, "text/")) {
		return "", "binary content cannot be given to the model"
	}
	if len(data) > limit {
		return truncate(string(data[:limit]), limit) + fmt.Sprintf("\n[cut at %d bytes]", limit), ""
	}
	return string(data), ""
}
