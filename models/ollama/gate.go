package ollama

import "strings"

// gate decides, as a reply streams in, which text may be forwarded at once
// and which must wait because it may be a tool call written as text. A
// reply whose start could be a whole-reply call ("{", "[{", a ```json
// fence, or a marker) is held until the end; other text streams, except
// from a marker (<tool_call>, [TOOL_CALLS], <function=, <|python_tag|>)
// on, and except a tail that may be the start of a marker. Its zero
// value passes everything; hold turns holding on.
type gate struct {
	hold    bool
	pending string
	mode    gateMode
}

type gateMode int

const (
	gateStart  gateMode = iota // nothing but white space yet
	gateStream                 // ordinary text
	gateHold                   // a possible tool call
)

// push takes the next piece of text and returns what may be forwarded now.
func (g *gate) push(s string) string {
	if !g.hold {
		return s
	}
	g.pending += s
	switch g.mode {
	case gateHold:
		return ""
	case gateStart:
		switch startOf(g.pending) {
		case startOpen:
			return ""
		case startCall:
			g.mode = gateHold
			return ""
		}
		g.mode = gateStream
	}
	if i, _ := firstMarker(g.pending); i >= 0 {
		out := g.pending[:i]
		g.pending = g.pending[i:]
		g.mode = gateHold
		return out
	}
	keep := partialMarker(g.pending)
	out := g.pending[:len(g.pending)-keep]
	g.pending = g.pending[len(g.pending)-keep:]
	return out
}

// flush returns the text held back and forgets it.
func (g *gate) flush() string {
	s := g.pending
	g.pending = ""
	return s
}

type start int

const (
	startOpen start = iota // could still become either
	startCall              // may be a tool call
	startText              // cannot be a whole-reply call
)

// fenceInfos are the info strings of a fence that may hold a call.
var fenceInfos = []string{"", "json", "tool_call", "tool_calls"}

// startOf classifies the beginning of a reply.
func startOf(text string) start {
	t := strings.TrimLeft(text, " \t\r\n")
	switch {
	case t == "":
		return startOpen
	case strings.HasPrefix(t, "{"):
		return startCall
	case strings.HasPrefix(t, fence):
		info, _, closed := strings.Cut(t[len(fence):], "\n")
		info = strings.ToLower(strings.TrimSpace(info))
		for _, ok := range fenceInfos {
			if closed && info == ok || !closed && strings.HasPrefix(ok, info) {
				if closed {
					return startCall
				}
				return startOpen
			}
		}
		return startText
	case strings.HasPrefix(fence, t):
		return startOpen
	case strings.HasPrefix(t, "["):
		rest := strings.TrimLeft(t[1:], " \t\r\n")
		if strings.HasPrefix(rest, "{") {
			return startCall
		}
		if rest == "" {
			return startOpen
		}
	}
	for _, m := range midMarkers {
		if strings.HasPrefix(t, m) {
			return startCall
		}
		if strings.HasPrefix(m, t) {
			return startOpen
		}
	}
	return startText
}

// partialMarker returns the length of the longest tail of s that is a
// proper prefix of a marker.
func partialMarker(s string) int {
	best := 0
	for _, m := range midMarkers {
		for k := min(len(m)-1, len(s)); k > best; k-- {
			if strings.HasSuffix(s, m[:k]) {
				best = k
				break
			}
		}
	}
	return best
}
