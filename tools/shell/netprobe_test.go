package shell

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// netProbeArg makes the test binary the network probe (see TestMain).
const netProbeArg = "netprobe"

// netProbe tries one network operation and exits 0 when it worked, 1 when
// it was refused (printing why on stderr), 2 on bad arguments:
//
//	netprobe tcp ADDR     connect over TCP
//	netprobe mptcp ADDR   connect over Multipath TCP (socket(2) with IPPROTO_MPTCP)
//	netprobe udp ADDR     send one datagram
//	netprobe listen       listen on a TCP port of 127.0.0.1 (Go's default, Multipath TCP)
//	netprobe unix DIR     listen on a Unix socket in DIR and connect to it
//	netprobe abstract NAME  connect to the abstract Unix socket NAME
//	netprobe iouring      create an io_uring instance
func netProbe(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "netprobe: no operation")
		return 2
	}
	var err error
	switch op := args[0]; {
	case op == "tcp" && len(args) == 2:
		var c net.Conn
		if c, err = net.DialTimeout("tcp", args[1], 5*time.Second); err == nil {
			c.Close()
		}
	case op == "mptcp" && len(args) == 2:
		err = dialMPTCP(args[1])
	case op == "udp" && len(args) == 2:
		var c net.Conn
		if c, err = net.Dial("udp", args[1]); err == nil {
			_, err = c.Write([]byte("probe"))
			c.Close()
		}
	case op == "listen" && len(args) == 1:
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			l.Close()
		}
	case op == "unix" && len(args) == 2:
		err = unixRoundTrip(filepath.Join(args[1], "probe.sock"))
	case op == "iouring" && len(args) == 1:
		err = ioURingSetup()
	case op == "abstract" && len(args) == 2:
		var c net.Conn
		if c, err = net.Dial("unix", "@"+args[1]); err == nil {
			c.Close()
		}
	default:
		fmt.Fprintf(os.Stderr, "netprobe: bad arguments %q\n", args)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "netprobe %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// dialMPTCP connects to the IPv4 address addr with a Multipath TCP socket,
// which Landlock's TCP rules do not cover.
func dialMPTCP(addr string) error {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 262) // IPPROTO_MPTCP
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer syscall.Close(fd)
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	return nil
}

// unixRoundTrip listens on a Unix socket at path, connects to it and
// exchanges a byte.
func unixRoundTrip(path string) error {
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = c.Write([]byte{1})
			c.Close()
		}
		done <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil {
		return err
	}
	if b[0] != 1 {
		return errors.New("wrong byte")
	}
	return <-done
}
