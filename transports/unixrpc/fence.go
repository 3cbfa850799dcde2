package unixrpc

import (
	"strings"
)

// maxFenceBytes caps one code block taken from the answer text.
const maxFenceBytes = 1 << 20

// fenceScanner finds Markdown fenced code blocks (``` or ~~~) in streamed
// assistant text, so each can go out as a stream.block as soon as its
// closing fence arrives.
type fenceScanner struct {
	partial strings.Builder // the current line so far
	open    bool
	marker  string // the opening fence's characters ("```", "~~~~")
	lang    string
	body    strings.Builder
}

// fenced is one code block found.
type fenced struct {
	lang, content string
	unterminated  bool
}

// feed adds text and returns the blocks it completed.
func (f *fenceScanner) feed(text string) []fenced {
	var out []fenced
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			f.partial.WriteString(text)
			break
		}
		f.partial.WriteString(text[:i])
		text = text[i+1:]
		line := f.partial.String()
		f.partial.Reset()
		if b, ok := f.line(line); ok {
			out = append(out, b)
		}
	}
	return out
}

// flush ends the text (a model reply ended): the partial line counts as a
// line, and a block still open is returned as unterminated.
func (f *fenceScanner) flush() []fenced {
	var out []fenced
	if f.partial.Len() > 0 {
		line := f.partial.String()
		f.partial.Reset()
		if b, ok := f.line(line); ok {
			out = append(out, b)
		}
	}
	if f.open {
		out = append(out, fenced{lang: f.lang, content: f.body.String(), unterminated: true})
		f.open = false
		f.body.Reset()
	}
	return out
}

// line processes one complete line.
func (f *fenceScanner) line(line string) (fenced, bool) {
	trimmed := strings.TrimSpace(strings.TrimSuffix(line, "\r"))
	if !f.open {
		if m := fenceMarker(trimmed); m != "" {
			f.open, f.marker = true, m
			f.lang = strings.ToLower(firstWord(strings.TrimSpace(trimmed[len(m):])))
			f.body.Reset()
		}
		return fenced{}, false
	}
	if m := fenceMarker(trimmed); m != "" && m[0] == f.marker[0] && len(m) >= len(f.marker) && len(trimmed) == len(m) {
		b := fenced{lang: f.lang, content: f.body.String()}
		f.open = false
		f.body.Reset()
		return b, true
	}
	if f.body.Len()+len(line) < maxFenceBytes {
		f.body.WriteString(line)
		f.body.WriteByte('\n')
	}
	return fenced{}, false
}

// fenceMarker returns the run of ` or ~ (at least three) s starts with.
func fenceMarker(s string) string {
	if len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return ""
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return s[:n]
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t{"); i >= 0 {
		return s[:i]
	}
	return s
}
