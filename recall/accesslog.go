package recall

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// accessEntry is one recall to log: who, why, what was asked and what was returned.
type accessEntry struct {
	req   Request
	items []Item
	at    time.Time
}

// accessLogger writes access_log rows and bumps access_count/last_accessed_at of
// the facts returned. Each write is one INSERT (one row per recall) and one UPDATE
// (each fact once, counted as often as it was returned), for a single recall or a
// batch of queued ones.
type accessLogger struct {
	db     *bun.DB
	mode   AccessLogMode
	logger *slog.Logger

	queue   chan accessEntry
	mu      sync.Mutex
	pending sync.WaitGroup
	done    chan struct{}
	once    sync.Once
}

const accessQueueSize = 4096

func newAccessLogger(db *bun.DB, mode AccessLogMode, logger *slog.Logger) *accessLogger {
	l := &accessLogger{db: db, mode: mode, logger: logger, done: make(chan struct{})}
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

// write stores the entries: one access_log row each, and for every fact returned
// access_count += times returned, last_accessed_at = latest. The update touches
// unindexed columns only, so it stays a HOT update (see the recall migration).
func (l *accessLogger) write(ctx context.Context, es []accessEntry) error {
	if len(es) == 0 {
		return nil
	}
	var sb strings.Builder
	var args []any
	sb.WriteString("INSERT INTO access_log (tenant_id, principal, purpose, user_id, query, fact_ids, evidence_ids, at) VALUES ")
	type bump struct {
		tenant, id string
		n          int
		at         time.Time
	}
	bumps := map[string]*bump{}
	var bumpOrder []string
	for i, e := range es {
		var fids, eids []string
		for _, it := range e.items {
			if !isUUID(it.ID) {
				continue
			}
			if it.Kind == KindFact {
				fids = append(fids, it.ID)
				key := e.req.Principal.TenantID + "/" + it.ID
				b, ok := bumps[key]
				if !ok {
					b = &bump{tenant: e.req.Principal.TenantID, id: it.ID}
					bumps[key] = b
					bumpOrder = append(bumpOrder, key)
				}
				b.n++
				if e.at.After(b.at) {
					b.at = e.at
				}
			} else {
				eids = append(eids, it.ID)
			}
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?::uuid[], ?::uuid[], ?)")
		principal := e.req.Principal.ID
		if principal == "" {
			principal = "user:" + e.req.Principal.UserID
		}
		q := e.req.Query
		if len(q) > 1000 {
			q = q[:1000]
		}
		args = append(args, e.req.Principal.TenantID, principal, e.req.Purpose, e.req.Principal.UserID, q,
			pgdialect.Array(nonNil(fids)), pgdialect.Array(nonNil(eids)), e.at)
	}
	return l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if l.mode == AccessLogAsync {
			// Queued entries are lost if the process dies anyway; waiting for the WAL
			// flush would only hold the writer's connection.
			if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
		}
		if _, err := tx.NewRaw(sb.String(), args...).Exec(ctx); err != nil {
			return fmt.Errorf("insert access log: %w", err)
		}
		if len(bumps) == 0 {
			return nil
		}
		// Sorted so that concurrent writers lock rows in the same order.
		slices.Sort(bumpOrder)
		tenants := make([]string, 0, len(bumps))
		ids := make([]string, 0, len(bumps))
		ns := make([]int, 0, len(bumps))
		ats := make([]time.Time, 0, len(bumps))
		for _, key := range bumpOrder {
			b := bumps[key]
			tenants, ids, ns, ats = append(tenants, b.tenant), append(ids, b.id), append(ns, b.n), append(ats, b.at)
		}
		_, err := tx.NewRaw(`UPDATE facts f SET access_count = f.access_count + u.n,
			last_accessed_at = greatest(coalesce(f.last_accessed_at, u.at), u.at)
			FROM unnest(?::text[], ?::uuid[], ?::int[], ?::timestamptz[]) AS u(tenant_id, id, n, at)
			WHERE f.tenant_id = u.tenant_id AND f.id = u.id`,
			pgdialect.Array(tenants), pgdialect.Array(ids), pgdialect.Array(ns), pgdialect.Array(ats)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update access counts: %w", err)
		}
		return nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
