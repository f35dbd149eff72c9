package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// devBanner is what `engram dev` prints once it serves: where everything is, the key,
// and what to paste into another shell or an MCP client.
type devBanner struct {
	APIURL, UIURL, Namespace string
	Key, KeyFile, Tenant     string
	ActionURL                string
	CLI                      string // how to run this binary from the working directory
	Exe                      string // this binary's absolute path: MCP clients start it from anywhere
	Stack                    string // scripts/stack when dev ran it, else "" (the settings came from the environment)
	Env                      [][2]string
}

// engineEnv is the engine's configuration taken from the environment (what `engram mcp`
// needs to reach the same database, Temporal and task queue as this dev), sorted by name.
func engineEnv(environ []string) [][2]string {
	var out [][2]string
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ENGRAM_") && !strings.HasPrefix(name, "TEMPORAL_") && !strings.HasPrefix(name, "OTEL_") {
			continue
		}
		switch name { // read by the CLI or by dev, not by the engine's configuration
		case "ENGRAM_ADDR", "ENGRAM_API_KEY", "ENGRAM_STATE_DIR", "ENGRAM_TEMPORAL_UI_URL", "ENGRAM_TEMPORAL_BIN", "ENGRAM_DEBUG":
			continue
		}
		out = append(out, [2]string{name, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// executable is this binary's absolute path, or the CLI's name when it was built by
// `go run` into a folder that is gone once it stops.
func executable(cli string) string {
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, "go-build") {
		return cli
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	return exe
}

// mcpConfigs are the MCP client configurations ("mcpServers", as in
// claude_desktop_config.json or .cursor/mcp.json) for stdio and for Streamable HTTP.
func (b devBanner) mcpConfigs() (stdio, http string) {
	env := map[string]string{"ENGRAM_API_KEY": b.Key}
	for _, kv := range b.Env {
		env[kv[0]] = kv[1]
	}
	type server struct { // fields in the order MCP clients' documentation shows them
		Type    string            `json:"type,omitempty"`
		Command string            `json:"command,omitempty"`
		Args    []string          `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		URL     string            `json:"url,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
	}
	config := func(s server) string {
		return compactJSON(map[string]any{"mcpServers": map[string]server{"engram": s}})
	}
	return config(server{Command: b.Exe, Args: []string{"mcp"}, Env: env}),
		config(server{Type: "http", URL: strings.TrimRight(b.APIURL, "/") + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + b.Key}})
}

// compactJSON is v on one line, URLs left as written (no \u0026).
func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // maps of strings always encode
	}
	return strings.TrimSpace(buf.String())
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envLine sets, in another shell, the settings operators' commands (erase, keys,
// migrate, mcp) read: the stack's own command when dev ran it, else the values.
func (b devBanner) envLine() string {
	if b.Stack != "" {
		return fmt.Sprintf(`eval "$(%s env)"`, b.Stack)
	}
	parts := []string{"export"}
	for _, kv := range b.Env {
		parts = append(parts, kv[0]+"="+shellQuote(kv[1]))
	}
	return strings.Join(parts, " ")
}

func (b devBanner) print(out io.Writer) {
	ui, pending := "(not set: ENGRAM_TEMPORAL_UI_URL)", ""
	if b.UIURL != "" {
		ui = b.UIURL
		q := url.Values{"query": {`EngramReview="PENDING"`}}
		pending = fmt.Sprintf("%s/namespaces/%s/workflows?%s", strings.TrimRight(b.UIURL, "/"), b.Namespace, q.Encode())
	}
	fmt.Fprintf(out, `
Engram is running (%s)

  API              %s   (Connect, gRPC, gRPC-Web; worker in this process)
  MCP              %s/mcp   (Streamable HTTP; stdio: %s mcp; client configs below)
  Temporal Web UI  %s
`, time.Now().Format("15:04:05"), b.APIURL, strings.TrimRight(b.APIURL, "/"), b.CLI, ui)
	if pending != "" {
		fmt.Fprintf(out, "  pending reviews  %s\n", pending)
	}
	e := b.CLI
	fmt.Fprintf(out, `  API key          %s
                   (tenant %s; admin, agent, reviewer; kept in %s)
  action endpoint  %s   (go run ./examples/travelagent serves it)

Try it from another shell:

  %s
  export ENGRAM_ADDR=%s ENGRAM_API_KEY=%s

  # 1. ingest: remember the user's budget
  %s ingest --user u1 --schema travel --text "预算不超过8000元" --wait

  # 2. recall: what should the agent remember now?
  %s recall --user u1 --schema travel --query "预算是多少"

  # 3. review: an inferred preference waits for a reviewer (here, or in the Web UI)
  %s ingest --user u1 --schema travel --text "我上次坐了靠窗的位置，挺好" --wait
  %s review list
  %s review confirm CANDIDATE_ID

`, b.Key, b.Tenant, b.KeyFile, b.ActionURL, b.envLine(), b.APIURL, b.Key, e, e, e, e, e)
	stdio, http := b.mcpConfigs()
	fmt.Fprintf(out, `MCP client config (claude_desktop_config.json, .cursor/mcp.json), stdio:

  %s

or HTTP (while this runs):

  %s

Ctrl-C stops engram; the stack keeps running (scripts/stack down stops it).
`, stdio, http)
}
