package client

import (
	"errors"

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
