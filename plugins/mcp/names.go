package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolName is the longest tool name OpenAI-style APIs accept
// (^[a-zA-Z0-9_-]{1,64}$).
const maxToolName = 64

// ToolName is the engine tool name of MCP tool tool of server server:
// SERVER__TOOL. When tool holds characters other than ASCII letters,
// digits, '_' and '-', each is replaced by '_'; when that happens, or the
// name would be longer than 64 bytes, the name is cut to fit and ends in
// '_' and 8 hex digits of the SHA-256 of the original tool name, so that
// different tools keep different names. server must be a valid server
// name (see ParseConfig).
func ToolName(server, tool string) string {
	clean := sanitize(tool)
	name := server + "__" + clean
	if clean == tool && len(name) <= maxToolName && tool != "" {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name) > maxToolName-len(suffix) {
		name = name[:maxToolName-len(suffix)]
	}
	return name + suffix
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
