package testenv

import (
	"bufio"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Daemon is a long-running child process of a test (engram serve, engram dev)
// that says on stdout when it is ready.
type Daemon struct {
	Cmd  *osexec.Cmd
	Logs *LockedBuffer // its stderr
	done chan struct{}
	err  error
}

// Done is closed once the process has exited; Err then says how.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err waits for the process to exit and returns its exit error.
func (d *Daemon) Err() error {
	<-d.done
	return d.err
}

// StartDaemon starts cmd and reads its stdout until ready accepts a line,
// returning what ready took from it (e.g. the URL of "listening on URL"). The test
// fails if the process exits first or is not ready within wait. When the test
// ends the process is interrupted (and killed 20 s later) and, if the test failed,
// the tail of its log is logged.
func StartDaemon(t testing.TB, cmd *osexec.Cmd, wait time.Duration, ready func(line string) (string, bool)) (*Daemon, string) {
	t.Helper()
	name := strings.Join(append([]string{filepath.Base(cmd.Path)}, cmd.Args[1:]...), " ")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	d := &Daemon{Cmd: cmd, Logs: &LockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.Logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	values := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := ready(sc.Text()); ok {
				select {
				case values <- v:
				default: // ready once: later lines are read and dropped
				}
			}
		}
	}()
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-d.done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-d.done
			}
		}
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, Tail(d.Logs.String(), 4000))
		}
	})
	select {
	case v := <-values:
		return d, v
	case <-d.done:
		t.Fatalf("%s exited: %v\n%s", name, d.err, d.Logs.String())
	case <-time.After(wait):
		t.Fatalf("%s was not ready within %s\n%s", name, wait, d.Logs.String())
	}
	return nil, ""
}

// Listening is StartDaemon's ready for engram serve: the URL of its "listening on
// URL" line.
func Listening(line string) (string, bool) { return strings.CutPrefix(line, "listening on ") }
