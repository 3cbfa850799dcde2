package ollama

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ParseHost parses a server address the way Ollama reads OLLAMA_HOST
// (github.com/ollama/ollama/envconfig.Host), into a base URL such as
// http://127.0.0.1:11434:
//
//   - the scheme is http unless given; "ollama.com" alone means
//     https://ollama.com:443;
//   - the port defaults to 11434 without a scheme, 80 for http:// and 443
//     for https://;
//   - an empty host is 127.0.0.1 (envconfig.Host leaves it empty, which
//     dials the local system too), and a path after the host is kept.
//
// Unlike envconfig.Host, which falls back to the default port, ParseHost
// returns an error for a port that is not a number from 0 to 65535 and for
// a scheme other than http or https.
func ParseHost(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	defaultPort := "11434"
	scheme, hostport, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		scheme, hostport = "http", s
		if s == "ollama.com" {
			scheme, hostport = "https", "ollama.com:443"
		}
	case scheme == "http":
		defaultPort = "80"
	case scheme == "https":
		defaultPort = "443"
	default:
		return nil, fmt.Errorf("%q: scheme %q is not http or https", s, scheme)
	}
	hostport, path, _ := strings.Cut(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = "127.0.0.1", defaultPort
		if ip := net.ParseIP(strings.Trim(hostport, "[]")); ip != nil {
			host = ip.String()
		} else if hostport != "" {
			host = hostport
		}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = defaultPort
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, port)
	}
	port = strconv.FormatUint(n, 10)
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: path}, nil
}
