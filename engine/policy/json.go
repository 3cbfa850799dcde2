package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"
)

// maxDocumentBytes bounds a policy document.
const maxDocumentBytes = 16 << 20

// document is the JSON form of a Policy.
type document struct {
	Version  int             `json:"version"`
	Commands CommandSettings `json:"commands"`
	Rules    []Rule          `json:"rules"`
}

// MarshalJSON writes the policy document: version, commands (mode,
// sandbox, env) and rules, in order. Optional rule fields are left out
// when empty (paths, commands, changes_only, reason, created_at).
func (p *Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(document{Version: Version, Commands: p.Commands(), Rules: p.Rules()})
}

// UnmarshalJSON replaces p's settings and rules with the document in data,
// validated as Parse does; on error p is unchanged.
func (p *Policy) UnmarshalJSON(data []byte) error {
	q, err := Parse(data)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.commands, p.rules = q.commands, q.rules
	return nil
}

// Parse reads a policy document (see the package doc for the format) and
// validates it strictly: unknown or repeated fields, values of the wrong
// JSON type, unknown actions, sources and modes, bad globs, bad
// environment variable names, rules with both paths and commands, and
// duplicate rules are errors. The error joins up to 20 *ValidationError
// values, each naming the field ("rules[2].paths[0]: invalid glob: ...");
// errors.Is(err, ErrInvalidPolicy) holds. Optional fields may be null.
func Parse(data []byte) (*Policy, error) {
	var pr problems
	if len(data) > maxDocumentBytes {
		pr.add("", "the document is larger than %d bytes", maxDocumentBytes)
		return nil, pr.err()
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("not valid JSON")
		}
		pr.add("", "invalid JSON: %v", err)
		return nil, pr.err()
	}
	d := &decoder{pr: &pr}
	var commands CommandSettings
	var rules []Rule
	var unread []bool
	version := false
	d.object(data, "", func(key string, raw json.RawMessage, at string) {
		switch key {
		case "version":
			version = true
			if n, ok := d.integer(raw, at); ok && n != Version {
				pr.add(at, "unsupported version %d; this engine reads version %d", n, Version)
			}
		case "commands":
			commands = d.commands(raw, at)
		case "rules":
			rules, unread = d.rules(raw, at)
		default:
			pr.add(at, "unknown field (the document has version, commands and rules)")
		}
	})
	if !version && len(pr.errs) == 0 {
		pr.add("version", "is required: %d", Version)
	}
	// Check what could be read, so that one error lists every problem.
	p := build(commands, rules, unread, &pr)
	if err := pr.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// decoder reads JSON values strictly, reporting problems by field path.
type decoder struct {
	pr *problems
}

// kindOf names the JSON type of a valid value.
func kindOf(raw json.RawMessage) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool { return kindOf(raw) == "null" }

// object calls fn for each field of the object raw, in order; repeated
// fields are errors. It reports whether raw is an object.
func (d *decoder) object(raw json.RawMessage, at string, fn func(key string, value json.RawMessage, at string)) bool {
	if kindOf(raw) != "an object" {
		d.pr.add(at, "must be an object, not %s", kindOf(raw))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		d.pr.add(at, "invalid JSON: %v", err)
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			d.pr.add(at, "invalid JSON: %v", err)
			return false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			d.pr.add(at, "invalid JSON: %v", err)
			return false
		}
		fat := field(at, truncate(key, 64))
		if seen[key] {
			d.pr.add(fat, "appears twice")
			continue
		}
		seen[key] = true
		fn(key, v, fat)
	}
	return true
}

// array calls fn for each element of the array raw. Null is an empty
// array.
func (d *decoder) array(raw json.RawMessage, at string, max int, fn func(i int, value json.RawMessage, at string)) {
	if isNull(raw) {
		return
	}
	if kindOf(raw) != "an array" {
		d.pr.add(at, "must be an array, not %s", kindOf(raw))
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		d.pr.add(at, "invalid JSON: %v", err)
		return
	}
	if len(items) > max {
		d.pr.add(at, "more than %d elements", max)
		return
	}
	for i, v := range items {
		fn(i, v, index(at, i))
	}
}

