package shell

import "golang.org/x/sys/unix"

// seccompArches describes x86-64, its x32 ABI (the same audit
// architecture, call numbers with bit 30 set) and 32-bit x86.
func seccompArches() (seccompTable, bool) {
	return seccompTable{
		native: seccompArch{audit: unix.AUDIT_ARCH_X86_64, nrMask: ^uint32(0x40000000), socket: 41, ioUringSetup: 425},
		compat: &seccompArch{audit: unix.AUDIT_ARCH_I386, socket: 359, socketcall: 102, ioUringSetup: 425},
	}, true
}
