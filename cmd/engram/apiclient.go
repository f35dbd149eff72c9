package main

// Shared plumbing of the API-backed commands (ingest, recall, facts, review, task,
// schema): the connection flags, errors that name the flag at fault and exit with a
// code scripts can test, and table helpers (JSON output: jsonout.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/storage"
)

// Exit codes of the engram binary.
const (
	exitFailure  = 1 // anything else: the server failed, a network error, …
	exitBadInput = 2 // bad flags or arguments, or the server refused the input (INVALID_ARGUMENT)
	exitAuth     = 3 // no, unknown or revoked API key, or a role the key lacks
	exitNotFound = 4 // the named fact, candidate, task or schema does not exist
	exitConflict = 5 // ALREADY_EXISTS or FAILED_PRECONDITION (a task in the wrong state, …), or a database not migrated
	exitDown     = 6 // the server cannot be reached or answers UNAVAILABLE
)

// exitError carries the process exit code along with the message main prints.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is what main exits with.
func (e *exitError) ExitCode() int { return e.code }

// badFlag is a bad-input error naming the flag: "--user: is required".
func badFlag(flag, format string, args ...any) error {
	return &exitError{code: exitBadInput, err: fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))}
}

// badArg is a bad-input error about a positional argument.
func badArg(format string, args ...any) error {
	return &exitError{code: exitBadInput, err: fmt.Errorf(format, args...)}
}

// exitCodeOf returns the exit code for an error returned by a command.
func exitCodeOf(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if errors.Is(err, storage.ErrNotMigrated) {
		return exitConflict // the database is in the wrong state: `engram migrate`
	}
	return exitFailure
}

// flagErrorFunc makes cobra's own flag errors (unknown flag, not an int) bad input.
func flagErrorFunc(_ *cobra.Command, err error) error {
	return &exitError{code: exitBadInput, err: err}
}

// positional wraps a cobra.PositionalArgs so that its error is bad input with usage.
func positional(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exitError{code: exitBadInput, err: fmt.Errorf("%w (usage: %s)", err, cmd.UseLine())}
		}
		return nil
	}
}

// apiOpts are the connection flags every API-backed command has.
type apiOpts struct {
	addr    string
	key     string
	asJSON  bool
	timeout time.Duration
}

func (o *apiOpts) register(f *pflag.FlagSet) {
	f.StringVar(&o.addr, "addr", "", "Engram API base URL (ENGRAM_ADDR, default http://127.0.0.1:8080)")
	f.StringVar(&o.key, "api-key", "", "API key (ENGRAM_API_KEY)")
	f.BoolVar(&o.asJSON, "json", false, "print JSON (the API's JSON encoding) instead of tables")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on the whole command after this long")
}

// apiBaseURL turns ENGRAM_ADDR or --addr into a base URL: a bare host:port (the form
// `engram serve --addr` takes) gets http:// in front.
func apiBaseURL(flag string) (string, error) {
	addr := strings.TrimSpace(flag)
	name := "addr"
	if addr == "" {
		addr = strings.TrimSpace(os.Getenv("ENGRAM_ADDR"))
		name = "addr (ENGRAM_ADDR)"
	}
	if addr == "" {
		return "http://127.0.0.1:8080", nil
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", badFlag(name, "%q is not an http(s) URL or host:port (e.g. http://127.0.0.1:8080)", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// conn is an API connection of one command run.
type conn struct {
	*client.Client
	url string
}

// dial checks the connection flags and returns a client. It does not call the
// server, so bad flags are reported before anything is sent.
func (o *apiOpts) dial() (*conn, error) {
	base, err := apiBaseURL(o.addr)
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(o.key)
	if key == "" {
		key = strings.TrimSpace(os.Getenv("ENGRAM_API_KEY"))
	}
	if key == "" {
		return nil, &exitError{code: exitAuth, err: errors.New("--api-key: no API key: set ENGRAM_API_KEY (engram dev prints one; engram keys create makes one)")}
	}
	return &conn{Client: client.New(base, key, client.WithRetry(3, 300*time.Millisecond)), url: base}, nil
}

// context bounds the command by --timeout.
func (o *apiOpts) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	if o.timeout <= 0 {
		return context.WithCancel(cmd.Context())
	}
	return context.WithTimeout(cmd.Context(), o.timeout)
}

// call dials (the connection flags are checked before anything is sent), runs f
// within --timeout, and turns its API error into one naming the flag at fault.
func call[T any](cmd *cobra.Command, o *apiOpts, fields fieldFlags, f func(context.Context, *conn) (T, error)) (T, error) {
	var none T
	c, err := o.dial()
	if err != nil {
		return none, err
	}
	ctx, cancel := o.context(cmd)
	defer cancel()
	res, err := f(ctx, c)
	if err != nil {
		return none, c.apiErr(err, fields)
	}
	return res, nil
}

// show prints an API message: as JSON with --json, else what text writes.
func (o *apiOpts) show(cmd *cobra.Command, m proto.Message, text func(io.Writer) error) error {
	if o.asJSON {
		return printJSON(cmd.OutOrStdout(), m)
	}
	return text(cmd.OutOrStdout())
}

// fieldFlags maps API field names (after any "event." or "events[i]." prefix) to
// the flags that set them, so a refusal names what the user typed.
type fieldFlags map[string]string

var fieldPath = regexp.MustCompile(`^(event\.|events\[\d+\]\.)`)

// apiErr turns an API error into a message naming the flag and an exit code.
func (c *conn) apiErr(err error, flags fieldFlags) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		return &exitError{code: exitFailure, err: fmt.Errorf("gave up after --timeout: %w", err)}
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return &exitError{code: exitFailure, err: err}
	}
	msg := ce.Message()
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		var parts []string
		for _, v := range client.FieldViolations(err) {
			parts = append(parts, describeField(v.Field, v.Description, flags))
		}
		if len(parts) == 0 {
			parts = append(parts, msg)
		}
		return &exitError{code: exitBadInput, err: errors.New(strings.Join(parts, "; "))}
	case connect.CodeUnauthenticated:
		return &exitError{code: exitAuth, err: fmt.Errorf("the API key was refused (%s): check ENGRAM_API_KEY", msg)}
	case connect.CodePermissionDenied:
		return &exitError{code: exitAuth, err: fmt.Errorf("permission denied: %s", msg)}
	case connect.CodeNotFound:
		return &exitError{code: exitNotFound, err: fmt.Errorf("not found: %s", msg)}
	case connect.CodeAlreadyExists, connect.CodeFailedPrecondition, connect.CodeAborted:
		return &exitError{code: exitConflict, err: errors.New(msg)}
	case connect.CodeUnavailable:
		if isTransport(msg) {
			return &exitError{code: exitDown, err: fmt.Errorf("cannot reach Engram at %s (--addr or ENGRAM_ADDR): %s; start it (make dev, or engram serve) or point --addr / ENGRAM_ADDR at it", c.url, rootCause(msg))}
		}
		return &exitError{code: exitDown, err: fmt.Errorf("engram is unavailable: %s", msg)}
	case connect.CodeDeadlineExceeded:
		return &exitError{code: exitFailure, err: fmt.Errorf("timed out: %s", msg)}
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("%s: %s", ce.Code(), msg)}
}

