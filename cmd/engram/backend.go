package main

// Errors of the commands that reach Postgres or Temporal themselves (migrate, keys,
// audit, erase, maintenance, schema suggest, serve, worker, mcp, eval, bench): main
// passes every error through explainBackend, so each command says the same thing
// when a backend is down (exit 6, the address tried and how to set it) or its
// configuration is missing or wrong (exit 2, the variable and how to set it).

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/uptrace/bun/driver/pgdriver"
	"go.temporal.io/api/serviceerror"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/memory"
)

// stackHint is how a user of the local stack gets its settings into a shell.
const stackHint = `for the local stack: scripts/stack up (or make dev), then eval "$(scripts/stack env)" in this shell`

// settingHelp says what each connection setting holds, for "is not set" errors.
var settingHelp = map[string]string{
	"ENGRAM_DATABASE_URL": "the Postgres URL, e.g. postgres://engram:engram@127.0.0.1:5432/engram?sslmode=disable",
	"TEMPORAL_ADDRESS":    "the Temporal frontend's host:port, e.g. 127.0.0.1:7233",
}

// loadConfig reads the configuration from the environment; a bad value is bad
// input naming the variable.
func loadConfig() (config.Config, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return cfg, &exitError{code: exitBadInput, err: fmt.Errorf("%w (fix the variable in the environment; README: Configuration)", err)}
	}
	return cfg, nil
}

// missingSetting is the error for a connection setting that is not set: what it
// holds (and why, when note says), and how to set it.
func missingSetting(name, note string) error {
	what := settingHelp[name]
	if note != "" {
		what += "; " + note
	}
	if what != "" {
		what = " (" + what + ")"
	}
	return &exitError{code: exitBadInput, err: fmt.Errorf("%s is not set%s: set it, or %s", name, what, stackHint)}
}

// explainBackend rewrites an error that comes from a backend being unreachable or
// misconfigured into one that names the fix; other errors pass unchanged.
func explainBackend(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	var fe memory.FieldError
	if errors.As(err, &fe) && isSetting(fe.Field) {
		return missingSetting(fe.Field, "")
	}
	var unavailable *serviceerror.Unavailable
	if errors.As(err, &unavailable) {
		addr, set := setting("TEMPORAL_ADDRESS", "127.0.0.1:7233")
		return &exitError{code: exitDown, err: fmt.Errorf("cannot reach Temporal at %s (%s): %s; %s, or set TEMPORAL_ADDRESS to your Temporal frontend",
			addr, set, rootCause(unavailable.Error()), stackHint)}
	}
	var pe pgdriver.Error
	if errors.As(err, &pe) {
		switch pe.Field('C') {
		case "28P01", "28000", "3D000": // wrong password, no such role, no such database
			return &exitError{code: exitBadInput, err: fmt.Errorf("Postgres refused ENGRAM_DATABASE_URL: %s; check its user, password and database, or %s", pe.Field('M'), stackHint)}
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return err // an HTTP backend (LLM, embedder, keyword index): its own message names it
	}
	if addr, ok := dialAddr(err); ok {
		return &exitError{code: exitDown, err: fmt.Errorf("cannot reach Postgres at %s (the host in ENGRAM_DATABASE_URL): %s; %s, or set ENGRAM_DATABASE_URL to your database",
			addr, rootCause(err.Error()), stackHint)}
	}
	return err
}

// dialAddr returns the address of a failed network dial in err's chain.
func dialAddr(err error) (string, bool) {
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Name, true
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		if oe.Addr != nil {
			return oe.Addr.String(), true
		}
		return "?", true
	}
	return "", false
}

func isSetting(name string) bool {
	return strings.HasPrefix(name, "ENGRAM_") || strings.HasPrefix(name, "TEMPORAL_")
}

// setting is an environment variable's value, and how it came to be used.
func setting(name, def string) (value, how string) {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v, name
	}
	return def, name + " is not set; this is its default"
}

// rootCause keeps the last part of a chain of wrapped messages ("…: dial tcp
// 127.0.0.1:1: connect: connection refused" → "connection refused").
func rootCause(msg string) string {
	msg = strings.TrimRight(strings.TrimSpace(msg), `"`)
	for _, end := range []string{"connection refused", "no such host", "i/o timeout", "network is unreachable", "connection reset by peer", "no route to host"} {
		if strings.HasSuffix(msg, end) {
			return end
		}
	}
	return msg
}
