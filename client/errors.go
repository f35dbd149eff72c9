package client

import (
	"errors"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// FieldViolation is one bad field of a request, as the server named it.
type FieldViolation struct {
	Field       string
	Description string
}

// FieldViolations returns the bad fields an INVALID_ARGUMENT error names.
func FieldViolations(err error) []FieldViolation {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	var out []FieldViolation
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if br, ok := v.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				out = append(out, FieldViolation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		}
	}
	return out
}

// Code returns the Connect code of err (CodeUnknown for a non-Connect error).
func Code(err error) connect.Code { return connect.CodeOf(err) }

// RetryAfter reports whether err is a rate limit (RESOURCE_EXHAUSTED with a
// Retry-After header, as the server's rate limiter answers) and how long it asked
// the client to wait. Other RESOURCE_EXHAUSTED errors are not: nothing says
// waiting helps.
func RetryAfter(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		return 0, false
	}
	secs, perr := strconv.Atoi(ce.Meta().Get("Retry-After"))
	if perr != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}
