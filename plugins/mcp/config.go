package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Transports a server can use, as ServerConfig.Transport reports them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// MaxServerNameLen is the longest server name accepted, in bytes; it
// leaves room for the tool name in the 64 bytes an engine tool name may
// have.
const MaxServerNameLen = 24

// serverName is what a server name may be (and it must not contain "__",
// the separator of engine tool names).
var serverName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Config is a decoded MCP configuration file.
type Config struct {
	// Servers by name.
	Servers map[string]ServerConfig
}

// ServerConfig is one entry of "mcpServers". Exactly one of Command (a
// stdio server) and URL (a streamable HTTP server) is set.
type ServerConfig struct {
	// Command is the executable of a stdio server, looked up on PATH when
	// it has no slash; Args its arguments.
	Command string
	Args    []string
	// Env is added to the engine's environment for a stdio server.
	Env map[string]string
	// Cwd is the working directory of a stdio server, absolute (a relative
	// "cwd" in the file is resolved against the file's directory); ""
	// means the engine's.
	Cwd string
	// URL is the endpoint of a streamable HTTP server (http or https).
	URL string
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string
	// Timeout bounds each tool call; 0 means Options.CallTimeout.
	Timeout time.Duration
}

// Transport is TransportStdio or TransportHTTP.
func (s ServerConfig) Transport() string {
	if s.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

// Target is the command line of a stdio server or the URL of an HTTP one,
// for people.
func (s ServerConfig) Target() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// ConfigError is a configuration file that cannot be used. Field is the
// JSON path of the offending value ("mcpServers.fs.args"), "" for the
// file as a whole.
type ConfigError struct {
	File  string
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	where := e.File
	if where == "" {
		where = "MCP config"
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", where, e.Msg)
}

// LoadConfig reads and decodes the configuration file at path (see
// ParseConfig). Relative "cwd" values are resolved against the file's
// directory. Errors are *ConfigError, or the read error.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read MCP config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(data, filepath.Dir(abs))
	var ce *ConfigError
	if errors.As(err, &ce) {
		ce.File = path
	}
	return cfg, err
}

// ParseConfig decodes a configuration file:
//
//	{"mcpServers": {
//	  "NAME": {"command": "npx", "args": ["..."], "env": {"K": "V"}, "cwd": "DIR", "timeout": "60s"},
//	  "NAME": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer ..."}, "timeout": "2m"}
//	}}
//
// An optional "type" ("stdio", or "http" / "streamable-http") must agree
// with command or url. Unknown keys, a server with both or neither of
// command and url, a bad name, URL or duration are errors (*ConfigError)
// naming the field. Relative "cwd" values are resolved against the current
// directory.
func ParseConfig(data []byte) (*Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return parseConfig(data, wd)
}

func parseConfig(data []byte, baseDir string) (*Config, error) {
	top, err := object(data, "")
	if err != nil {
		return nil, err
	}
	cfg := &Config{Servers: map[string]ServerConfig{}}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "mcpServers" {
			return nil, &ConfigError{Field: k, Msg: `unknown key (the file holds one object, "mcpServers")`}
		}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, &ConfigError{Msg: `no "mcpServers" object`}
	}
	servers, err := object(raw, "mcpServers")
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		field := "mcpServers." + name
		if err := checkServerName(name); err != nil {
			return nil, &ConfigError{Field: field, Msg: err.Error()}
		}
		s, err := parseServer(servers[name], field, baseDir)
		if err != nil {
			return nil, err
		}
		cfg.Servers[name] = s
	}
	return cfg, nil
}

func checkServerName(name string) error {
	switch {
	case !serverName.MatchString(name):
		return fmt.Errorf("bad server name %q: use lower-case letters, digits, '_' and '-', starting with a letter or digit", name)
	case len(name) > MaxServerNameLen:
		return fmt.Errorf("server name %q is longer than %d bytes", name, MaxServerNameLen)
	case strings.Contains(name, "__"):
		return fmt.Errorf(`server name %q contains "__", which separates server and tool in tool names`, name)
	}
	return nil
}

func parseServer(data []byte, field string, baseDir string) (ServerConfig, error) {
	var s ServerConfig
	m, err := object(data, field)
	if err != nil {
		return s, err
	}
	bad := func(key, format string, args ...any) error {
		return &ConfigError{Field: field + "." + key, Msg: fmt.Sprintf(format, args...)}
	}
	var typ, timeout string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		var err error
		switch k {
		case "type":
			err = decodeStrict(v, &typ)
		case "command":
			err = decodeStrict(v, &s.Command)
		case "args":
			err = decodeStrict(v, &s.Args)
		case "env":
			err = decodeStrict(v, &s.Env)
		case "cwd":
			err = decodeStrict(v, &s.Cwd)
		case "url":
			err = decodeStrict(v, &s.URL)
		case "headers":
			err = decodeStrict(v, &s.Headers)
		case "timeout":
			err = decodeStrict(v, &timeout)
		default:
			return s, bad(k, "unknown key (known: command, args, env, cwd, url, headers, timeout, type)")
		}
		if err != nil {
			return s, bad(k, "%v", err)
		}
	}
	switch {
	case s.Command != "" && s.URL != "":
		return s, &ConfigError{Field: field, Msg: `has both "command" (stdio) and "url" (HTTP); keep one`}
	case s.Command == "" && s.URL == "":
		return s, &ConfigError{Field: field, Msg: `needs "command" (a stdio server) or "url" (a streamable HTTP server)`}
	}
	switch typ {
	case "":
	case "stdio":
		if s.Command == "" {
			return s, bad("type", `"stdio" needs "command", not "url"`)
		}
	case "http", "streamable-http", "streamableHttp":
		if s.URL == "" {
			return s, bad("type", `%q needs "url", not "command"`, typ)
		}
	case "sse":
		return s, bad("type", `the deprecated HTTP+SSE transport is not supported; use the server's streamable HTTP endpoint`)
	default:
		return s, bad("type", `unknown transport %q (want "stdio" or "http")`, typ)
	}
	if s.URL != "" {
		for _, k := range []string{"args", "env", "cwd"} {
			if _, ok := m[k]; ok {
				return s, bad(k, `applies to stdio servers only, and this one has "url"`)
			}
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, bad("url", "%q is not an http:// or https:// URL", s.URL)
		}
		for h := range s.Headers {
			if h == "" || strings.ContainsAny(h, " \t\r\n:") {
				return s, bad("headers", "bad header name %q", h)
			}
		}
	} else {
		if _, ok := m["headers"]; ok {
			return s, bad("headers", `applies to HTTP servers only, and this one has "command"`)
		}
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return s, bad("env", "bad variable name %q", k)
			}
		}
		if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
			s.Cwd = filepath.Join(baseDir, s.Cwd)
		}
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return s, bad("timeout", "%q is not a positive duration such as \"60s\" or \"5m\"", timeout)
		}
		s.Timeout = d
	}
	return s, nil
}

// object decodes data as a JSON object, keeping each value raw.
func object(data []byte, field string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := decodeStrict(data, &m); err != nil || m == nil {
		msg := "want a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, &ConfigError{Field: field, Msg: msg}
	}
	return m, nil
}

// decodeStrict decodes one JSON value into v, refusing trailing data and
// type mismatches (with a message that does not repeat Go type names).
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("a JSON %s is not allowed here (want %s)", te.Value, jsonKind(v))
		}
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case *string:
		return "a string"
	case *[]string:
		return "an array of strings"
	case *map[string]string:
		return "an object of strings"
	}
	return "an object"
}
