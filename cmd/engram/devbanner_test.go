package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The banner of a dev that ran scripts/stack: the stack's env line, and MCP configs
// that are JSON (values with quotes, & and spaces included) naming this binary, the
// engine's environment and the key, and the API's /mcp.
func TestDevBannerEnvLineAndMCPConfigs(t *testing.T) {
	b := devBanner{
		APIURL: "http://127.0.0.1:8080", UIURL: "http://127.0.0.1:8233", Namespace: "default",
		Key: "egk_k1", KeyFile: "/x/.engram/dev-key", Tenant: "dev", ActionURL: defaultActionURL,
		CLI: "./bin/engram", Exe: "/x/bin/engram", Stack: "./scripts/stack",
		Env: engineEnv([]string{
			"ENGRAM_DATABASE_URL=postgres://u:p@h:5432/d?sslmode=disable&x=\"y\"", "TEMPORAL_ADDRESS=127.0.0.1:7233",
			"ENGRAM_TASK_QUEUE=it's q", "ENGRAM_ADDR=127.0.0.1:8080", "ENGRAM_API_KEY=egk_other",
			"ENGRAM_TEMPORAL_UI_URL=http://ui", "HOME=/root", "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:4318",
		}),
	}
	var out bytes.Buffer
	b.print(&out)
	banner := out.String()
	if !strings.Contains(banner, "\n  eval \"$(./scripts/stack env)\"\n  export ENGRAM_ADDR=http://127.0.0.1:8080 ENGRAM_API_KEY=egk_k1\n") {
		t.Errorf("no env lines for another shell:\n%s", banner)
	}
	var configs []map[string]any
	for _, line := range strings.Split(banner, "\n") {
		if strings.HasPrefix(line, `  {"mcpServers"`) {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("MCP config is not JSON (%v): %s", err, line)
			}
			configs = append(configs, v["mcpServers"].(map[string]any)["engram"].(map[string]any))
		}
	}
	if len(configs) != 2 {
		t.Fatalf("want 2 MCP configs (stdio, HTTP), got %d:\n%s", len(configs), banner)
	}
	stdio, http := configs[0], configs[1]
	wantEnv := map[string]any{
		"ENGRAM_API_KEY": "egk_k1", "ENGRAM_DATABASE_URL": "postgres://u:p@h:5432/d?sslmode=disable&x=\"y\"",
		"TEMPORAL_ADDRESS": "127.0.0.1:7233", "ENGRAM_TASK_QUEUE": "it's q", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
	}
	if stdio["command"] != "/x/bin/engram" || len(stdio["args"].([]any)) != 1 || stdio["args"].([]any)[0] != "mcp" {
		t.Errorf("stdio config runs %v %v, want /x/bin/engram mcp", stdio["command"], stdio["args"])
	}
	if got, _ := json.Marshal(stdio["env"]); string(got) != mustJSON(t, wantEnv) {
		t.Errorf("stdio env %s, want %s", got, mustJSON(t, wantEnv))
	}
	if http["type"] != "http" || http["url"] != "http://127.0.0.1:8080/mcp" ||
		http["headers"].(map[string]any)["Authorization"] != "Bearer egk_k1" {
		t.Errorf("HTTP config %v", http)
	}
}

// Without scripts/stack (--no-stack), the env line sets the values themselves, quoted
// for the shell.
func TestDevBannerEnvLineWithoutStack(t *testing.T) {
	b := devBanner{Env: engineEnv([]string{"ENGRAM_DATABASE_URL=postgres://h/d?a=1&b=2", "ENGRAM_TASK_QUEUE=it's q"})}
	line := b.envLine()
	out, err := exec.Command("sh", "-c", line+`; printf '%s|%s' "$ENGRAM_DATABASE_URL" "$ENGRAM_TASK_QUEUE"`).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	if string(out) != "postgres://h/d?a=1&b=2|it's q" {
		t.Errorf("%q sets %q", line, out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
