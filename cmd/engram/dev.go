package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/storage"
)

// defaultActionURL is where `engram dev` points side-effecting task steps when
// ENGRAM_ACTION_URL is unset: the action server of examples/travelagent.
const defaultActionURL = "http://127.0.0.1:8091/actions"

func devCmd() *cobra.Command {
	var addr, stateDir, tenant string
	var noStack bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "One command to run it all: stack, migrations, a dev API key, API + worker",
		Long: `engram dev brings up a complete local Engram:

  1. the stack: runs scripts/stack up from the checkout (found from the current
     directory or the binary's) and takes its environment (scripts/stack env); without
     a checkout, or with --no-stack, ENGRAM_DATABASE_URL and TEMPORAL_ADDRESS must be set
  2. database migrations
  3. a dev API key (tenant "dev", roles admin, agent and reviewer), kept in
     <state dir>/dev-key and reused while it is valid
  4. the API (Connect, gRPC, gRPC-Web) and the Temporal worker in this process

and prints the API address, the Temporal Web UI, the key, the lines to paste into
another shell, MCP client configs (stdio and HTTP) and examples to copy. When --addr is
already served (another engram dev?) it stops before starting anything, says what serves
it and exits 5. Ctrl-C stops what it started; the stack keeps running (scripts/stack down
stops it).`,
		Args: positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			errw := cmd.ErrOrStderr()
			say := func(format string, args ...any) { fmt.Fprintf(errw, "[dev] "+format+"\n", args...) }

			root := findCheckout()
			if stateDir == "" {
				stateDir = os.Getenv("ENGRAM_STATE_DIR")
			}
			if stateDir == "" {
				base := root
				if base == "" {
					base, _ = os.Getwd()
				}
				stateDir = filepath.Join(base, ".engram")
			}
			// What is missing, or a second dev on the same address, is said before
			// anything starts.
			stacked := !noStack && root != ""
			if !stacked && (os.Getenv("ENGRAM_DATABASE_URL") == "" || os.Getenv("TEMPORAL_ADDRESS") == "") {
				why := "no checkout with scripts/stack was found from here"
				if noStack {
					why = "--no-stack"
				}
				return &exitError{code: exitBadInput, err: fmt.Errorf("%s: set ENGRAM_DATABASE_URL and TEMPORAL_ADDRESS (and ENGRAM_TEMPORAL_UI_URL), e.g. eval \"$(scripts/stack env)\"", why)}
			}
			if err := portConflict(addr, stateDir); err != nil {
				return err
			}
			if stacked {
				say("bringing up the stack (%s up)", filepath.Join(root, "scripts/stack"))
				if err := runStack(ctx, root, errw, nil, "up"); err != nil {
					return fmt.Errorf("scripts/stack up: %w", err)
				}
				var env bytes.Buffer
				if err := runStack(ctx, root, errw, &env, "env"); err != nil {
					return fmt.Errorf("scripts/stack env: %w", err)
				}
				vars, err := parseExports(env.String())
				if err != nil {
					return fmt.Errorf("scripts/stack env: %w", err)
				}
				for _, kv := range vars {
					os.Setenv(kv[0], kv[1])
				}
			}
			if os.Getenv("ENGRAM_ACTION_URL") == "" {
				os.Setenv("ENGRAM_ACTION_URL", defaultActionURL)
			}
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}

			st, err := storage.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			applied, err := st.Migrate(ctx)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			say("database migrated (%d migration(s) applied now)", len(applied))

			key, reused, err := devKey(ctx, st, stateDir, tenant)
			if err != nil {
				return err
			}
			keyFile := filepath.Join(stateDir, "dev-key")
			if reused {
				say("reusing the dev API key in %s", keyFile)
			} else {
				say("created a dev API key (tenant %s; admin, agent, reviewer), saved in %s", tenant, keyFile)
			}
			st.Close()

			// Serve in this process: the same command as `engram serve`.
			listen := make(chan string, 1)
			srv := serveCmd()
			srv.SetArgs([]string{"--addr", addr})
			srv.SetOut(&lineWatch{prefix: "listening on ", found: listen})
			srv.SetErr(errw)
			srv.SilenceErrors, srv.SilenceUsage = true, true // main prints the error, once
			done := make(chan error, 1)
			go func() { done <- srv.ExecuteContext(ctx) }()
			var apiURL string
			select {
			case apiURL = <-listen:
			case err := <-done:
				if err == nil {
					err = errors.New("stopped before listening")
				}
				if errors.Is(err, syscall.EADDRINUSE) { // taken while dev was starting
					if cerr := portConflict(addr, stateDir); cerr != nil {
						return cerr
					}
				}
				return fmt.Errorf("engram serve: %w", err)
			}
			defer writeDevPID(stateDir, apiURL)()
			banner := devBanner{
				APIURL: apiURL, UIURL: os.Getenv("ENGRAM_TEMPORAL_UI_URL"), Namespace: cfg.TemporalNamespace,
				Key: key, KeyFile: keyFile, Tenant: tenant, ActionURL: os.Getenv("ENGRAM_ACTION_URL"),
				CLI: cliName(), Env: engineEnv(os.Environ()),
			}
			banner.Exe = executable(banner.CLI)
			if stacked {
				banner.Stack = displayPath(filepath.Join(root, "scripts", "stack"))
			}
			banner.print(cmd.OutOrStdout())
			err = <-done
			say("stopped engram (the stack keeps running; scripts/stack down stops it)")
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	def := strings.TrimPrefix(strings.TrimSpace(os.Getenv("ENGRAM_ADDR")), "http://")
	if def == "" || strings.Contains(def, "://") {
		def = "127.0.0.1:8080"
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", strings.TrimRight(def, "/"), "address the API listens on (ENGRAM_ADDR)")
	f.BoolVar(&noStack, "no-stack", false, "do not run scripts/stack: use ENGRAM_DATABASE_URL, TEMPORAL_ADDRESS … as set")
	f.StringVar(&stateDir, "state-dir", "", "where the dev key is kept (default: ENGRAM_STATE_DIR, else .engram in the checkout)")
	f.StringVar(&tenant, "tenant", "dev", "tenant of the dev API key")
	return cmd
}

