package receipts

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// The example of RFC 8785 section 3.2.2 (and Appendix's README of the
// reference implementation): whitespace, number forms and escapes.
func TestCanonicalizeRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 section 3.2.3: member names sort by UTF-16 code units, so
// U+1F600 (surrogates D83D DE00) sorts before U+FB33.
func TestCanonicalizeSortsByUTF16(t *testing.T) {
	in := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",` +
		`"1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis",` +
		`"€":"Euro Sign","😀":"Emoji: Grinning Face","דּ":"Hebrew Letter Dalet With Dagesh"}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their serialisation.
func TestCanonicalNumbersAppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		if got := string(appendNumber(nil, f)); got != tt.want {
			t.Errorf("%#016x: got %s, want %s", tt.bits, got, tt.want)
		}
		// And through the parser: Go's shortest form of f reads back as f.
		in, _ := json.Marshal(f)
		got, err := Canonicalize(in)
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, tt.want)
		}
	}
}

func TestCanonicalizeForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{` { "b" : 1 , "a" : [ 1 , 2 ] } `, `{"a":[1,2],"b":1}`},
		{`{"a":{"d":1,"c":{}}}`, `{"a":{"c":{},"d":1}}`},
		{`[]`, `[]`},
		{`"<>&\u2028"`, "\"<>&\u2028\""},
		{`"\u001f\b\f\t\n\r\u007f"`, `"\u001f\b\f\t\n\r` + "\x7f" + `"`},
		{`-0.0`, `0`},
		{`1E2`, `100`},
		{`1e-7`, `1e-7`},
		{`123456789012345678901234567890`, `1.2345678901234568e+29`},
		{`9007199254740993`, `9007199254740992`},
		{`1e-400`, `0`},
		{`0.1`, `0.1`},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"duplicate", `{"a":1,"a":2}`},
		{"duplicate nested", `[{"x":1,"y":2,"x":3}]`},
		{"trailing data", `{} {}`},
		{"trailing comma", `[1,]`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00x"`},
		{"high then not low", `"\ud800\u0041"`},
		{"invalid utf-8", "\"\xff\""},
		{"utf-8 surrogate", "\"\xed\xa0\x80\""},
		{"raw control", "\"a\tb\""},
		{"bad escape", `"\x"`},
		{"leading zero", `01`},
		{"plus sign", `+1`},
		{"bare dot", `1.`},
		{"hex", `0x10`},
		{"inf", `Infinity`},
		{"out of range", `1e400`},
		{"negative out of range", `-1e309`},
		{"single quote", `'a'`},
		{"unterminated", `{"a":"b`},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)},
		{"literal", `tru`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("got %s, %v; want ErrInvalidJSON", got, err)
			}
		})
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if _, err := Canonicalize([]byte(deep)); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
}

func TestArgsDigest(t *testing.T) {
	a, err := ArgsDigest([]byte(`{"path": "a.go", "opts": {"n": 1.0, "all": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ArgsDigest([]byte(`{"opts":{"all":true,"n":1},"path":"a.go"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("equal arguments digest differently: %s, %s", a, b)
	}
	// The digest is SHA-256 of the canonical text.
	if want := Digest([]byte(`{"opts":{"all":true,"n":1},"path":"a.go"}`)); a != want {
		t.Errorf("got %s, want %s", a, want)
	}
	if want := "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; Digest(nil) != want {
		t.Errorf("Digest(nil) = %s, want %s", Digest(nil), want)
	}
	c, _ := ArgsDigest([]byte(`{"opts":{"all":true,"n":2},"path":"a.go"}`))
	if c == a {
		t.Error("different arguments share a digest")
	}
	if _, err := ArgsDigest(nil); !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("empty args: %v, want ErrInvalidJSON", err)
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "a", -1},
		{"a", "ab", -1},
		{"b", "ab", 1},
		{"\uffff", "\U00010000", 1}, // U+FFFF > D800
		{"\ud7ff", "\U00010000", -1},
		{"\U00010000", "\U0010FFFF", -1},
		{"\U0001F600", "\U0001F601", -1}, // same high surrogate
		{"\U0001F600", "\ufb33", -1},
	}
	for _, tt := range tests {
		if got := compareUTF16(tt.a, tt.b); got != tt.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareUTF16(tt.b, tt.a); got != -tt.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
