//go:build unix

package actionserver

import (
	"net"
	"testing"
	"time"
)

// While down the server keeps its port: a call is refused, and no other
// listener can take the port; Up listens there again.
func TestDownHoldsThePort(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr()
	s.Down()
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("another listener took %s while the server was down", addr)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("a call to %s while down was answered", addr)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("after Up: %v", err)
	}
	c.Close()
}
