package receipts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects Canonicalize accepts.
const maxDepth = 1000

// Canonicalize returns the canonical form of the JSON text data as RFC 8785
// (JSON Canonicalization Scheme, JCS) defines it: no whitespace between
// tokens; object members sorted by their names compared as sequences of
// UTF-16 code units; strings with only `"`, `\` and the control characters
// U+0000 to U+001F escaped (as \b \t \n \f \r where those exist, otherwise
// \u00xx in lower-case hex) and everything else written as UTF-8; numbers
// read as IEEE 754 doubles and written the way ECMAScript's
// Number.prototype.toString writes them (so 1.50 is 1.5, 1E2 is 100, 1e21 is
// 1e+21, -0 is 0).
//
// Because numbers are doubles, integers beyond ±2^53 and decimals with more
// than about 17 significant digits are rounded, exactly as JavaScript rounds
// them: two such numbers that round to the same double canonicalise (and
// digest) alike. Pass values that need more precision as strings.
//
// The input must be one JSON value (surrounding whitespace allowed) in valid
// UTF-8, with no duplicate member names, no unpaired surrogate escapes, no
// number whose magnitude exceeds the largest double, and at most 1000 levels
// of nesting; otherwise the error wraps ErrInvalidJSON and names the byte
// offset.
func Canonicalize(data []byte) ([]byte, error) {
	p := parser{data: data}
	p.skipSpace()
	out, err := p.value(nil)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("data after the JSON value")
	}
	return out, nil
}

// ArgsDigest returns "sha256:" followed by the lower-case hex SHA-256 of
// Canonicalize(args): the args_digest of a receipt for a tool call whose
// arguments are the JSON text args. Two argument objects that differ only in
// member order, whitespace or number spelling have the same digest. The
// error wraps ErrInvalidJSON when args is not valid JSON (an empty args is
// invalid; pass {} for no arguments).
func ArgsDigest(args []byte) (string, error) {
	c, err := Canonicalize(args)
	if err != nil {
		return "", fmt.Errorf("args digest: %w", err)
	}
	return Digest(c), nil
}

// Digest returns "sha256:" followed by the 64 lower-case hex digits of the
// SHA-256 of b, the form of every digest in a receipt (args_digest,
// diff_hash, prev, hash). For a diff_hash, b is the unified diff as applied.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

const digestPrefix = "sha256:"

// validDigest reports whether s is "sha256:" and 64 lower-case hex digits.
func validDigest(s string) bool {
	if len(s) != len(digestPrefix)+64 || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for _, c := range []byte(s[len(digestPrefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// member is one name/value pair of an object, the value already in
// canonical form.
type member struct {
	name  string
	value []byte
}

// parseObject parses data, which must be one JSON object, and returns its
// members with canonical values, sorted as RFC 8785 sorts them.
func parseObject(data []byte) ([]member, error) {
	p := parser{data: data}
	p.skipSpace()
	if p.pos >= len(p.data) || p.data[p.pos] != '{' {
		return nil, p.errorf("not a JSON object")
	}
	members, err := p.members()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("data after the JSON value")
	}
	return members, nil
}

// appendObject appends the canonical encoding of an object with the given
// members (already sorted) to dst, leaving out the members named in skip.
func appendObject(dst []byte, members []member, skip ...string) []byte {
	dst = append(dst, '{')
	first := true
	for _, m := range members {
		if slices.Contains(skip, m.name) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}')
}

// parser is a strict RFC 8259 parser that emits the RFC 8785 form of what it
// reads.
type parser struct {
	data  []byte
	pos   int
	depth int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrInvalidJSON, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at p.pos and appends its canonical form to dst.
func (p *parser) value(dst []byte) ([]byte, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		members, err := p.members()
		if err != nil {
			return nil, err
		}
		return appendObject(dst, members), nil
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(dst, s), nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number(dst)
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	default:
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *parser) literal(dst []byte, lit string) ([]byte, error) {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return nil, p.errorf("invalid literal")
	}
	p.pos += len(lit)
	return append(dst, lit...), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested deeper than %d levels", maxDepth)
	}
	return nil
}

// members parses the object at p.pos ('{') and returns its members sorted.
func (p *parser) members() ([]member, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	var members []member
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return members, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected a member name")
		}
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(nil)
		if err != nil {
			return nil, err
		}
		members = append(members, member{name: name, value: v})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] != '}' {
			return nil, p.errorf("expected ',' or '}'")
		}
		p.pos++
		break
	}
	p.depth--
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if members[i].name == members[i-1].name {
			return nil, p.errorf("duplicate member name %q", members[i].name)
		}
	}
	return members, nil
}

func (p *parser) array(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return append(dst, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		p.skipSpace()
		var err error
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in array")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] != ']' {
			return nil, p.errorf("expected ',' or ']'")
		}
		p.pos++
		p.depth--
		return append(dst, ']'), nil
	}
}

// str parses the string at p.pos ('"') and returns its decoded value.
func (p *parser) str() (string, error) {
	p.pos++ // '"'
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", p.errorf("string is not valid UTF-8")
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", p.errorf("string is not valid UTF-8")
			}
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character %#02x in string", c)
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.data) {
			break
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			switch {
			case 0xDC00 <= r && r <= 0xDFFF:
				return "", p.errorf("unpaired surrogate \\u%04x", r)
			case 0xD800 <= r && r <= 0xDBFF:
				if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.errorf("unpaired surrogate \\u%04x", r)
				}
				p.pos += 2
				lo, err := p.hex4()
				if err != nil {
					return "", err
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return "", p.errorf("unpaired surrogate \\u%04x", r)
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if len(p.data)-p.pos < 4 {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// number parses the number at p.pos, checking the RFC 8259 grammar (which
// strconv.ParseFloat alone does not: it takes hex, "inf", underscores).
func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	f, err := strconv.ParseFloat(string(p.data[start:p.pos]), 64)
	if err != nil && math.IsInf(f, 0) {
		return nil, p.errorf("number %s is out of the range of a double", p.data[start:p.pos])
	}
	return appendNumber(dst, f), nil
}

// appendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (ECMA-262 Number::toString, which RFC 8785 section 3.2.2.3 adopts). f
// must be finite.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest digits that round-trip, as "d.ddde±x".
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := slices.Index(s, 'e')
	digits := make([]byte, 0, ePos)
	for _, c := range s[:ePos] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	exp, _ := strconv.Atoi(string(s[ePos+1:]))
	k, n := len(digits), exp+1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendString appends s as an RFC 8785 string literal. s must be valid
// UTF-8.
func appendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	return append(dst, '"')
}

// compareUTF16 compares a and b (valid UTF-8) as sequences of UTF-16 code
// units, the order RFC 8785 section 3.2.3 sorts member names in. It differs
// from byte (code point) order only between a character in U+E000..U+FFFF
// and one above U+FFFF: the latter is written with surrogates (U+D800..
// U+DFFF) and so sorts first.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpUnit(firstUnit(ra), firstUnit(rb), ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

func cmpUnit(ua, ub, ra, rb rune) int {
	if ua == ub { // both above U+FFFF with the same high surrogate
		ua, ub = ra, rb // the low surrogates order as the code points do
	}
	if ua < ub {
		return -1
	}
	return 1
}
