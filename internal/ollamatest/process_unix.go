//go:build unix

package ollamatest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// platformError reports that this system cannot run the server; nil here.
func platformError() error { return nil }

// process is a started server process, the leader of its own process
// group (the runners it starts join that group).
type process struct {
	cmd     *exec.Cmd
	pgid    int
	done    chan struct{} // closed when the process has exited and been reaped
	waitErr error         // cmd.Wait's result, set before done is closed
}

// startProcess starts bin with args and env, writing its stdout and stderr
// to logPath. The process leads a new process group and, on Linux, gets
// SIGTERM if the thread that started it exits; that thread is locked to
// the goroutine that waits for the process, so it lives exactly as long as
// the process is being waited for, and dies with the test binary.
func startProcess(bin string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			logFile.Close()
			started <- err
			return
		}
		p.pgid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// stop sends SIGTERM to the process and waits up to exitWait for it to
// exit (then kills it), and then up to groupWait for the rest of its
// process group to exit (then kills them). Any kill is reported.
func (p *process) stop(exitWait, groupWait time.Duration) error {
	var errs []error
	select {
	case <-p.done:
	default:
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("send SIGTERM: %w", err))
		}
		select {
		case <-p.done:
		case <-time.After(exitWait):
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			<-p.done
			errs = append(errs, fmt.Errorf("ollama serve (pid %d) did not exit within %v of SIGTERM and was killed", p.pgid, exitWait))
		}
	}
	deadline := time.Now().Add(groupWait)
	for {
		left, err := liveGroupMembers(p.pgid)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("processes of ollama serve's group %d outlived it by %v and were killed: %s", p.pgid, groupWait, describe(left)))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}
