package receipts

import (
	"context"

	"github.com/plexus-agent/plexus/engine"
)

// Recorder writes the engine's decisions to a Log: it is the
// engine.Recorder that cmd/plexus passes in engine.Options.Recorder. It is
// safe for concurrent use, as the Log is.
type Recorder struct {
	log *Log
}

var _ engine.Recorder = (*Recorder)(nil)

// NewRecorder returns a Recorder appending to l.
func NewRecorder(l *Log) *Recorder { return &Recorder{log: l} }

// Record appends one receipt for d. The fields map one to one (Kind,
// Actor, Workspace, Session, Turn, Tool, DiffHash, ExitCode, Reason) with
// these rules: an empty Actor is "user" (engine.ApprovalDecision's
// default); ArgsDigest is ArgsDigest(d.Args), or, when d.Args is not valid
// JSON, Digest of its raw bytes, and empty when there are no arguments;
// d.Time is not used, because Log.Append takes the time under the log's
// lock so that times in the log never decrease. Errors are those of
// Log.Append (ErrInvalidReceipt for an unknown kind or a DiffHash that is
// not "sha256:<64 hex>").
func (r *Recorder) Record(ctx context.Context, d engine.DecisionRecord) error {
	rc := Receipt{
		Kind: Kind(d.Kind), Actor: d.Actor, Workspace: d.Workspace, Session: d.Session, Turn: d.Turn,
		Tool: d.Tool, DiffHash: d.DiffHash, ExitCode: d.ExitCode, Reason: d.Reason,
	}
	if rc.Actor == "" {
		rc.Actor = "user"
	}
	if len(d.Args) > 0 {
		digest, err := ArgsDigest(d.Args)
		if err != nil {
			digest = Digest(d.Args)
		}
		rc.ArgsDigest = digest
	}
	_, err := r.log.Append(ctx, rc)
	return err
}
