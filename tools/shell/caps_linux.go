package shell

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// keptCapabilities are the capabilities a sandboxed command run as root
// may still have: Docker's default set without CAP_NET_RAW (raw sockets
// are network access) and CAP_MKNOD (a device node in the workspace would
// open the disk or memory behind it). They let root work on files as
// usual (chown when extracting an archive, for example); the ones dropped
// (CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_PTRACE, CAP_NET_ADMIN,
// CAP_SYS_RAWIO, CAP_BPF, ...) would let it leave the sandbox.
var keptCapabilities = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE,
	unix.CAP_SETFCAP,
}

// keptCapabilityMask is keptCapabilities as a bit mask.
func keptCapabilityMask() uint64 {
	var m uint64
	for _, c := range keptCapabilities {
		m |= 1 << c
	}
	return m
}

// dropCapabilities limits what programs this process executes can have to
// keptCapabilities: it drops the others from the bounding set (which
// needs CAP_SETPCAP; a process without it is not root and gets no
// capabilities on exec, since no_new_privs also ignores file
// capabilities), from the inheritable set, and clears the ambient set.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	keep := keptCapabilityMask()
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= lastCapability(); c++ {
			if keep&(1<<c) != 0 {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	data[0].Inheritable &= uint32(keep)
	data[1].Inheritable &= uint32(keep >> 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	// EINVAL: a kernel before ambient capabilities (4.3) has none.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	return nil
}

// lastCapability is the highest capability number the kernel knows.
func lastCapability() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 && n < 64 {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}
