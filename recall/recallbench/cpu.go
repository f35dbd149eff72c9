package recallbench

import (
	"context"
	"time"

	"github.com/engramhq/engram/internal/cpustat"
	"github.com/engramhq/engram/storage"
)

// CPU time is what a shared machine cannot distort much: wall-clock latency on
// two busy cores measures the other work as well, the CPU a query burns does not.
// A measurement reads it twice, before and after: this process's (getrusage) and
// that of every server process connected to the bench database (/proc/<pid>/stat,
// when the server runs on this machine and /proc is readable).

type cpuSnapshot struct {
	self time.Duration
	pg   map[int]time.Duration // backend pid → its user + system CPU
	ok   bool                  // the server's processes were readable
}

func (b *Runner) snapshotCPU(ctx context.Context, st *storage.Store) cpuSnapshot {
	s := cpuSnapshot{self: cpustat.Self(), pg: map[int]time.Duration{}}
	var pids []int
	if err := st.DB().NewRaw("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'").Scan(ctx, &pids); err != nil {
		return s
	}
	s.ok = len(pids) > 0
	for _, pid := range pids {
		d, err := cpustat.Proc(pid)
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
