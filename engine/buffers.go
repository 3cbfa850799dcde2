package engine

import (
	"context"
	"os"
	"path/filepath"
)

// BufferReader is implemented by a Host whose client holds files in
// editor buffers that may be newer than the disk (unsaved changes), such
// as an ACP client's fs/read_text_file. Before a read-only tool call runs
// (read_file, search tools, and edit tools computing their proposal), the
// engine asks it for each existing regular file inside the workspace that
// the call's arguments name ("path", "file_path", "paths"), and passes the
// answers to the tool as the call's overlay (InvokeRequest.Overlay), so
// the tool sees the editor's text; a pending edit of the same model
// response wins over the buffer. path is absolute, inside the workspace,
// symlinks resolved. ok false means the client has nothing to say about
// the file (the tool reads the disk); an error is logged and treated the
// same. At most maxBufferReads files are asked about per call.
type BufferReader interface {
	ReadBuffer(ctx context.Context, path string) (content []byte, ok bool, err error)
}

// maxBufferReads caps the files a BufferReader is asked about per call.
const maxBufferReads = 16

// overlayFor is the overlay of a call: the response's pending edits, plus,
// for a read-only plugin tool call with a BufferReader Host, the client's
// buffers of the files the call names.
func (t *turn) overlayFor(ctx context.Context, call ToolCall, spec ToolSpec, r *response) map[string]OverlayFile {
	out := make(map[string]OverlayFile, len(r.overlay))
	for k, v := range r.overlay {
		out[k] = v
	}
	br, ok := t.opts.Host.(BufferReader)
	if !ok || !spec.ReadOnly || spec.Kind == ToolKindCommand {
		return out
	}
	root := t.s.workspace.Root
	asked := 0
	for _, p := range namedPaths(call.Args) {
		rel := realPath(root, p)
		if rel == "" || rel == "." || asked == maxBufferReads {
			continue
		}
		if _, pending := out[rel]; pending {
			continue
		}
		abs := filepath.Join(root, filepath.FromSlash(rel))
		if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		asked++
		content, ok, err := br.ReadBuffer(ctx, abs)
		if err != nil {
			t.e.log.Debug("reading the client's buffer failed; the tool reads the disk", "path", rel, "error", err)
			continue
		}
		if ok {
			out[rel] = OverlayFile{Content: content}
		}
	}
	return out
}
