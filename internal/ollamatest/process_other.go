//go:build !unix

package ollamatest

import (
	"errors"
	"time"
)

// process is unused: ollamatest runs servers on Unix-like systems only.
type process struct {
	pgid    int
	done    chan struct{}
	waitErr error
}

// liveGroupMembers has nothing to report: no server ever runs here.
func liveGroupMembers(int) ([]int, error) { return nil, nil }

var errUnsupportedOS = errors.New("ollamatest runs ollama serve on Unix-like systems only")

// platformError reports that this system cannot run the server; tests skip.
func platformError() error { return errUnsupportedOS }

func startProcess(string, []string, []string, string) (*process, error) {
	return nil, errUnsupportedOS
}

func (p *process) stop(time.Duration, time.Duration) error { return nil }
