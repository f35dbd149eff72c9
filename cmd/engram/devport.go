package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// devPIDFile is where a running `engram dev` notes its process id and URL, so a second
// one started on the same address can say which process to stop.
const devPIDFile = "dev.pid"

// writeDevPID notes this process and the URL it serves in stateDir; the returned func
// removes the note if it is still this process's.
func writeDevPID(stateDir, apiURL string) func() {
	file := filepath.Join(stateDir, devPIDFile)
	body := fmt.Sprintf("%d %s\n", os.Getpid(), apiURL)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		return func() {}
	}
	return func() {
		if b, err := os.ReadFile(file); err == nil && string(b) == body {
			_ = os.Remove(file)
		}
	}
}

// runningDev is the process id of the `engram dev` that noted it serves apiURL in
// stateDir and is still alive, or 0.
func runningDev(stateDir, apiURL string) int {
	b, err := os.ReadFile(filepath.Join(stateDir, devPIDFile))
	if err != nil {
		return 0
	}
	pidText, noted, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || noted != apiURL || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// portConflict says, when addr is taken by another process, who holds it and what to
// do (use it, stop it, or another port), as one error that exits 5 (a conflict); nil
// when addr is free. It listens for a moment to find out, before dev starts anything.
func portConflict(addr, stateDir string) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		return nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil // not a conflict: serving reports it
	}
	host, port, _ := net.SplitHostPort(addr)
	dial := host
	if dial == "" || dial == "0.0.0.0" || dial == "::" {
		dial = "127.0.0.1"
	}
	apiURL := "http://" + net.JoinHostPort(dial, port)

	other := "127.0.0.1:8081"
	if free := freePortAfter(host, port); free != "" {
		other = free
	}
	elsewhere := fmt.Sprintf("run this one on another port: --addr %s (scripts/dev --addr %s, or ENGRAM_ADDR=%s make dev)", other, other, other)

	var b strings.Builder
	pid := runningDev(stateDir, apiURL)
	switch {
	case pid != 0:
		fmt.Fprintf(&b, "%s is in use: engram dev (pid %d) already serves %s\n", addr, pid, apiURL)
	case answersHealthz(apiURL):
		fmt.Fprintf(&b, "%s is in use: an engram already serves %s\n", addr, apiURL)
	default:
		fmt.Fprintf(&b, "%s is in use by another program (not an engram)\n  stop it, or %s", addr, elsewhere)
		return &exitError{code: exitConflict, err: errors.New(b.String())}
	}
	keyFile := filepath.Join(stateDir, "dev-key")
	if _, err := os.Stat(keyFile); err == nil {
		fmt.Fprintf(&b, "  use it:   export ENGRAM_ADDR=%s ENGRAM_API_KEY=$(cat %s)\n", apiURL, shellQuote(displayPath(keyFile)))
	} else {
		fmt.Fprintf(&b, "  use it:   export ENGRAM_ADDR=%s ENGRAM_API_KEY=… (its key)\n", apiURL)
	}
	if pid != 0 {
		fmt.Fprintf(&b, "  stop it:  Ctrl-C in its terminal, or kill %d\n", pid)
	} else {
		fmt.Fprintf(&b, "  stop it:  Ctrl-C in its terminal\n")
	}
	fmt.Fprintf(&b, "  or %s", elsewhere)
	return &exitError{code: exitConflict, err: errors.New(b.String())}
}

// answersHealthz is true when an engram answers /healthz at apiURL.
func answersHealthz(apiURL string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(apiURL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"status":"ok"`)
}

// freePortAfter is host:p for the first of the next 20 ports p that is free now, or "".
func freePortAfter(host, port string) string {
	n, err := strconv.Atoi(port)
	if err != nil {
		return ""
	}
	for p := n + 1; p <= n+20 && p < 65536; p++ {
		a := net.JoinHostPort(host, strconv.Itoa(p))
		if ln, err := net.Listen("tcp", a); err == nil {
			ln.Close()
			return a
		}
	}
	return ""
}
