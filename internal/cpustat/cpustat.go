// Package cpustat reads CPU time: this process's (getrusage) and other processes'
// (/proc/<pid>/stat, Linux). The benchmarks report CPU per operation beside
// latency, because on a shared two-core machine the CPU an operation burns is
// distorted far less by other work than its wall-clock time is.
package cpustat

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

// Self is this process's user + system CPU so far.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Proc reads a process's user + system time from /proc.
func Proc(pid int) (time.Duration, error) {
	_, d, err := stat(pid)
	return d, err
}

// stat reads a process's command name and user + system time.
func stat(pid int) (string, time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	open, i := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')') // the command may hold spaces
	if open < 0 || i < open {
		return "", 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // fields 14 and 15 (utime, stime) are f[11], f[12]
		return "", 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return s[open+1 : i], time.Duration(u+st) * time.Second / clockTicks, nil
}

// Process is one process's command name and CPU so far.
type Process struct {
	Name string
	CPU  time.Duration
}

// ByCommand reads every process on this machine whose command name is one of
// names, by pid; ok is false when /proc cannot be read. Compare two readings with
// Since, which counts only the processes in both.
func ByCommand(names ...string) (procs map[int]Process, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	procs = map[int]Process{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, d, err := stat(pid)
		if err != nil || !slices.Contains(names, name) {
			continue
		}
		procs[pid] = Process{Name: name, CPU: d}
	}
	return procs, true
}

// Since is the CPU per command name that the processes of reading now burnt since
// reading then; a process missing from either reading is left out.
func Since(then, now map[int]Process) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, p := range now {
		if q, ok := then[pid]; ok && q.Name == p.Name {
			out[p.Name] += p.CPU - q.CPU
		}
	}
	return out
}

// Machine is the whole machine's CPU time so far (/proc/stat, Linux): all of it
// and the part the hypervisor gave to other guests (steal). On a shared virtual
// machine a run whose steal is high measured a slower machine, not slower code.
type Machine struct{ Total, Steal time.Duration }

// ReadMachine reads /proc/stat's first line; ok is false where it cannot.
func ReadMachine() (Machine, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Machine{}, false
	}
	var m Machine
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already counted in user and nice
			break
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Machine{}, false
		}
		d := time.Duration(n) * time.Second / clockTicks
		m.Total += d
		if i == 7 {
			m.Steal = d
		}
	}
	return m, true
}

// StealPercent is the share of the machine's CPU time between then and now that
// the hypervisor gave to other guests (0 when nothing was measured).
func StealPercent(then, now Machine) float64 {
	if now.Total <= then.Total {
		return 0
	}
	return 100 * float64(now.Steal-then.Steal) / float64(now.Total-then.Total)
}

// LoadAvg is the machine's load (the first three fields of /proc/loadavg), to
// print beside figures measured on a shared machine.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
