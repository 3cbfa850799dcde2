package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// tailWriter is a stdio server's stderr: each line is logged (level info,
// message "mcp server stderr") and the last few are kept for error
// messages. Safe for concurrent use.
type tailWriter struct {
	log *slog.Logger
	max int

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func newTailWriter(log *slog.Logger, max int) *tailWriter {
	return &tailWriter{log: log, max: max}
}

func (w *tailWriter) Write(p []byte) (int, error) {
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

func (w *tailWriter) addLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	w.log.Info("mcp server stderr", "line", line)
	w.lines = append(w.lines, line)
	if len(w.lines) > w.max {
		w.lines = w.lines[len(w.lines)-w.max:]
	}
}

// tail is the last lines written (and an unfinished one), joined by
// newlines and indented.
func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	if len(w.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(w.partial))
	}
	if len(lines) == 0 {
		return ""
	}
	return "  " + strings.Join(lines, "\n  ")
}

// reset forgets the lines of an earlier process.
func (w *tailWriter) reset() {
	w.mu.Lock()
	w.lines, w.partial = nil, nil
	w.mu.Unlock()
}
