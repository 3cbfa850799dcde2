package ndjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// lineReader reads newline-terminated lines of at most max bytes (the
// newline and a "\r" before it not counted). A longer line is consumed
// without being kept and reported as *lineTooLongError.
type lineReader struct {
	r   *bufio.Reader
	max int
	n   int // number of the line returned last, from 1
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// lineTooLongError reports a line over the cap. The line has been consumed;
// reading can go on.
type lineTooLongError struct {
	Line  int // line number, from 1
	Bytes int // length of the line
	Max   int
}

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("line %d is %d bytes, over the limit of %d; skipped", e.Line, e.Bytes, e.Max)
}

// next returns the next line without its line ending. A last line without a
// newline is returned before io.EOF. Other read errors end reading; a partial
// line read before one is dropped.
func (lr *lineReader) next() ([]byte, error) {
	var line []byte
	size := 0
	tooLong := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		size += len(chunk)
		if !tooLong {
			// Keep at most max content bytes plus "\r\n".
			if len(line)+len(chunk) > lr.max+2 {
				tooLong = true
				line = nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !(errors.Is(err, io.EOF) && size > 0) {
			return nil, err
		}
		lr.n++
		newline := err == nil
		if tooLong {
			if newline {
				size--
			}
			return nil, &lineTooLongError{Line: lr.n, Bytes: size, Max: lr.max}
		}
		// A "\r" before the newline (or before the end of the input) is
		// part of the line ending.
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > lr.max {
			return nil, &lineTooLongError{Line: lr.n, Bytes: len(line), Max: lr.max}
		}
		return line, nil
	}
}

// message is one output line.
type message interface {
	// header is the message's type and request id ("" for ready).
	header() (typ, id string)
	// stamp sets the timestamp, Unix milliseconds.
	stamp(ms int64)
}

// lineWriter writes messages as whole lines, one at a time. After the first
// write error it writes nothing more and reports that error.
type lineWriter struct {
	log    *slog.Logger
	onFail func(error) // called once, with the first write error

	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
	err error
}

// send stamps m with the current time, encodes it and writes it with one
// Write call, then flushes w when it has a Flush method. It returns the
// writer's first error, if any.
func (lw *lineWriter) send(m message) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	m.stamp(time.Now().UnixMilli())
	lw.buf.Reset()
	enc := json.NewEncoder(&lw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		// Only a bug in this package can get here (every json.RawMessage
		// is validated before it is put into a message); drop the line.
		typ, id := m.header()
		lw.log.Error("encode response; line dropped", "type", typ, "id", id, "err", err)
		return nil
	}
	_, err := lw.w.Write(lw.buf.Bytes())
	if f, ok := lw.w.(interface{ Flush() error }); ok && err == nil {
		err = f.Flush()
	}
	if err != nil {
		lw.err = err
		lw.log.Error("write response; stopping", "err", err)
		lw.onFail(err)
		return err
	}
	return nil
}

// failed returns the first write error, or nil.
func (lw *lineWriter) failed() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}
