package unixrpc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/creachadair/jrpc2"

	"github.com/plexus-agent/plexus/engine"
)

// Session files.
const (
	sessionFormat      = "plexus-session"
	sessionFileVersion = 1
	// maxSessionFileBytes caps a session file that session.load reads.
	maxSessionFileBytes = 64 << 20
)

// sessionFile is the envelope of a session file. Checksum is "sha256:"
// and the hex SHA-256 of Session in compact form.
type sessionFile struct {
	Format   string          `json:"format"`
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Session  json.RawMessage `json:"session"`
}

// savedSession is what session.save writes.
type savedSession struct {
	ID              string         `json:"id"`
	Created         int64          `json:"created"`
	Saved           int64          `json:"saved"`
	Workspace       savedWorkspace `json:"workspace"`
	ProtocolVersion string         `json:"protocol_version"`
	MessagesCount   int            `json:"messages_count"`
	// History is null when saved without it.
	History []engine.Message `json:"history"`
	// Blocks is null when saved without them.
	Blocks  []savedBlock  `json:"blocks"`
	Context *savedContext `json:"context,omitempty"`
}

type savedWorkspace struct {
	ID   string `json:"id"`
	Root string `json:"root"`
}

// savedBlock is a stream.block's params as sent.
type savedBlock struct {
	QueryID string `json:"query_id"`
	BlockID string `json:"block_id"`
	Block   block  `json:"block"`
}

type savedContext struct {
	Cwd          string    `json:"cwd,omitempty"`
	Shell        string    `json:"shell,omitempty"`
	TerminalSize *termSize `json:"terminal_size,omitempty"`
}

// pathError is a session path the server refuses.
type pathError struct {
	code   jrpc2.Code
	reason string
	msg    string
}

func (e *pathError) Error() string { return e.msg }

func (e *pathError) rpc(path string) *jrpc2.Error {
	return rpcError(e.code, e.msg, reasonData(e.reason, "path", path))
}

func badPath(format string, args ...any) *pathError {
	return &pathError{code: CodeInvalidParams, reason: reasonInvalidPath, msg: fmt.Sprintf(format, args...)}
}

// sessionPath validates a path of session.save (write) or session.load
// and returns it absolute, its directory's symlinks resolved. Empty means
// SessionDir/ID.json for a save; a relative path is relative to
// SessionDir and must stay inside it. The path must end in .json, its
// directory must exist (SessionDir is created), the file must not be a
// symlink or anything but a regular file, and it must lie inside
// SessionDir or one of SessionRoots (else -32005).
func (s *Server) sessionPath(p, id string, write bool) (string, error) {
	dir := s.opts.SessionDir
	if p == "" {
		if !write {
			return "", badPath("path is required")
		}
		p = filepath.Join(dir, id+".json")
	}
	if strings.ContainsRune(p, 0) {
		return "", badPath("the path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		rel := filepath.Clean(p)
		if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", badPath("a relative path must stay inside the session directory %s", dir)
		}
		p = filepath.Join(dir, rel)
	}
	p = filepath.Clean(p)
	if filepath.Ext(p) != ".json" {
		return "", badPath("a session file's name must end in .json")
	}
	parent := filepath.Dir(p)
	if write && parent == dir {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", &pathError{code: CodeInternalError, reason: reasonInvalidPath, msg: "create the session directory: " + err.Error()}
		}
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", badPath("the directory %s does not exist or cannot be read", parent)
	}
	full := filepath.Join(realParent, filepath.Base(p))
	if !s.allowedPath(full) {
		return "", &pathError{code: CodePermissionDenied, reason: reasonPathNotAllowed,
			msg: fmt.Sprintf("%s is outside the directories session files may use (%s)", full, strings.Join(s.sessionRoots(), ", "))}
	}
	fi, err := os.Lstat(full)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return "", badPath("%s is a symlink; session files are not read or written through symlinks", full)
	case err == nil && !fi.Mode().IsRegular():
		return "", badPath("%s is not a regular file", full)
	case errors.Is(err, fs.ErrNotExist):
		if !write {
			return "", badPath("%s does not exist", full)
		}
	case err != nil:
		return "", badPath("%s: %v", full, err)
	}
	return full, nil
}

// sessionRoots are the directories session files may be in.
func (s *Server) sessionRoots() []string {
	return append([]string{s.opts.SessionDir}, s.opts.SessionRoots...)
}

