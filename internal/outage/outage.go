// Package outage recognises the errors that mean a backing service (Postgres or
// Temporal) cannot serve now, so the caller should retry with backoff. The API
// answers them UNAVAILABLE; the write path's intake tells them apart from a write
// that failed.
package outage

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/engramhq/engram/storage"
)

// Is reports whether err means Postgres or Temporal cannot serve now: a refused,
// reset or closed connection, a network timeout, Postgres shutting down,
// starting, restarting or out of connections (SQLSTATE class 08, 57P01-57P03,
// 53300), Temporal unavailable, without the namespace (a dev server still
// starting, or wedged), rate limiting or not answering within a call's own bound
// (a write's start, see write.StartAndWait). It is the one place such errors are
// recognised.
func Is(err error) bool {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return true
	}
	if code := storage.SQLState(err); code != "" {
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	var su *serviceerror.Unavailable
	var nsf *serviceerror.NamespaceNotFound
	var re *serviceerror.ResourceExhausted
	var de *serviceerror.DeadlineExceeded
	if errors.As(err, &su) || errors.As(err, &nsf) || errors.As(err, &re) || errors.As(err, &de) {
		return true
	}
	if s, ok := status.FromError(err); ok && (s.Code() == codes.Unavailable || s.Code() == codes.ResourceExhausted || s.Code() == codes.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "the database system is shutting down") ||
		strings.Contains(msg, "the database system is starting up") || strings.Contains(msg, "SQLSTATE=57P0")
}
