package unixrpc

import (
	"fmt"
	"strconv"
	"strings"
)

// ProtocolVersion is the version of protocols/jsonrpc-unix-socket.md this
// package implements.
const ProtocolVersion = "1.0.0"

// semver is a MAJOR.MINOR.PATCH version.
type semver struct{ major, minor, patch int }

func (v semver) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

func (v semver) less(w semver) bool {
	if v.major != w.major {
		return v.major < w.major
	}
	if v.minor != w.minor {
		return v.minor < w.minor
	}
	return v.patch < w.patch
}

// parseVersion parses a semantic version: MAJOR.MINOR.PATCH with an
// optional pre-release (-rc.1) and build (+abc) suffix, which are ignored
// for negotiation. MINOR and PATCH may be left out ("1", "1.2").
func parseVersion(s string) (semver, error) {
	core := s
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if core == "" || len(parts) > 3 {
		return semver{}, fmt.Errorf("protocol_version %q is not a semantic version (MAJOR.MINOR.PATCH, like %s)", s, ProtocolVersion)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" || (len(p) > 1 && p[0] == '0') || p[0] == '+' {
			return semver{}, fmt.Errorf("protocol_version %q is not a semantic version (MAJOR.MINOR.PATCH, like %s)", s, ProtocolVersion)
		}
		n[i] = v
	}
	return semver{n[0], n[1], n[2]}, nil
}

// negotiate returns the protocol version a connection speaks when the
// client asks for client: the lower of the two versions when the major
// versions agree. A different major version is an error that names both.
func negotiate(client string) (string, error) {
	c, err := parseVersion(client)
	if err != nil {
		return "", err
	}
	s, _ := parseVersion(ProtocolVersion)
	if c.major != s.major {
		return "", fmt.Errorf("protocol_version %s is not supported: this server speaks %d.x (%s); major versions must match", client, s.major, ProtocolVersion)
	}
	if c.less(s) {
		return c.String(), nil
	}
	return s.String(), nil
}
