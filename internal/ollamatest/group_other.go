//go:build unix && !linux

package ollamatest

import (
	"errors"
	"fmt"
	"syscall"
)

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// liveGroupMembers reports whether process group pgid still has members;
// without /proc it cannot name them, so it returns -pgid for the group.
func liveGroupMembers(pgid int) ([]int, error) {
	err := syscall.Kill(-pgid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return []int{-pgid}, nil
	case errors.Is(err, syscall.ESRCH):
		return nil, nil
	}
	return nil, fmt.Errorf("check process group %d: %w", pgid, err)
}

func describe(pids []int) string { return fmt.Sprint(pids) }
