package shell

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

type chunk struct{ stream, text string }

// feed writes the pieces into a capture of limit bytes and returns the
// capture and what it emitted.
func feed(limit int, pieces ...string) (*capture, []chunk) {
	var got []chunk
	c := newCapture("stdout", limit, func(stream, text string) { got = append(got, chunk{stream, text}) })
	for _, p := range pieces {
		c.write([]byte(p))
	}
	c.finish()
	return c, got
}

func TestCapture(t *testing.T) {
	tests := []struct {
		name        string
		limit       int
		pieces      []string
		wantChunks  []string
		wantText    string
		wantDropped int64
		wantLines   int64
	}{
		{"ascii", 100, []string{"hello\n", "world\n"}, []string{"hello\n", "world\n"}, "hello\nworld\n", 0, 2},
		{"last line without newline", 100, []string{"a\nb"}, []string{"a\nb"}, "a\nb", 0, 2},
		{"empty", 100, nil, nil, "", 0, 0},
		{"rune split across reads is held back", 100, []string{"x\xe2\x82", "\xacy"}, []string{"x", "€y"}, "x€y", 0, 1},
		{"rune split three ways", 100, []string{"\xf0", "\x9f\x98", "\x80"}, []string{"😀"}, "😀", 0, 1},
		{"invalid byte becomes U+FFFD", 100, []string{"a\xffb"}, []string{"a\uFFFDb"}, "a\uFFFDb", 0, 1},
		{"incomplete rune at end becomes U+FFFD", 100, []string{"a\xe2\x82"}, []string{"a", "\uFFFD\uFFFD"}, "a\uFFFD\uFFFD", 0, 1},
		{"each invalid byte is one U+FFFD", 100, []string{"\xff\xfe"}, []string{"\uFFFD\uFFFD"}, "\uFFFD\uFFFD", 0, 1},
		{"cap keeps the first bytes", 5, []string{"0123456789\n"}, []string{"01234"}, "01234", 6, 1},
		{"cap across writes", 5, []string{"012", "345", "678\n", "9\n"}, []string{"012", "34"}, "01234", 7, 2},
		{"exact fit drops nothing", 5, []string{"01234"}, []string{"01234"}, "01234", 0, 1},
		{"cap does not split a rune", 4, []string{"€€€"}, []string{"€"}, "€", 6, 1},
		{"cap after a held-back rune", 4, []string{"ab\xe2", "\x82\xacc"}, []string{"ab"}, "ab", 4, 1},
		{"lines counted past the cap", 2, []string{"a\nb\nc\nd\n"}, []string{"a\n"}, "a\n", 6, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, got := feed(tt.limit, tt.pieces...)
			var texts []string
			for _, ch := range got {
				if ch.stream != "stdout" {
					t.Errorf("stream = %q, want stdout", ch.stream)
				}
				texts = append(texts, ch.text)
			}
			if strings.Join(texts, "|") != strings.Join(tt.wantChunks, "|") || len(texts) != len(tt.wantChunks) {
				t.Errorf("chunks = %q, want %q", texts, tt.wantChunks)
			}
			if got := c.text(); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if c.dropped != tt.wantDropped {
				t.Errorf("dropped = %d, want %d", c.dropped, tt.wantDropped)
			}
			if got := c.lineCount(); got != tt.wantLines {
				t.Errorf("lines = %d, want %d", got, tt.wantLines)
			}
		})
	}
}

func TestIncompleteTail(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 0},
		{"a€", 0},
		{"a\xe2", 1},
		{"a\xe2\x82", 2},
		{"\xf0\x9f\x98", 3},
		{"\xf0\x9f\x98\x80", 0},
		{"a\xff", 0},        // invalid, complete on its own
		{"\x80\x80\x80", 0}, // stray continuation bytes
		{"\xe2A", 0},        // broken sequence followed by ASCII
	}
	for _, tt := range tests {
		if got := incompleteTail([]byte(tt.in)); got != tt.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// FuzzCapture checks the capture's invariants for any output cut into any
// reads: every chunk is valid UTF-8, the chunks concatenate to the result
// text, at most limit bytes are kept, kept plus dropped is everything read,
// and without a cap the text is the whole output.
func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), uint8(3), uint16(100))
	f.Add([]byte("€€€ 😀 \xff\xfe \xe2\x82"), uint8(1), uint16(5))
	f.Add([]byte("\xf0\x9f\x98\x80\xf0\x9f"), uint8(2), uint16(6))
	f.Fuzz(func(t *testing.T, data []byte, step uint8, limit uint16) {
		if limit == 0 {
			limit = 1
		}
		n := int(step%16) + 1
		var pieces []string
		for i := 0; i < len(data); i += n {
			pieces = append(pieces, string(data[i:min(i+n, len(data))]))
		}
		c, got := feed(int(limit), pieces...)
		var all strings.Builder
		for _, ch := range got {
			if !utf8.ValidString(ch.text) {
				t.Fatalf("chunk %q is not valid UTF-8", ch.text)
			}
			if ch.text == "" {
				t.Fatal("empty chunk emitted")
			}
			all.WriteString(ch.text)
		}
		if all.String() != c.text() {
			t.Fatalf("chunks %q != text %q", all.String(), c.text())
		}
		if len(c.buf) > int(limit) {
			t.Fatalf("kept %d bytes, limit %d", len(c.buf), limit)
		}
		if int64(len(c.buf))+c.dropped != int64(len(data)) {
			t.Fatalf("kept %d + dropped %d != read %d", len(c.buf), c.dropped, len(data))
		}
		if len(data) <= int(limit) && c.text() != validText(data) {
			t.Fatalf("text %q, want %q", c.text(), validText(data))
		}
	})
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"success", Result{ExitCode: 0, DurationMS: 1200, lines: 3}, "exit 0 in 1.2s, 3 lines of output"},
		{"one line", Result{ExitCode: 2, DurationMS: 35, lines: 1}, "exit 2 in 35ms, 1 line of output"},
		{"no output", Result{ExitCode: 0, DurationMS: 45000}, "exit 0 in 45s, no output"},
		{"timeout", Result{TimedOut: true, TimeoutSeconds: 60, ExitCode: 143, Signal: "SIGTERM", DurationMS: 60010, lines: 2},
			"timed out after 60s, 2 lines of output"},
		{"signal", Result{ExitCode: 137, Signal: "SIGKILL", DurationMS: 500}, "killed by SIGKILL after 500ms, no output"},
		{"truncated", Result{DurationMS: 2000, lines: 5000, StdoutTruncatedBytes: 3 << 20, StderrTruncatedBytes: 512 << 10},
			"exit 0 in 2.0s, 5000 lines of output (3.5 MiB past the limit dropped)"},
		{"background", Result{DurationMS: 10, lines: 1, BackgroundStopped: true}, "exit 0 in 10ms, 1 line of output; background processes stopped"},
		{"incomplete", Result{DurationMS: 10, OutputIncomplete: true}, "exit 0 in 10ms, no output; output incomplete (a detached process kept it open)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.summary(); got != tt.want {
				t.Errorf("summary = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	durations := []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"}, {999 * time.Millisecond, "999ms"}, {time.Second, "1.0s"}, {9940 * time.Millisecond, "9.9s"},
		{10 * time.Second, "10s"}, {119 * time.Second, "119s"}, {600 * time.Second, "10m0s"},
	}
	for _, tt := range durations {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
	sizes := []struct {
		n    int64
		want string
	}{
		{1, "1 byte"}, {1023, "1023 bytes"}, {1536, "1.5 KiB"}, {3 << 20, "3.0 MiB"},
	}
	for _, tt := range sizes {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