// str reads a string; null is "".
func (d *decoder) str(raw json.RawMessage, at string) (string, bool) {
	if isNull(raw) {
		return "", true
	}
	var s string
	if kindOf(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		d.pr.add(at, "must be a string, not %s", kindOf(raw))
		return "", false
	}
	return s, true
}

// strings reads an array of strings; null is none.
func (d *decoder) strings(raw json.RawMessage, at string, max int) []string {
	out := []string{}
	d.array(raw, at, max, func(_ int, v json.RawMessage, at string) {
		if isNull(v) {
			d.pr.add(at, "must be a string, not null")
			return
		}
		if s, ok := d.str(v, at); ok {
			out = append(out, s)
		}
	})
	return out
}

// boolean reads true or false; null is false.
func (d *decoder) boolean(raw json.RawMessage, at string) bool {
	switch strings.TrimSpace(string(raw)) {
	case "true":
		return true
	case "false", "null":
		return false
	}
	d.pr.add(at, "must be true or false, not %s", kindOf(raw))
	return false
}

// integer reads a whole number.
func (d *decoder) integer(raw json.RawMessage, at string) (int, bool) {
	var f float64
	if kindOf(raw) != "a number" || json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		d.pr.add(at, "must be a whole number, not %s", kindOf(raw))
		return 0, false
	}
	return int(f), true
}

// commands reads the commands object.
func (d *decoder) commands(raw json.RawMessage, at string) CommandSettings {
	var c CommandSettings
	if isNull(raw) {
		return c
	}
	d.object(raw, at, func(key string, v json.RawMessage, at string) {
		switch key {
		case "mode":
			s, _ := d.str(v, at)
			c.Mode = ExecutionMode(s)
		case "sandbox":
			if isNull(v) {
				return
			}
			d.object(v, at, func(key string, v json.RawMessage, at string) {
				switch key {
				case "network":
					c.Sandbox.Network = d.boolean(v, at)
				default:
					d.pr.add(at, "unknown field (sandbox has network)")
				}
			})
		case "env":
			c.Env = d.strings(v, at, maxEnv)
		default:
			d.pr.add(at, "unknown field (commands has mode, sandbox and env)")
		}
	})
	return c
}

// rules reads the rules array; unread[i] is true for an element that is
// not an object.
func (d *decoder) rules(raw json.RawMessage, at string) (out []Rule, unread []bool) {
	d.array(raw, at, maxRules, func(_ int, v json.RawMessage, at string) {
		var r Rule
		ok := d.object(v, at, func(key string, v json.RawMessage, at string) {
			switch key {
			case "tool":
				r.Tool, _ = d.str(v, at)
			case "paths":
				r.Paths = d.strings(v, at, maxPatterns)
			case "commands":
				r.Commands = d.strings(v, at, maxPatterns)
			case "changes_only":
				r.ChangesOnly = d.boolean(v, at)
			case "action":
				s, _ := d.str(v, at)
				r.Action = Action(s)
			case "reason":
				r.Reason, _ = d.str(v, at)
			case "source":
				s, _ := d.str(v, at)
				r.Source = Source(s)
			case "created_at":
				s, ok := d.str(v, at)
				if !ok || s == "" {
					return
				}
				t, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					d.pr.add(at, "must be an RFC 3339 time such as \"2025-01-02T15:04:05Z\", not %q", truncate(s, 64))
					return
				}
				r.Created = t
			default:
				d.pr.add(at, "unknown field (a rule has tool, paths, commands, changes_only, action, reason, source and created_at)")
			}
		})
		out = append(out, r)
		unread = append(unread, !ok)
	})
	return out, unread
}
