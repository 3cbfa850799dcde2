package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/plexus-agent/plexus/internal/testtree"

	"github.com/plexus-agent/plexus/engine"
)

func TestReadFile(t *testing.T) {
	ws := t.TempDir()
	var five strings.Builder
	for i := 1; i <= 5; i++ {
		five.WriteString("line " + string(rune('0'+i)) + "\n")
	}
	testtree.Write(t, ws, map[string]string{
		"five.txt":    five.String(),
		"empty.txt":   "",
		"nonl.txt":    "a\nb",
		"crlf.txt":    "a\r\nb\r\n",
		"dir/x.go":    "package x\n",
		"wide.txt":    "ab\n" + strings.Repeat("x", 30) + "\ncd\n",
		"utf8.txt":    strings.Repeat("é", 20) + "\n", // 40 bytes
		"binary.bin":  "PK\x03\x04\x00\x00rest",
		"late0.txt":   strings.Repeat("a", binarySniffBytes) + "\x00", // NUL after the sniffed part: text
		"README.md":   "# Title\n\nBody\n",
		"sp ace.txt":  "spaced\n",
		"dir/../x.md": "dotdot\n",
	})
	testtree.Symlink(t, "five.txt", filepath.Join(ws, "link.txt"))
	testtree.Symlink(t, filepath.Join(ws, "five.txt"), filepath.Join(ws, "abslink.txt"))
	unchangedAfter(t, ws)

	tests := []struct {
		name    string
		args    string
		opts    Options
		want    ReadResult
		summary string
	}{
		{name: "whole file", args: `{"path":"five.txt"}`,
			want:    ReadResult{Path: "five.txt", Content: five.String(), StartLine: 1, EndLine: 5, TotalLines: 5},
			summary: "5 lines of five.txt (1-5)"},
		{name: "range", args: `{"path":"five.txt","start_line":2,"end_line":3}`,
			want:    ReadResult{Path: "five.txt", Content: "line 2\nline 3\n", StartLine: 2, EndLine: 3, TotalLines: 5},
			summary: "2 lines of five.txt (2-3 of 5)"},
		{name: "from a line to the end", args: `{"path":"five.txt","start_line":5}`,
			want:    ReadResult{Path: "five.txt", Content: "line 5\n", StartLine: 5, EndLine: 5, TotalLines: 5},
			summary: "1 line of five.txt (5-5 of 5)"},
		{name: "end past the end is clamped", args: `{"path":"five.txt","start_line":4,"end_line":99}`,
			want: ReadResult{Path: "five.txt", Content: "line 4\nline 5\n", StartLine: 4, EndLine: 5, TotalLines: 5}},
		{name: "empty file", args: `{"path":"empty.txt"}`,
			want: ReadResult{Path: "empty.txt"}, summary: "empty.txt is empty"},
		{name: "no final newline", args: `{"path":"nonl.txt","start_line":2}`,
			want: ReadResult{Path: "nonl.txt", Content: "b", StartLine: 2, EndLine: 2, TotalLines: 2}},
		{name: "CRLF kept verbatim", args: `{"path":"crlf.txt"}`,
			want: ReadResult{Path: "crlf.txt", Content: "a\r\nb\r\n", StartLine: 1, EndLine: 2, TotalLines: 2}},
		{name: "line limit", args: `{"path":"five.txt"}`, opts: Options{MaxReadLines: 2},
			want:    ReadResult{Path: "five.txt", Content: "line 1\nline 2\n", StartLine: 1, EndLine: 2, TotalLines: 5, Truncated: true},
			summary: "2 lines of five.txt (1-2 of 5), truncated"},
		{name: "line limit from a start line", args: `{"path":"five.txt","start_line":3,"end_line":5}`, opts: Options{MaxReadLines: 2},
			want: ReadResult{Path: "five.txt", Content: "line 3\nline 4\n", StartLine: 3, EndLine: 4, TotalLines: 5, Truncated: true}},
		{name: "range within the line limit is not truncated", args: `{"path":"five.txt","end_line":2}`, opts: Options{MaxReadLines: 2},
			want: ReadResult{Path: "five.txt", Content: "line 1\nline 2\n", StartLine: 1, EndLine: 2, TotalLines: 5}},
		{name: "byte limit keeps whole lines", args: `{"path":"wide.txt"}`, opts: Options{MaxReadBytes: 20},
			want: ReadResult{Path: "wide.txt", Content: "ab\n", StartLine: 1, EndLine: 1, TotalLines: 3, Truncated: true}},
		{name: "a first line over the byte limit is cut", args: `{"path":"wide.txt","start_line":2}`, opts: Options{MaxReadBytes: 20},
			want: ReadResult{Path: "wide.txt", Content: strings.Repeat("x", 20), StartLine: 2, EndLine: 2, TotalLines: 3, Truncated: true}},
		{name: "cut on a rune boundary", args: `{"path":"utf8.txt"}`, opts: Options{MaxReadBytes: 7},
			want: ReadResult{Path: "utf8.txt", Content: "ééé", StartLine: 1, EndLine: 1, TotalLines: 1, Truncated: true}},
		{name: "NUL after the sniffed bytes is text", args: `{"path":"late0.txt"}`,
			want: ReadResult{Path: "late0.txt", Content: strings.Repeat("a", binarySniffBytes) + "\x00", StartLine: 1, EndLine: 1, TotalLines: 1}},
		{name: "through a symlink", args: `{"path":"link.txt","end_line":1}`,
			want: ReadResult{Path: "link.txt", Content: "line 1\n", StartLine: 1, EndLine: 1, TotalLines: 5}},
		{name: "through an absolute symlink inside", args: `{"path":"abslink.txt","end_line":1}`,
			want: ReadResult{Path: "abslink.txt", Content: "line 1\n", StartLine: 1, EndLine: 1, TotalLines: 5}},
		{name: "absolute path inside", args: `{"path":"` + filepath.Join(ws, "README.md") + `"}`,
			want: ReadResult{Path: "README.md", Content: "# Title\n\nBody\n", StartLine: 1, EndLine: 3, TotalLines: 3}},
		{name: "dotdot staying inside", args: `{"path":"dir/../README.md","end_line":1}`,
			want: ReadResult{Path: "README.md", Content: "# Title\n", StartLine: 1, EndLine: 1, TotalLines: 3}},
		{name: "space in the name", args: `{"path":"sp ace.txt"}`,
			want: ReadResult{Path: "sp ace.txt", Content: "spaced\n", StartLine: 1, EndLine: 1, TotalLines: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTools(t, tt.opts)
			var got ReadResult
			c := mustOK(t, tl, ws, ReadFileTool, tt.args, &got)
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if tt.summary != "" && c.res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", c.res.Summary, tt.summary)
			}
			if !utf8.ValidString(got.Content) {
				t.Errorf("content is not valid UTF-8")
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	ws := t.TempDir()
	testtree.Write(t, ws, map[string]string{
		"five.txt": "1\n2\n3\n4\n5\n", "empty.txt": "", "binary.bin": "PK\x03\x04\x00\x00rest", "dir/x": "x",
	})
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	tests := []struct {
		name  string
		args  string
		code  engine.ToolErrorCode
		parts []string
	}{
		{"start past the end", `{"path":"five.txt","start_line":6}`, engine.ToolCodeInvalidInput, []string{`"start_line"`, "past the end of five.txt", "5 lines"}},
		{"start past the end of an empty file", `{"path":"empty.txt","start_line":2}`, engine.ToolCodeInvalidInput, []string{"empty"}},
		{"binary", `{"path":"binary.bin"}`, engine.ToolCodeInvalidInput, []string{"binary.bin is a binary file"}},
		{"directory", `{"path":"dir"}`, engine.ToolCodeInvalidInput, []string{"dir is a directory", "list_files"}},
		{"FIFO", `{"path":"fifo"}`, engine.ToolCodeInvalidInput, []string{"not a regular file", "named pipe"}},
		{"missing", `{"path":"nope.txt"}`, engine.ToolCodeNotFound, []string{`"nope.txt" does not exist`, ws}},
		{"file used as a directory", `{"path":"five.txt/x"}`, engine.ToolCodeNotFound, []string{"five.txt is a file, not a directory"}},
		{"NUL byte", `{"path":"a\u0000b"}`, engine.ToolCodeInvalidInput, []string{"NUL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := invoke(context.Background(), tl, ws, ReadFileTool, tt.args)
			wantToolError(t, c.err, tt.code, tt.parts...)
		})
	}
}

// TestReadFileCancelled reads a large file with a context that is
// already cancelled once the read starts.
func TestReadFileCancelled(t *testing.T) {
	ws := t.TempDir()
	f, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 99) + "\n"
	for range 100000 { // 10 MB
		f.WriteString(line)
	}
	f.Close()
	unchangedAfter(t, ws)
	tl := newTools(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	tl.afterResolve = func(string) { cancel() }
	c := invoke(ctx, tl, ws, ReadFileTool, `{"path":"big.txt"}`)
	wantToolError(t, c.err, engine.ToolCodeCancelled)
}
