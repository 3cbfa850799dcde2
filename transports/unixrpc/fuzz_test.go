package unixrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tableCodes are the error codes the contract allows.
var tableCodes = map[int]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32603: true,
	-32000: true, -32001: true, -32002: true, -32003: true, -32004: true, -32005: true}

// FuzzLineInput writes arbitrary bytes (as lines) to a live connection,
// after the handshake or before it, then a sentinel request. The server
// must answer every line it reads with well-formed JSON-RPC using the
// table's codes, answer the sentinel or close the connection cleanly, and
// go on serving a fresh connection.
func FuzzLineInput(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"agent.query","params":{"message":"hi"}}`,
		`{"jsonrpc":"2.0","method":"context.update","params":{"cwd":"/tmp","recent_commands":[{"command":"gti status","exit_code":127}],"recent_output":"gti: command not found"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tool.approve","params":{"execution_id":"x","approved":true}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session.load","params":{"path":"../x.json"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"agent.cancel","params":{"query_id":"q-1"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		`[]`, `{}`, `null`, `"\u0000"`, `{"jsonrpc":"2.0","id":1e400,"method":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":`,
		"\xff\xfe\x00", "{\"a\":1}\r\n{\"jsonrpc\":\"2.0\"}", "\n\n\n",
		`{"jsonrpc":"2.0","id":"s","result":1}`, `{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocol_version":"2.0.0"}}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	e := newEnv(f)
	e.model.set("hi", step{chunks: []string{"hello"}})
	f.Fuzz(func(t *testing.T, data []byte, handshake bool) {
		nc, err := net.Dial("unix", e.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		var in bytes.Buffer
		if handshake {
			in.WriteString(`{"jsonrpc":"2.0","id":"hs","method":"initialize","params":{"protocol_version":"1.0.0"}}` + "\n")
		}
		in.Write(data)
		in.WriteString("\n" + `{"jsonrpc":"2.0","id":"sentinel","method":"agent.cancel","params":{"query_id":"none"}}` + "\n")
		go nc.Write(in.Bytes())

		dec := json.NewDecoder(nc)
		for {
			var m map[string]json.RawMessage
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
					break // a clean close
				}
				t.Fatalf("reading the answers: %v", err)
			}
			if string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("answer without jsonrpc 2.0: %v", m)
			}
			if _, isNote := m["method"]; isNote {
				if _, hasID := m["id"]; hasID {
					t.Fatalf("the server sent a request: %v", m)
				}
				continue
			}
			id, hasID := m["id"]
			_, hasResult := m["result"]
			rawErr, hasErr := m["error"]
			if !hasID || hasResult == hasErr {
				t.Fatalf("malformed response: %v", m)
			}
			if hasErr {
				var e struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if json.Unmarshal(rawErr, &e) != nil || !tableCodes[e.Code] || e.Message == "" {
					t.Fatalf("error outside the table: %s", rawErr)
				}
			}
			if string(id) == `"sentinel"` {
				break
			}
		}
		// A fresh connection is served.
		c := dialRaw(t, e.sock)
		if r := c.call(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"1.0.0"}}`); r.Error != nil {
			t.Fatalf("fresh connection: %s", r.raw)
		}
	})
}
