package fs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"syscall"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/engine"
	"github.com/plexus-agent/plexus/engine/workspace"
	"github.com/plexus-agent/plexus/tools/internal/toolkit"
)

// ReadResult is the content of a read_file result.
type ReadResult struct {
	// Path is the file, workspace-relative with slashes.
	Path string `json:"path"`
	// Content is lines StartLine to EndLine verbatim, line endings
	// included (in JSON, bytes that are not valid UTF-8 become U+FFFD).
	Content string `json:"content"`
	// StartLine and EndLine are the 1-based inclusive range in Content;
	// both 0 for an empty file.
	StartLine int `json:"start_line"`
	EndLine   int `json:"end_line"`
	// TotalLines counts the file's lines (a last line without a newline
	// counts).
	TotalLines int `json:"total_lines"`
	// Truncated is true when Content stops before the requested range
	// (or the end of the file) because of the line or byte limit; the
	// last line is cut only when a single line exceeds the byte limit.
	Truncated bool `json:"truncated"`
	// Pending is true when the content is an earlier call's proposed edit
	// of this model response, not (yet) what is on disk.
	Pending bool `json:"pending,omitempty"`
}

type readArgs struct {
	Path      *string `json:"path"`
	StartLine *int    `json:"start_line"`
	EndLine   *int    `json:"end_line"`
}

func (t *Tools) readFile(ctx context.Context, root *workspace.Root, ov overlay, raw []byte) (engine.ToolResult, error) {
	const tool = ReadFileTool
	var a readArgs
	if err := toolkit.DecodeArgs(tool, raw, t.fields[tool], &a); err != nil {
		return engine.ToolResult{}, err
	}
	if a.Path == nil || *a.Path == "" {
		return engine.ToolResult{}, toolkit.Missing(tool, "path", "the file to read, relative to the workspace root")
	}
	start, end := 1, 0 // end 0: to the end of the file
	if a.StartLine != nil {
		if *a.StartLine < 1 {
			return engine.ToolResult{}, toolkit.Invalid(tool, "start_line", "must be at least 1 (lines are numbered from 1), not %d", *a.StartLine)
		}
		start = *a.StartLine
	}
	if a.EndLine != nil {
		if *a.EndLine < start {
			return engine.ToolResult{}, toolkit.Invalid(tool, "end_line", "(%d) must not be less than start_line (%d)", *a.EndLine, start)
		}
		end = *a.EndLine
	}
	p, err := t.resolve(tool, root, *a.Path)
	if err != nil {
		return engine.ToolResult{}, err
	}
	var src io.Reader
	pending, isPending := ov.get(p)
	switch {
	case isPending && pending.Deleted:
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeNotFound, "%s: %s does not exist for this call: an earlier call of this response proposed deleting it", tool, p.show)
	case isPending:
		src = bytes.NewReader(pending.Content)
	default:
		f, exists, err := openRegular(tool, root, ov, p)
		if err != nil {
			return engine.ToolResult{}, err
		}
		if !exists {
			return engine.ToolResult{}, pathError(tool, root, p.given, iofs.ErrNotExist)
		}
		defer f.Close()
		src = f
	}

	res, err := t.readLines(ctx, src, start, end)
	if err != nil {
		if ctx.Err() != nil {
			return engine.ToolResult{}, toolkit.CtxError(tool, ctx.Err())
		}
		var te *engine.ToolError
		if errors.As(err, &te) {
			te.Message = fmt.Sprintf("%s: %s %s", tool, p.show, te.Message)
			return engine.ToolResult{}, te
		}
		return engine.ToolResult{}, engine.ToolErrorf(engine.ToolCodeFailed, "%s: reading %s failed: %v", tool, p.show, err)
	}
	res.Path = p.show
	res.Pending = isPending
	if res.TotalLines > 0 && start > res.TotalLines {
		return engine.ToolResult{}, toolkit.Invalid(tool, "start_line", "(%d) is past the end of %s, which has %d lines", start, p.show, res.TotalLines)
	}
	if res.TotalLines == 0 && start > 1 {
		return engine.ToolResult{}, toolkit.Invalid(tool, "start_line", "(%d) is past the end of %s, which is empty", start, p.show)
	}
	return engine.JSONResult(res, res.summary())
}

