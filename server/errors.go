package server

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/task"
	"github.com/engramhq/engram/write"
)

// fieldErr is INVALID_ARGUMENT naming the field, with a BadRequest detail.
func fieldErr(field, problem string) *connect.Error {
	return badRequest(fmt.Errorf("%s: %s", field, problem), &errdetails.BadRequest_FieldViolation{Field: field, Description: problem})
}

func badRequest(err error, violations ...*errdetails.BadRequest_FieldViolation) *connect.Error {
	ce := connect.NewError(connect.CodeInvalidArgument, err)
	if len(violations) > 0 {
		if d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: violations}); derr == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// prefixField renames a FieldError's field to its path in the request.
func prefixField(prefix string, err error) error {
	var fe memory.FieldError
	if prefix != "" && errors.As(err, &fe) {
		return memory.FieldError{Field: prefix + fe.Field, Problem: fe.Problem}
	}
	return err
}

// unavailable reports whether err means Postgres or Temporal cannot serve now, so
// the caller should retry with backoff: a refused, reset or closed connection, a
// network timeout, Postgres shutting down, starting, restarting or out of
// connections (SQLSTATE class 08, 57P01-57P03, 53300), Temporal unavailable,
// without the namespace (a dev server still starting, or wedged), rate limiting
// or not answering within a call's own bound (a write's start, see
// write.StartAndWait). It is the one place such errors are recognised.
func unavailable(err error) bool {
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

// toConnect maps an error to a Connect error. Bad input, missing rows and conflicts
// keep their message; anything unexpected is logged and answered with a generic
// INTERNAL message, never a stack trace or a driver's text.
func toConnect(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var fe memory.FieldError
	if errors.As(err, &fe) {
		return fieldErr(fe.Field, fe.Problem)
	}
	var le *schema.LoadError
	if errors.As(err, &le) {
		var vs []*errdetails.BadRequest_FieldViolation
		for _, p := range le.Problems {
			vs = append(vs, &errdetails.BadRequest_FieldViolation{Field: "source", Description: p.String()})
		}
		return badRequest(err, vs...)
	}
	var te *recall.TimeoutError
	if errors.As(err, &te) {
		return connect.NewError(connect.CodeDeadlineExceeded, te)
	}
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, storage.ErrIdempotencyConflict):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, storage.ErrVersionConflict):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, errors.New("request cancelled"))
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	case errors.Is(err, context.DeadlineExceeded):
		// The caller's deadline is not reached: a dependency's own timeout (a
		// Temporal start while the server restarts).
		return unavailableErr(ctx, err)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return connect.NewError(connect.CodeNotFound, errors.New("not found"))
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return connect.NewError(connect.CodeAlreadyExists, errors.New("already exists"))
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		switch ae.Type() {
		case memory.ErrTypeBadInput, memory.ErrTypeUnknownSchema, task.ErrTypeInvalidTaskRequest:
			return connect.NewError(connect.CodeInvalidArgument, errors.New(ae.Message()))
		case write.ErrTypeIdempotencyConflict:
			return connect.NewError(connect.CodeAlreadyExists, errors.New(ae.Message()))
		case task.ErrTypeIllegalTransition, write.ErrTypeInvalidReview:
			return connect.NewError(connect.CodeFailedPrecondition, errors.New(ae.Message()))
		}
	}
	if unavailable(err) {
		return unavailableErr(ctx, err)
	}
	slog.ErrorContext(ctx, "internal error", "error", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error (logged on the server)"))
}

func unavailableErr(ctx context.Context, err error) error {
	slog.WarnContext(ctx, "dependency unavailable", "error", err)
	return connect.NewError(connect.CodeUnavailable, errors.New("a backing service (Postgres or Temporal) is unavailable; retry with backoff"))
}
