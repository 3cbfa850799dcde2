// Package schemas holds the contract-first schemas of the HTTP + WebSocket
// front-end (protocols/http-websocket-sessions.md): openapi.json, an
// OpenAPI 3.1 document of the REST endpoints whose components/schemas are
// JSON Schema 2020-12, and ws/<type>.json, one JSON Schema per WebSocket
// message type (ws/context.json holds the client context they share). Each
// ws schema's $id is https://plexus.dev/schemas/ws/<file>; the relative
// references between them resolve against it.
package schemas

import "embed"

// FS holds openapi.json and ws/*.json.
//
//go:embed openapi.json ws/*.json
var FS embed.FS
