package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/engramhq/engram/internal/outage"
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
	if outage.Is(err) {
		return unavailableErr(ctx, err)
	}
	slog.ErrorContext(ctx, "internal error", "error", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error (logged on the server)"))
}

func unavailableErr(ctx context.Context, err error) error {
	slog.WarnContext(ctx, "dependency unavailable", "error", err)
	return connect.NewError(connect.CodeUnavailable, errors.New("a backing service (Postgres or Temporal) is unavailable; retry with backoff"))
}

// ingestErr maps an error of the Ingestor to the API's: a reused idempotency key
// is ALREADY_EXISTS naming its field (events[i]. in a batch, else prefix), a field
// error is named by its path in the request (prefix), the rest as toConnect.
func ingestErr(ctx context.Context, prefix string, err error) error {
	var kc *write.KeyConflictError
	if errors.As(err, &kc) {
		if kc.Index >= 0 {
			prefix = fmt.Sprintf("events[%d].", kc.Index)
		}
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%sidempotency_key: %w", prefix, kc))
	}
	return toConnect(ctx, prefixField(prefix, err))
}
