//go:build !linux

package shell

import "errors"

// ioURingSetup reports that io_uring is Linux-only.
func ioURingSetup() error { return errors.New("io_uring is Linux-only") }
