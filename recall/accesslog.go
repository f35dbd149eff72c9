package recall

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/engramhq/engram/storage"
)

// accessEntry is one recall to log: who, why, what was asked and what was returned.
type accessEntry struct {
	req   Request
	items []Item
	at    time.Time
}

// accessLogger writes access_log rows and bumps the read counts of the facts
// returned in fact_access (storage.RecordAccess: one INSERT and one upsert), for a
// single recall or a batch of queued ones.
type accessLogger struct {
	store  *storage.Store
	mode   AccessLogMode
	logger *slog.Logger

	queue   chan accessEntry
	mu      sync.Mutex
	pending sync.WaitGroup
	done    chan struct{}
	once    sync.Once
}

const accessQueueSize = 4096

func newAccessLogger(store *storage.Store, mode AccessLogMode, logger *slog.Logger) *accessLogger {
	l := &accessLogger{store: store, mode: mode, logger: logger, done: make(chan struct{})}
	if mode == AccessLogAsync {
		l.queue = make(chan accessEntry, accessQueueSize)
		go l.loop()
	} else {
		close(l.done)
	}
	return l
}

func (l *accessLogger) record(ctx context.Context, e accessEntry) error {
	if e.at.IsZero() {
		e.at = time.Now().UTC()
	}
	switch l.mode {
	case AccessLogOff:
		return nil
	case AccessLogSync:
		return l.write(ctx, []accessEntry{e})
	}
	l.pending.Add(1)
	select {
	case l.queue <- e:
		return nil
	default:
		// Queue full: this recall writes its own entry (back-pressure, nothing lost).
		l.pending.Done()
		return l.write(ctx, []accessEntry{e})
	}
}

// accessLinger is how long the background writer waits for more entries after
// the first one of a batch: one transaction per recall (BEGIN, INSERT, UPDATE,
// COMMIT, and the facts' row versions) cost the recalls beside it more server CPU
// than their statements; a batch of the recalls of 20 ms costs about one.
const (
	accessLinger   = 20 * time.Millisecond
	accessBatchMax = 256
)

func (l *accessLogger) loop() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for e := range l.queue {
		batch := []accessEntry{e}
		timer.Reset(accessLinger)
	drain:
		for len(batch) < accessBatchMax {
			select {
			case more, ok := <-l.queue:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			case <-timer.C:
				break drain
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if err = l.write(ctx, batch); err == nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
		}
		cancel()
		if err != nil {
			l.logger.Error("recall: access log write failed", "entries", len(batch), "err", err)
		}
		for range batch {
			l.pending.Done()
		}
	}
}

func (l *accessLogger) flush(ctx context.Context) error {
	ch := make(chan struct{})
	go func() { l.pending.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *accessLogger) close() error {
	l.once.Do(func() {
		if l.queue != nil {
			close(l.queue)
		}
	})
	<-l.done
	return nil
}

// write stores the entries through the store's one access-log writer, counting
// the facts returned as read.
func (l *accessLogger) write(ctx context.Context, es []accessEntry) error {
	rows := make([]storage.AccessEntry, 0, len(es))
	for _, e := range es {
		var fids, eids []string
		for _, it := range e.items {
			if !isUUID(it.ID) {
				continue
			}
			if it.Kind == KindFact {
				fids = append(fids, it.ID)
			} else {
				eids = append(eids, it.ID)
			}
		}
		principal := e.req.Principal.ID
		if principal == "" {
			principal = "user:" + e.req.Principal.UserID
		}
		rows = append(rows, storage.AccessEntry{TenantID: e.req.Principal.TenantID, Principal: principal, Purpose: e.req.Purpose,
			UserID: e.req.Principal.UserID, Query: e.req.Query, FactIDs: fids, EvidenceIDs: eids, At: e.at})
	}
	// Queued (async) entries are lost if the process dies anyway: their commit need
	// not wait for the WAL flush, which would only hold the writer's connection.
	return l.store.RecordAccess(ctx, rows, true, l.mode == AccessLogAsync)
}
