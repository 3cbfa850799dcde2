package shell

import "golang.org/x/sys/unix"

// seccompArches describes 64-bit Arm and 32-bit Arm (EABI, which has no
// socketcall).
func seccompArches() (seccompTable, bool) {
	return seccompTable{
		native: seccompArch{audit: unix.AUDIT_ARCH_AARCH64, socket: 198, ioUringSetup: 425},
		compat: &seccompArch{audit: unix.AUDIT_ARCH_ARM, socket: 281, ioUringSetup: 425},
	}, true
}