func (s *Server) allowedPath(full string) bool {
	for _, root := range s.sessionRoots() {
		if root == "" {
			continue
		}
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			r = filepath.Clean(root)
		}
		rel, err := filepath.Rel(r, full)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (c *conn) saveSession(req *jrpc2.Request) (any, error) {
	var p saveParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	sess, err := c.sessionLocked()
	if err != nil {
		c.mu.Unlock()
		return nil, rpcError(CodeInternalError, "start a session: "+err.Error(), nil)
	}
	blocks := append([]savedBlock(nil), c.blocks...)
	tc, version := c.tctx, c.version
	c.mu.Unlock()
	path, err := c.srv.sessionPath(p.Path, sess.ID(), true)
	if err != nil {
		return nil, pathErr(err, p.Path)
	}
	hist := sess.History()
	ws := sess.Workspace()
	ss := savedSession{
		ID: sess.ID(), Created: sess.Created().Unix(), Saved: time.Now().Unix(),
		Workspace: savedWorkspace{ID: ws.ID, Root: ws.Root}, ProtocolVersion: version,
		MessagesCount: countMessages(hist),
		Context:       &savedContext{Cwd: tc.Cwd, Shell: tc.Shell, TerminalSize: tc.TerminalSize},
	}
	if p.IncludeHistory == nil || *p.IncludeHistory {
		ss.History = nonNil(hist)
	}
	if p.IncludeBlocks == nil || *p.IncludeBlocks {
		ss.Blocks = nonNil(blocks)
	}
	data, err := encodeSessionFile(ss)
	if err != nil {
		return nil, rpcError(CodeInternalError, err.Error(), nil)
	}
	if err := replaceable(path); err != nil {
		return nil, rpcError(CodePermissionDenied, err.Error(), reasonData(reasonNotSessionFile, "path", path))
	}
	if err := writeAtomic(path, data); err != nil {
		return nil, rpcError(CodeInternalError, err.Error(), map[string]any{"path": path})
	}
	return saveResult{Saved: true, Path: path, Size: int64(len(data))}, nil
}

func (c *conn) loadSession(ctx context.Context, req *jrpc2.Request) (any, error) {
	var p loadParams
	if err := decodeParams(req, &p); err != nil {
		return nil, err
	}
	path, err := c.srv.sessionPath(p.Path, "", false)
	if err != nil {
		return nil, pathErr(err, p.Path)
	}
	ss, err := readSessionFile(path)
	if err != nil {
		return nil, rpcError(CodeInvalidParams, err.Error(), reasonData(reasonCorrupt, "path", path))
	}
	ws := c.srv.opts.Workspace
	if filepath.Clean(ss.Workspace.Root) != ws.Root {
		return nil, rpcError(CodeInvalidParams, fmt.Sprintf("the session was saved in workspace %s; this server serves %s", ss.Workspace.Root, ws.Root),
			reasonData(reasonWorkspace, "path", path, "saved_root", ss.Workspace.Root, "root", ws.Root))
	}
	c.mu.Lock()
	if len(c.queries) > 0 || c.loading {
		c.mu.Unlock()
		return nil, rpcError(CodeAgentError, "a query is in progress on this connection; wait for its stream.complete or cancel it first", reasonData(reasonBusy))
	}
	c.loading = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.loading = false
		c.mu.Unlock()
	}()
	sess, err := c.srv.opts.Engine.ImportSession(ws, ss.History)
	if errors.Is(err, engine.ErrInvalidRequest) {
		return nil, rpcError(CodeInvalidParams, "the session file's history cannot be restored: "+err.Error(), nil)
	}
	if err != nil {
		return nil, rpcError(CodeInternalError, "restore the session: "+err.Error(), nil)
	}
	c.mu.Lock()
	old := c.session
	c.session = sess
	c.sessions = append(c.sessions, sess.ID())
	c.blocks = nonNil(ss.Blocks)
	c.blockBytes = 0
	for _, b := range c.blocks {
		raw, _ := json.Marshal(b)
		c.blockBytes += len(raw)
	}
	c.mu.Unlock()
	if old != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.srv.opts.Engine.CloseSession(cctx, old.ID())
		cancel()
	}
	return loadResult{Loaded: true, Session: loadedSession{
		ID: sess.ID(), Created: ss.Created, BlocksCount: len(ss.Blocks), MessagesCount: countMessages(ss.History), SourceID: ss.ID,
	}}, nil
}

func pathErr(err error, path string) error {
	var pe *pathError
	if errors.As(err, &pe) {
		return pe.rpc(path)
	}
	return rpcError(CodeInternalError, err.Error(), nil)
}

// countMessages counts user and assistant messages, as the engine's
// SessionStatus.Messages does.
func countMessages(h []engine.Message) int {
	n := 0
	for _, m := range h {
		if m.Role == engine.RoleUser || m.Role == engine.RoleAssistant {
			n++
		}
	}
	return n
}

