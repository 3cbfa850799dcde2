//go:build !linux

package plugins

import "syscall"

// pluginSysProcAttr starts a plugin in a new session so the terminal's
// Ctrl-C reaches only the engine.
func pluginSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// reap is a no-op where /proc is not available.
func reap(int) int { return 0 }
