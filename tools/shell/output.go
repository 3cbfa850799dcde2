package shell

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// capture collects one output stream of a command: it keeps the first limit
// bytes, counts the rest, and emits the kept bytes as valid UTF-8 chunks as
// they arrive. A capture is used by one goroutine at a time.
type capture struct {
	stream string
	limit  int
	emit   func(stream, text string)

	buf     []byte // kept bytes, at most limit
	sent    int    // buf[:sent] has been emitted
	full    bool   // bytes were dropped; buf is final
	dropped int64  // bytes read but not kept
	total   int64  // bytes read
	lines   int64  // newlines read
	last    byte   // last byte read
}

func newCapture(stream string, limit int, emit func(stream, text string)) *capture {
	return &capture{stream: stream, limit: limit, emit: emit, buf: make([]byte, 0, min(limit, 32<<10))}
}

// write takes the next bytes the command wrote. The kept part is emitted up
// to the last complete rune; an incomplete rune at the end waits for the
// next write (or finish).
func (c *capture) write(p []byte) {
	if len(p) == 0 {
		return
	}
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	c.last = p[len(p)-1]
	if c.full {
		c.dropped += int64(len(p))
		return
	}
	if room := c.limit - len(c.buf); len(p) > room {
		c.buf = append(c.buf, p[:room]...)
		c.dropped += int64(len(p) - room)
		// Cut a rune the cap split in two: keep only whole runes.
		k := incompleteTail(c.buf)
		c.buf = c.buf[:len(c.buf)-k]
		c.dropped += int64(k)
		c.full = true
		c.flush(len(c.buf))
		return
	}
	c.buf = append(c.buf, p...)
	c.flush(len(c.buf) - incompleteTail(c.buf))
}

// finish emits whatever is left at the end of the stream; an incomplete
// rune there is invalid and becomes U+FFFD.
func (c *capture) finish() { c.flush(len(c.buf)) }

func (c *capture) flush(end int) {
	if end > c.sent {
		c.emit(c.stream, validText(c.buf[c.sent:end]))
		c.sent = end
	}
}

// readFrom copies r into c until EOF or a read error (a closed pipe), then
// finishes c.
func (c *capture) readFrom(r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		c.write(b[:n])
		if err != nil {
			c.finish()
			return
		}
	}
}

// text is the kept output as valid UTF-8; it equals the concatenation of
// the emitted chunks.
func (c *capture) text() string { return validText(c.buf) }

// lineCount is the number of lines read, counting a last line without a
// newline.
func (c *capture) lineCount() int64 {
	if c.total > 0 && c.last != '\n' {
		return c.lines + 1
	}
	return c.lines
}

// incompleteTail returns the length of the incomplete UTF-8 sequence at the
// end of b: the start of a multi-byte rune whose remaining bytes have not
// arrived yet. Invalid bytes are complete (they decode as U+FFFD on their
// own).
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
	}
	return 0
}

// validText converts b to a string, replacing each byte that is not part of
// a valid UTF-8 sequence with U+FFFD. Unlike strings.ToValidUTF8 it does not
// merge runs of invalid bytes, so converting the pieces of b (cut at rune
// boundaries as incompleteTail finds them) gives the same text as
// converting b whole.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}
