package shell

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompArch holds the system call numbers the network filter checks on
// one architecture; 0 means the call does not exist there.
type seccompArch struct {
	audit        uint32 // AUDIT_ARCH_* as seccomp reports it
	nrMask       uint32 // ANDed with the call number first (x32 sets a bit); 0: none
	socket       uint32
	socketcall   uint32 // the multiplexer of 32-bit x86, whose arguments a filter cannot see
	ioUringSetup uint32
}

// seccompTable is the native architecture and the 32-bit one its kernel
// also runs (compat), if any.
type seccompTable struct {
	native seccompArch
	compat *seccompArch
}

// Offsets in struct seccomp_data. arg0Low is the low 32 bits of the first
// argument on a little-endian machine (the only ones seccompArches knows).
const (
	offNr      = 0
	offArch    = 4
	offArg0Low = 16
)

// networkFilter is the classic BPF program of the network seccomp filter:
// socket(2) fails with EACCES for every address family but AF_UNIX and
// AF_NETLINK; socketcall(2), which hides its arguments, fails with EACCES;
// io_uring_setup(2) fails with ENOSYS, since io_uring can create sockets
// without socket(2) (programs then fall back to plain system calls). A
// process of an architecture outside t is killed.
func networkFilter(t seccompTable) ([]unix.SockFilter, error) {
	var p bpfProgram
	p.load(offArch)
	p.jumpIfEqual(t.native.audit, "native")
	if t.compat != nil {
		p.jumpIfEqual(t.compat.audit, "compat")
	}
	p.ret(unix.SECCOMP_RET_KILL_PROCESS)
	arch := func(label string, a seccompArch) {
		p.label(label)
		p.load(offNr)
		if a.nrMask != 0 {
			p.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, a.nrMask)
		}
		p.jumpIfEqual(a.socket, "family")
		if a.socketcall != 0 {
			p.jumpIfEqual(a.socketcall, "eacces")
		}
		p.jumpIfEqual(a.ioUringSetup, "enosys")
		p.ret(unix.SECCOMP_RET_ALLOW)
	}
	arch("native", t.native)
	if t.compat != nil {
		arch("compat", *t.compat)
	}
	p.label("family")
	p.load(offArg0Low)
	p.jumpIfEqual(unix.AF_UNIX, "allow")
	p.jumpIfEqual(unix.AF_NETLINK, "allow")
	p.label("eacces")
	p.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	p.label("allow")
	p.ret(unix.SECCOMP_RET_ALLOW)
	p.label("enosys")
	p.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	return p.assemble()
}

// installNetworkFilter installs networkFilter on every thread of this
// process; it stays in force across exec and in every child.
func installNetworkFilter() error {
	t, ok := seccompArches()
	if !ok {
		return errors.New("no seccomp filter for this architecture")
	}
	filter, err := networkFilter(t)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	return seccompCall(unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, unsafe.Pointer(&prog))
}

// seccompCall is the seccomp(2) system call.
func seccompCall(op, flags uintptr, arg unsafe.Pointer) error {
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, op, flags, uintptr(arg))
	switch {
	case errno != 0:
		return errno
	case r != 0:
		// With SECCOMP_FILTER_FLAG_TSYNC: the thread that could not
		// take the filter.
		return fmt.Errorf("thread %d cannot take the filter", r)
	}
	return nil
}

// bpfProgram assembles a classic BPF program with forward jumps to named
// labels.
type bpfProgram struct {
	insns  []unix.SockFilter
	labels map[string]int
	jumps  map[int]string // instruction index -> label its true branch goes to
}

func (p *bpfProgram) stmt(code uint16, k uint32) {
	p.insns = append(p.insns, unix.SockFilter{Code: code, K: k})
}

// load loads the 32-bit word at offset off of seccomp_data.
func (p *bpfProgram) load(off uint32) { p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }

// ret ends the program with the seccomp action ret.
func (p *bpfProgram) ret(action uint32) { p.stmt(unix.BPF_RET|unix.BPF_K, action) }

// jumpIfEqual jumps to label when the accumulator equals k, else goes on.
func (p *bpfProgram) jumpIfEqual(k uint32, label string) {
	if p.jumps == nil {
		p.jumps = map[int]string{}
	}
	p.jumps[len(p.insns)] = label
	p.stmt(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k)
}

// label names the next instruction.
func (p *bpfProgram) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insns)
}

// assemble resolves the jumps. Classic BPF jumps only forward, by at most
// 255 instructions.
func (p *bpfProgram) assemble() ([]unix.SockFilter, error) {
	for at, name := range p.jumps {
		to, ok := p.labels[name]
		if !ok {
			return nil, fmt.Errorf("bpf: no label %q", name)
		}
		off := to - at - 1
		if off < 0 || off > 255 {
			return nil, fmt.Errorf("bpf: jump from %d to %q (%d) out of range", at, name, to)
		}
		p.insns[at].Jt = uint8(off)
	}
	return p.insns, nil
}