// encodeSessionFile returns the file's bytes: the envelope with the
// session and its checksum.
func encodeSessionFile(ss savedSession) ([]byte, error) {
	body, err := json.Marshal(ss)
	if err != nil {
		return nil, fmt.Errorf("encode the session: %w", err)
	}
	sum, _ := checksum(body)
	data, err := json.Marshal(sessionFile{Format: sessionFormat, Version: sessionFileVersion, Checksum: sum, Session: body})
	if err != nil {
		return nil, fmt.Errorf("encode the session: %w", err)
	}
	return append(data, '\n'), nil
}

func checksum(body json.RawMessage) (string, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return "", err
	}
	h := sha256.Sum256(compact.Bytes())
	return "sha256:" + hex.EncodeToString(h[:]), nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory (mode 0600), synced and renamed over path, then syncs the
// directory: a reader sees the old file or the new one, never part of
// one.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// replaceable reports (nil) whether session.save may write path: a new
// file, or one that reads as a session file envelope (the format
// session.load reads, of any version, its checksum unchecked). Anything
// else, e.g. a project's package.json under the home directory, is left
// alone.
func replaceable(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s exists and cannot be read (%v); session.save replaces only session files", path, err)
	}
	defer f.Close()
	refuse := fmt.Errorf("%s exists and is not a Plexus session file; session.save replaces only session files (choose another path, or remove the file first)", path)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSessionFileBytes {
		return refuse
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSessionFileBytes+1))
	if err != nil {
		return refuse
	}
	var env sessionFile
	if strictDecode(data, &env) != nil || env.Format != sessionFormat || env.Version < 1 {
		return refuse
	}
	return nil
}

// readSessionFile reads and validates a session file: its size, the
// envelope (strictly: no unknown members, nothing after it), the format
// and version, the checksum, and the session (strictly), including every
// message's role and every block's type.
func readSessionFile(path string) (*savedSession, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxSessionFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than a session file may be (%d)", path, fi.Size(), maxSessionFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSessionFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var env sessionFile
	if err := strictDecode(data, &env); err != nil {
		return nil, fmt.Errorf("%s is not a readable session file (it may be cut short or damaged): %v", path, err)
	}
	if env.Format != sessionFormat {
		return nil, fmt.Errorf("%s is not a Plexus session file (format %q, want %q)", path, env.Format, sessionFormat)
	}
	if env.Version != sessionFileVersion {
		if env.Version > sessionFileVersion {
			return nil, fmt.Errorf("%s was written by a newer Plexus (session file version %d; this server reads version %d)", path, env.Version, sessionFileVersion)
		}
		return nil, fmt.Errorf("%s has an unknown session file version %d", path, env.Version)
	}
	if len(env.Session) == 0 || isNull(env.Session) {
		return nil, fmt.Errorf("%s holds no session", path)
	}
	sum, err := checksum(env.Session)
	if err != nil || sum != env.Checksum {
		return nil, fmt.Errorf("%s is corrupted: its checksum does not match its content (it was changed or damaged after it was saved)", path)
	}
	var ss savedSession
	if err := strictDecode(env.Session, &ss); err != nil {
		return nil, fmt.Errorf("%s: the session is malformed: %v", path, err)
	}
	if err := ss.validate(); err != nil {
		return nil, fmt.Errorf("%s: the session is malformed: %v", path, err)
	}
	return &ss, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// validate checks what decoding cannot.
func (ss *savedSession) validate() error {
	switch {
	case ss.ID == "":
		return errors.New("id is empty")
	case ss.Created <= 0:
		return errors.New("created is not a Unix time")
	case !filepath.IsAbs(ss.Workspace.Root):
		return errors.New("workspace.root is not an absolute path")
	}
	for i, m := range ss.History {
		switch m.Role {
		case engine.RoleUser, engine.RoleAssistant:
		case engine.RoleTool:
			if m.ToolCallID == "" {
				return fmt.Errorf("history[%d]: a tool message without tool_call_id", i)
			}
		default:
			return fmt.Errorf("history[%d]: unknown role %q", i, m.Role)
		}
		for j, tc := range m.ToolCalls {
			if m.Role != engine.RoleAssistant {
				return fmt.Errorf("history[%d]: only assistant messages call tools", i)
			}
			if tc.ID == "" || tc.Name == "" || !json.Valid(tc.Args) {
				return fmt.Errorf("history[%d].tool_calls[%d]: needs an id, a name and JSON arguments", i, j)
			}
		}
	}
	for i, b := range ss.Blocks {
		switch b.Block.Type {
		case blockText, blockCode, blockDiff, blockError, blockToolOutput, blockInteractive:
		default:
			return fmt.Errorf("blocks[%d]: unknown block type %q", i, b.Block.Type)
		}
		if b.BlockID == "" {
			return fmt.Errorf("blocks[%d]: block_id is empty", i)
		}
	}
	return nil
}