// openRegular opens a resolved path on disk for reading and checks that it
// is a regular file; exists is false (and f nil) when nothing is there.
// It opens non-blocking, so a FIFO swapped in cannot hang the call. A path
// that does not exist but has pending files below it is a directory.
// Errors are *engine.ToolError.
func openRegular(tool string, root *workspace.Root, ov overlay, p resolved) (f *os.File, exists bool, err error) {
	f, err = root.FS().OpenFile(p.real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && len(ov.filesUnder(p.file())) > 0:
		return nil, false, isDirError(tool, p)
	case errors.Is(err, iofs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, pathError(tool, root, p.given, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, pathError(tool, root, p.given, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, false, isDirError(tool, p)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, false, engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is not a regular file (%s)", tool, p.show, fileType(fi.Mode()))
	}
	return f, true, nil
}

// isDirError is the error for a directory given where a file is wanted.
func isDirError(tool string, p resolved) error {
	return engine.ToolErrorf(engine.ToolCodeInvalidInput, "%s: %s is a directory, not a file; use list_files to see what is in it", tool, p.show)
}

// fileType names the type of a non-regular file.
func fileType(m iofs.FileMode) string {
	switch {
	case m&iofs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&iofs.ModeSocket != 0:
		return "a socket"
	case m&iofs.ModeDevice != 0:
		return "a device"
	case m&iofs.ModeSymlink != 0:
		return "a symlink"
	}
	return "mode " + m.String()
}

// readLines reads f and returns lines start..end (end 0: to the end of the
// file) within the Options' limits, and the total number of lines. A
// binary file is an *engine.ToolError whose message continues the file's
// name.
func (t *Tools) readLines(ctx context.Context, f io.Reader, start, end int) (ReadResult, error) {
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(binarySniffBytes)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return ReadResult{}, err
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return ReadResult{}, &engine.ToolError{Code: engine.ToolCodeInvalidInput, Message: "is a binary file (it has a NUL byte near the start); read_file only returns text"}
	}
	last := start + t.opts.MaxReadLines - 1 // last line we may return
	if end > 0 {
		last = min(last, end)
	}
	var (
		content  bytes.Buffer
		cur      []byte // the current line, while it is in range
		curOver  bool   // cur was cut at MaxReadBytes + UTFMax
		line     int    // number of the current line (lines seen so far)
		first    int    // first line in content
		lastIn   int    // last line in content
		stop     bool   // the byte limit is reached; take no more lines
		cut      bool   // a single line longer than the limit was cut
		atStart  = true
		maxBytes = t.opts.MaxReadBytes
	)
	finish := func() {
		if line < start || line > last || stop {
			return
		}
		switch {
		case !curOver && content.Len()+len(cur) <= maxBytes:
			content.Write(cur)
		case content.Len() == 0:
			content.Write(cutUTF8(cur, maxBytes))
			cut, stop = true, true
		default:
			stop = true
			return
		}
		if first == 0 {
			first = line
		}
		lastIn = line
	}
	for chunks := 0; ; chunks++ {
		if chunks%64 == 0 {
			if err := ctx.Err(); err != nil {
				return ReadResult{}, err
			}
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if atStart {
				line++
				cur, curOver, atStart = cur[:0], false, false
			}
			if line >= start && line <= last && !stop && !curOver {
				// Keep up to UTFMax bytes past the limit, so that a cut
				// can find the rune boundary.
				if room := maxBytes + utf8.UTFMax - len(cur); len(chunk) <= room {
					cur = append(cur, chunk...)
				} else {
					cur = append(cur, chunk[:room]...)
					curOver = true
				}
			}
			if chunk[len(chunk)-1] == '\n' {
				finish()
				atStart = true
			}
		}
		if err == io.EOF {
			if !atStart {
				finish()
			}
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return ReadResult{}, err
		}
	}
	res := ReadResult{Content: content.String(), StartLine: first, EndLine: lastIn, TotalLines: line}
	want := line
	if end > 0 {
		want = min(end, line)
	}
	res.Truncated = cut || lastIn < want
	return res, nil
}

// cutUTF8 returns b cut to at most n bytes, not inside a UTF-8 sequence.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

// lines describes the lines read.
func (r ReadResult) lines() string {
	switch {
	case r.TotalLines == 0:
		return fmt.Sprintf("%s is empty", r.Path)
	case r.StartLine == 1 && r.EndLine == r.TotalLines && !r.Truncated:
		return fmt.Sprintf("%s of %s (1-%d)", plural(r.TotalLines, "line", "lines"), r.Path, r.EndLine)
	}
	s := fmt.Sprintf("%s of %s (%d-%d of %d)", plural(r.EndLine-r.StartLine+1, "line", "lines"), r.Path, r.StartLine, r.EndLine, r.TotalLines)
	if r.Truncated {
		s += ", truncated"
	}
	return s
}

func (r ReadResult) summary() string {
	s := r.lines()
	if r.Pending {
		s += " (pending edit)"
	}
	return s
}

// plural formats n with the singular or plural noun: "1 line", "3 lines".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
