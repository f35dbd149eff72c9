package recallbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/engramhq/engram/storage"
)

// CPU time is what a shared machine cannot distort much: wall-clock latency on
// two busy cores measures the other work as well, the CPU a query burns does not.
// A measurement reads it twice, before and after: this process's (getrusage) and
// that of every server process connected to the bench database (/proc/<pid>/stat,
// when the server runs on this machine and /proc is readable).

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

type cpuSnapshot struct {
	self time.Duration
	pg   map[int]time.Duration // backend pid → its user + system CPU
	ok   bool                  // the server's processes were readable
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads a process's user + system time from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // fields 14 and 15 (utime, stime) are f[11], f[12]
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(u+st) * time.Second / clockTicks, nil
}

func (b *Runner) snapshotCPU(ctx context.Context, st *storage.Store) cpuSnapshot {
	s := cpuSnapshot{self: selfCPU(), pg: map[int]time.Duration{}}
	var pids []int
	if err := st.DB().NewRaw("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'").Scan(ctx, &pids); err != nil {
		return s
	}
	s.ok = len(pids) > 0
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			s.ok = false
			return s
		}
		s.pg[pid] = d
	}
	return s
}

// cpuSince is the CPU this process and the server burnt since a; a backend that
// appeared since counts from zero. pgOK is false when the server's processes could
// not be read (a remote server).
func (b *Runner) cpuSince(ctx context.Context, st *storage.Store, a cpuSnapshot) (self, pg time.Duration, pgOK bool) {
	z := b.snapshotCPU(ctx, st)
	self = z.self - a.self
	if !a.ok || !z.ok {
		return self, 0, false
	}
	for pid, d := range z.pg {
		pg += d - a.pg[pid]
	}
	return self, pg, true
}