func isTransport(msg string) bool {
	for _, s := range []string{"connection refused", "no such host", "dial tcp", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// describeField renders one field violation, naming the flag when there is one.
func describeField(field, desc string, flags fieldFlags) string {
	base := fieldPath.ReplaceAllString(field, "")
	if f, ok := flags[base]; ok {
		where := ""
		if m := fieldPath.FindString(field); strings.HasPrefix(m, "events[") {
			where = " (" + strings.TrimSuffix(m, ".") + ")"
		}
		if strings.ToUpper(f) == f { // a positional argument, e.g. CANDIDATE_ID
			return fmt.Sprintf("%s%s: %s", f, where, desc)
		}
		return fmt.Sprintf("--%s%s: %s", f, where, desc)
	}
	return fmt.Sprintf("%s: %s", field, desc)
}

// writeTable writes a table: header, then the lines rows writes, as columns.
func writeTable(out io.Writer, header string, rows func(tw io.Writer)) error {
	tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	return tw.Flush()
}

// printRecords prints the operators' own records (keys, the access log, …): as
// JSON (printValue) with --json, else a table of header and what rows writes.
func printRecords(out io.Writer, asJSON bool, v any, header string, rows func(tw io.Writer)) error {
	if asJSON {
		return printValue(out, v)
	}
	return writeTable(out, header, rows)
}

// clip shortens s to n runes for a table cell, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if n > 0 && len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tsText(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// parseTime reads an RFC 3339 flag.
func parseTime(flag, v string) (*timestamppb.Timestamp, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return nil, badFlag(flag, "%q is not an RFC 3339 time (e.g. 2026-03-01T10:00:00Z)", v)
	}
	return timestamppb.New(t), nil
}

// enumName strips the enum's prefix: FACT_STATUS_ACTIVE → ACTIVE.
func enumName(full, prefix string) string { return strings.TrimPrefix(full, prefix) }

func scopeText(s *engramv1.ScopeRef) string {
	if s == nil {
		return "-"
	}
	name := strings.ToLower(enumName(s.Scope.String(), "SCOPE_"))
	switch s.Scope {
	case engramv1.Scope_SCOPE_TASK:
		return name + ":" + s.TaskId
	case engramv1.Scope_SCOPE_SESSION:
		return name + ":" + s.SessionId
	case engramv1.Scope_SCOPE_USER:
		return name + ":" + s.UserId
	case engramv1.Scope_SCOPE_AGENT:
		return name + ":" + s.AgentId
	case engramv1.Scope_SCOPE_DEPARTMENT:
		return name + ":" + s.DepartmentId
	}
	return name
}

// parseEnum reads a flag value as an enum: "active", "ACTIVE" or "FACT_STATUS_ACTIVE".
func parseEnum(flag, v, prefix string, values map[string]int32) (int32, error) {
	up := strings.ToUpper(strings.TrimSpace(v))
	if n, ok := values[up]; ok {
		return n, nil
	}
	if n, ok := values[prefix+up]; ok {
		return n, nil
	}
	var allowed []string
	for name, n := range values {
		if n != 0 {
			allowed = append(allowed, strings.ToLower(strings.TrimPrefix(name, prefix)))
		}
	}
	slices.Sort(allowed)
	return 0, badFlag(flag, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

// requireFlag fails when a string flag is empty.
func requireFlag(flag, v string) error {
	if strings.TrimSpace(v) == "" {
		return badFlag(flag, "is required")
	}
	return nil
}