// findCheckout looks for Engram's checkout (scripts/stack next to go.mod) from the
// working directory and from the binary's directory upwards.
func findCheckout() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(filepath.Join(d, "scripts", "stack")); err == nil && !fi.IsDir() {
				if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(mod, []byte("module github.com/engramhq/engram")) {
					return d
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

func runStack(ctx context.Context, root string, errw io.Writer, stdout io.Writer, arg string) error {
	c := exec.CommandContext(ctx, filepath.Join(root, "scripts", "stack"), arg)
	c.Dir = root
	c.Stderr = errw
	if stdout != nil {
		c.Stdout = stdout
	} else {
		c.Stdout = errw
	}
	return c.Run()
}

// parseExports reads `export NAME='value'` lines (shell single quotes, '\” for a
// quote, backslash escapes and double quotes outside them).
func parseExports(s string) ([][2]string, error) {
	var out [][2]string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, "export ")
		if !ok {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		name, raw, ok := strings.Cut(strings.TrimSpace(rest), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		var v strings.Builder
		for i := 0; i < len(raw); i++ {
			switch raw[i] {
			case '\'', '"':
				j := strings.IndexByte(raw[i+1:], raw[i])
				if j < 0 {
					return nil, fmt.Errorf("unterminated quote in %q", line)
				}
				v.WriteString(raw[i+1 : i+1+j])
				i += j + 1
			case '\\':
				if i+1 < len(raw) {
					i++
					v.WriteByte(raw[i])
				}
			default:
				v.WriteByte(raw[i])
			}
		}
		out = append(out, [2]string{name, v.String()})
	}
	return out, nil
}

// devKey returns the dev API key kept in stateDir/dev-key while it is still valid
// (known, not revoked, of the tenant, with every role), else creates and keeps a new one.
func devKey(ctx context.Context, st *storage.Store, stateDir, tenant string) (string, bool, error) {
	file := filepath.Join(stateDir, "dev-key")
	if b, err := os.ReadFile(file); err == nil {
		key := strings.TrimSpace(string(b))
		if k, err := st.LookupAPIKey(ctx, key); err == nil && k.TenantID == tenant &&
			k.HasRole(storage.RoleAdmin) && k.HasRole(storage.RoleAgent) && k.HasRole(storage.RoleReviewer) {
			return key, true, nil
		} else if err != nil && !errors.Is(err, storage.ErrBadKey) {
			return "", false, fmt.Errorf("check the dev key: %w", err)
		}
	}
	k := &storage.APIKey{TenantID: tenant, Principal: "dev", Roles: []string{storage.RoleAdmin, storage.RoleAgent, storage.RoleReviewer}}
	key, err := st.CreateAPIKey(ctx, k)
	if err != nil {
		return "", false, fmt.Errorf("create the dev key: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("keep the dev key: %w", err)
	}
	return key, false, nil
}

// lineWatch passes the first line starting with prefix (without it) to found.
type lineWatch struct {
	prefix string
	found  chan string
	mu     sync.Mutex
	buf    []byte
	done   bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if v, ok := strings.CutPrefix(line, w.prefix); ok {
			w.done = true
			w.found <- strings.TrimSpace(v)
			return len(p), nil
		}
	}
}

// cliName is how the user ran this binary, for the examples.
func cliName() string {
	a := os.Args[0]
	if strings.Contains(a, "go-build") || a == "" {
		return "engram"
	}
	if filepath.IsAbs(a) {
		return displayPath(a)
	}
	return a
}

// displayPath is p relative to the working directory when it is under it ("./bin/engram"),
// else p.
func displayPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return p
}
