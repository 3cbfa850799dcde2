// Package tail keeps the last lines written to a process's stderr, for the
// error messages of the plugin host and the MCP client: what a process
// printed before it failed is usually what says why.
package tail

import (
	"bytes"
	"strings"
	"sync"
)

// Writer keeps the last Max lines written to it (a line longer than 4 KiB
// is cut into 4 KiB pieces) and passes each complete line to OnLine when
// that is set. Safe for concurrent use.
type Writer struct {
	max    int
	onLine func(string)

	mu      sync.Mutex
	partial []byte
	lines   []string
}

// New returns a Writer keeping max lines; onLine may be nil.
func New(max int, onLine func(line string)) *Writer {
	return &Writer{max: max, onLine: onLine}
}

// Write never fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.addLocked(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 4096 { // a very long line: keep its start
		w.addLocked(string(w.partial))
		w.partial = nil
	}
	return len(p), nil
}

func (w *Writer) addLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	if w.onLine != nil {
		w.onLine(line)
	}
	w.lines = append(w.lines, line)
	if len(w.lines) > w.max {
		w.lines = w.lines[len(w.lines)-w.max:]
	}
}

// Lines returns the kept lines, then an unfinished one.
func (w *Writer) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := append([]string(nil), w.lines...)
	if len(w.partial) > 0 {
		lines = append(lines, string(w.partial))
	}
	return lines
}

// Indented is Lines joined by newlines, each indented by two spaces; ""
// when nothing was written.
func (w *Writer) Indented() string {
	lines := w.Lines()
	if len(lines) == 0 {
		return ""
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Reset forgets what was written (the lines of an earlier process).
func (w *Writer) Reset() {
	w.mu.Lock()
	w.lines, w.partial = nil, nil
	w.mu.Unlock()
}
