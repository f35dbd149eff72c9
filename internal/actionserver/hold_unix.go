//go:build unix

package actionserver

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// holdPort binds a TCP socket to addr without listening on it: a connection to
// addr is refused (no listener), and no other socket can take the port, nor can
// a dial's own ephemeral port be it (a connection to itself), while the server is
// down. Without SO_REUSEADDR when it can, so a listener (which sets it) cannot
// bind beside it.
func holdPort(addr string) (release func(), err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return nil, fmt.Errorf("hold %s: not an IPv4 address", addr)
	}
	sa := &syscall.SockaddrInet4{Port: p}
	copy(sa.Addr[:], ip)
	// Connections the server closed may hold the port in TIME_WAIT, which only
	// a socket with SO_REUSEADDR may bind beside: then hold it that way.
	for _, reuse := range []int{0, 1} {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			return nil, err
		}
		if err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, reuse); err == nil {
			err = syscall.Bind(fd, sa)
		}
		if err == nil {
			return func() { _ = syscall.Close(fd) }, nil
		}
		_ = syscall.Close(fd)
		if reuse == 1 {
			return nil, fmt.Errorf("hold %s: %w", addr, err)
		}
	}
	return nil, fmt.Errorf("hold %s: unreachable", addr)
}
