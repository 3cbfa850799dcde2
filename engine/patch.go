package engine

import (
	"context"
	"time"
)

// FileEdit is a change of one file that a tool proposes instead of making
// it: the engine turns the edits of one model response into a PatchSet,
// asks for approval and applies what was approved. Base is the content the
// edit was computed against (the workspace file, or an earlier pending
// edit of the same response).
type FileEdit struct {
	// Path is workspace-relative, slash-separated.
	Path       string `json:"path"`
	Base       []byte `json:"base,omitempty"`
	BaseExists bool   `json:"base_exists"`
	// New is the complete new content; ignored when Delete.
	New    []byte `json:"new,omitempty"`
	Delete bool   `json:"delete,omitempty"`
}

// PatchSet is every file change of one model response, proposed together.
type PatchSet struct {
	// ID is "pset_" and hex digits.
	ID                 string      `json:"patch_set_id"`
	Files              []FilePatch `json:"files"`
	Rationale          string      `json:"rationale"`
	AcceptanceCriteria []string    `json:"acceptance_criteria"`
	// CallIDs are the tool calls whose edits the set holds.
	CallIDs []string `json:"call_ids,omitempty"`
}

// FilePatch is the change of one file: a git-style unified diff with its
// hunks, and the hashes it goes from and to.
type FilePatch struct {
	// ID is "patch_" and hex digits (the WebSocket contract's patch_id).
	ID   string `json:"patch_id"`
	Path string `json:"file_path"`
	// Op is "create", "modify" or "delete".
	Op string `json:"op"`
	// BaseHash ("sha256:<hex>", "" for create) is what the file must hold
	// for the patch to apply; NewHash what it holds afterwards ("" for
	// delete).
	BaseHash string `json:"base_hash"`
	NewHash  string `json:"new_hash"`
	Diff     string `json:"diff"`
	Hunks    []Hunk `json:"hunks"`
	// Base and New are the whole contents, kept to apply hunk subsets.
	Base []byte `json:"base,omitempty"`
	New  []byte `json:"new,omitempty"`
}

// Hunk is one hunk of a unified diff, as the WebSocket contract's
// patch.proposed carries it. Content holds the "@@" header and the lines.
type Hunk struct {
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	Content  string `json:"content"`
}

// PatchSelection is what an approval covers: everything, some files, or
// some hunks (0-based indexes) of some files.
type PatchSelection struct {
	All   bool             `json:"all,omitempty"`
	Files []string         `json:"files,omitempty"`
	Hunks map[string][]int `json:"hunks,omitempty"`
}

// Empty reports whether the selection applies nothing.
func (s PatchSelection) Empty() bool { return !s.All && len(s.Files) == 0 && len(s.Hunks) == 0 }

// AppliedPatch records an applied selection of a patch set: enough to undo
// it byte for byte.
type AppliedPatch struct {
	// ID is "apl_" and hex digits.
	ID        string        `json:"applied_id"`
	SetID     string        `json:"patch_set_id"`
	Workspace string        `json:"workspace_id"`
	Session   string        `json:"session_id,omitempty"`
	Time      time.Time     `json:"time"`
	Files     []AppliedFile `json:"files"`
	// Dirs are directories the apply created (undo removes them when
	// empty).
	Dirs []string `json:"dirs,omitempty"`
	// UndoneAt is set once the change was undone.
	UndoneAt *time.Time `json:"undone_at,omitempty"`
}

// AppliedFile is one file of an AppliedPatch.
type AppliedFile struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	// Before is the file's content before the apply, BeforeExisted whether
	// it existed, Mode its permission bits.
	Before        []byte `json:"before,omitempty"`
	BeforeExisted bool   `json:"before_existed"`
	Mode          uint32 `json:"mode"`
	// AfterHash is the content's hash after the apply; undo refuses when
	// the file no longer holds it.
	AfterHash string `json:"after_hash"`
	Hunks     []int  `json:"hunks,omitempty"`
}

// Patcher turns edits into patch sets and applies them inside a workspace
// root (engine/patch implements it). Errors: ErrConflict (a file changed
// since the proposal, or since the apply for Undo), ErrPermissionDenied (a
// path outside the workspace), ErrInvalidRequest.
type Patcher interface {
	Propose(root string, edits []FileEdit, rationale string, criteria []string) (*PatchSet, error)
	// Expected returns, per path, the hash the file must hold after the
	// selection is applied (to verify a client-side apply).
	Expected(set *PatchSet, sel PatchSelection) (map[string]string, error)
	Apply(root string, set *PatchSet, sel PatchSelection) (*AppliedPatch, error)
	Undo(root string, applied *AppliedPatch, force bool) error
}

// PatchApplier is implemented by a Host that applies patches itself (a
// client-side apply, like the VS Code extension's): it applies sel and
// reports, per applied path, the hash of the content it wrote. The engine
// verifies the hashes against what the selection should produce.
type PatchApplier interface {
	ApplyPatch(ctx context.Context, set *PatchSet, sel PatchSelection) (map[string]string, error)
}

// PatchStore persists patch sets and applied changes (for undo across
// processes). engine/store implements it.
type PatchStore interface {
	SavePatchSet(ctx context.Context, workspaceID string, set *PatchSet) error
	PatchSet(ctx context.Context, id string) (*PatchSet, error)
	SaveApplied(ctx context.Context, a *AppliedPatch) error
	// Applied returns the applied changes of a workspace, newest first.
	Applied(ctx context.Context, workspaceID string, limit int) ([]*AppliedPatch, error)
	MarkUndone(ctx context.Context, appliedID string, at time.Time) error
}
