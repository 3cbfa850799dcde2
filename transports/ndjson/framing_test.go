package ndjson

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineReader(t *testing.T) {
	big := strings.Repeat("b", 100<<10) // longer than the reader's buffer
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // lines; "!N" is a too-long line of N bytes
	}{
		{name: "lines", input: "a\nbc\n", max: 10, want: []string{"a", "bc"}},
		{name: "last line without newline", input: "a\nbc", max: 10, want: []string{"a", "bc"}},
		{name: "crlf", input: "a\r\nbc\r\n", max: 10, want: []string{"a", "bc"}},
		{name: "lone cr at the end", input: "a\r", max: 10, want: []string{"a"}},
		{name: "blank lines kept", input: "\n\na\n", max: 10, want: []string{"", "", "a"}},
		{name: "empty input", input: "", max: 10, want: nil},
		{name: "exactly max", input: "abcd\nx\n", max: 4, want: []string{"abcd", "x"}},
		{name: "exactly max with crlf", input: "abcd\r\nx\n", max: 4, want: []string{"abcd", "x"}},
		{name: "one over max", input: "abcde\nx\n", max: 4, want: []string{"!5", "x"}},
		{name: "far over max", input: strings.Repeat("z", 1000) + "\nx", max: 4, want: []string{"!1000", "x"}},
		{name: "over max at the end", input: "x\nabcdef", max: 4, want: []string{"x", "!6"}},
		{name: "longer than the buffer", input: big + "\nx\n", max: 200 << 10, want: []string{big, "x"}},
		{name: "longer than the buffer and the cap", input: big + "\nx\n", max: 50 << 10, want: []string{"!102400", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			small := iotest.OneByteReader(strings.NewReader(tt.input))
			if len(tt.input) > 4096 {
				small = iotest.HalfReader(strings.NewReader(tt.input))
			}
			for _, r := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.input)},
				{"in small reads", small},
			} {
				lr := newLineReader(r.r, tt.max)
				var got []string
				for {
					line, err := lr.next()
					var tooLong *lineTooLongError
					if errors.As(err, &tooLong) {
						got = append(got, "!"+strconv.Itoa(tooLong.Bytes))
						if tooLong.Line != len(got) {
							t.Errorf("%s: too-long line numbered %d, want %d", r.name, tooLong.Line, len(got))
						}
						continue
					}
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("%s: %v", r.name, err)
					}
					got = append(got, string(line))
					if lr.n != len(got) {
						t.Errorf("%s: line number %d, want %d", r.name, lr.n, len(got))
					}
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
					t.Errorf("%s: got %d lines %.80q, want %d lines %.80q", r.name, len(got), got, len(tt.want), tt.want)
				}
			}
		})
	}
}

func TestLineReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	lr := newLineReader(io.MultiReader(strings.NewReader("a\npartial"), iotest.ErrReader(boom)), 100)
	line, err := lr.next()
	if err != nil || string(line) != "a" {
		t.Fatalf("first line: %q, %v", line, err)
	}
	if _, err := lr.next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

// flushWriter counts Flush calls.
type flushWriter struct {
	bytes.Buffer
	flushes int
}

func (f *flushWriter) Flush() error { f.flushes++; return nil }

func TestLineWriter(t *testing.T) {
	var w flushWriter
	var failed error
	lw := &lineWriter{w: &w, log: slog.New(slog.DiscardHandler), onFail: func(err error) { failed = err }}
	if err := lw.send(&tokenResponse{head: head{"token", "r<1>"}, Token: "a\nb <&> \u2028"}); err != nil {
		t.Fatal(err)
	}
	got := w.String()
	if !strings.HasPrefix(got, `{"type":"token","id":"r<1>","token":"a\nb <&> \u2028","timestamp":`) || !strings.HasSuffix(got, "}\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("line = %q", got)
	}
	if w.flushes != 1 {
		t.Errorf("flushes = %d, want 1", w.flushes)
	}
	if failed != nil {
		t.Errorf("onFail called: %v", failed)
	}
}

func TestLineWriterStopsAfterError(t *testing.T) {
	rec := newRecorder()
	rec.failAt = 2
	calls := 0
	lw := &lineWriter{w: rec, log: slog.New(slog.DiscardHandler), onFail: func(error) { calls++ }}
	if err := lw.send(newDone("1")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := lw.send(newDone("2")); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("err = %v, want %v", err, io.ErrClosedPipe)
		}
	}
	if calls != 1 {
		t.Errorf("onFail called %d times, want 1", calls)
	}
	if rec.writes != 2 {
		t.Errorf("%d writes, want 2 (none after the failure)", rec.writes)
	}
	if err := lw.failed(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("failed() = %v", err)
	}
}
