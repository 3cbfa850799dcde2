package mcp

import "testing"

func TestPrintable(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"server 1.0", 80, "server 1.0"},
		{"evil\x1b[31m\tname\n 2.0 ", 80, "evil [31m name 2.0"},
		{" \t ", 80, ""},
		{"ééé", 5, "éé"},
	} {
		if got := printable(c.in, c.max); got != c.want {
			t.Errorf("printable(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
