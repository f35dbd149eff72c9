package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// ExpireDue closes ACTIVE facts whose valid_until is at or before now: each becomes
// EXPIRED (status change with reason and closed_at on the revision; nothing is
// deleted) and an outbox row tells the indexes. It handles at most limit facts and
// returns how many it expired; call it until it returns 0.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = 200
	}
	var due []struct {
		TenantID  string `bun:"tenant_id"`
		MemoryKey string `bun:"memory_key"`
	}
	if err := s.conn(ctx).NewSelect().Table("facts").Column("tenant_id", "memory_key").
		Where("status = 'ACTIVE' AND valid_until IS NOT NULL AND valid_until <= ?", now).
		Order("valid_until").Limit(int64(limit)).Scan(ctx, &due); err != nil {
		return 0, fmt.Errorf("find expired facts: %w", err)
	}
	n := 0
	for _, d := range due {
		err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			cur, err := CurrentFact(ctx, tx, d.TenantID, d.MemoryKey)
			if err == ErrNotFound || (err == nil && (cur.ValidUntil == nil || cur.ValidUntil.After(now))) {
				return nil // changed since the scan
			}
			if err != nil {
				return err
			}
			closed, err := CloseFact(ctx, tx, d.TenantID, d.MemoryKey, memory.FactExpired, now,
				fmt.Sprintf("expired: valid until %s", cur.ValidUntil.UTC().Format(time.RFC3339)))
			if err == ErrNotFound {
				return nil
			}
			if err != nil {
				return err
			}
			n++
			return EnqueueFact(ctx, tx, d.TenantID, closed.ID)
		})
		if err != nil {
			return n, fmt.Errorf("expire %s: %w", d.MemoryKey, err)
		}
	}
	return n, nil
}

// EnqueueFact queues a fact revision for the external keyword index (the outbox
// the indexer drains), in the caller's transaction so the two commit together.
// It is the only writer of fact rows to the outbox.
func EnqueueFact(ctx context.Context, db bun.IDB, tenantID, factID string) error {
	_, err := db.NewRaw("INSERT INTO outbox (tenant_id, kind, ref_id, op) VALUES (?, 'FACT', ?, 'UPSERT')", tenantID, factID).Exec(ctx)
	return err
}

// DecayPolicy lowers the importance of facts nobody read for a while.
type DecayPolicy struct {
	IdleFor time.Duration // not accessed (or recorded) for this long
	Factor  float64       // importance *= Factor per run (0 < Factor < 1)
	Floor   float64       // never below this
}

// DecayImportance applies one round of decay to ACTIVE facts idle since now-IdleFor,
// at most limit rows; it returns how many changed.
func (s *Store) DecayImportance(ctx context.Context, now time.Time, p DecayPolicy, limit int) (int, error) {
	if p.Factor <= 0 || p.Factor >= 1 {
		return 0, memory.FieldError{Field: "decay.factor", Problem: fmt.Sprintf("%.3f must be between 0 and 1", p.Factor)}
	}
	if limit <= 0 {
		limit = 1000
	}
	res, err := s.conn(ctx).NewRaw(`UPDATE facts SET importance = greatest(?::real, importance * ?::real)
		WHERE ctid IN (SELECT f.ctid FROM facts f LEFT JOIN fact_access a ON a.tenant_id = f.tenant_id AND a.fact_id = f.id
			WHERE f.status = 'ACTIVE' AND f.importance > ?::real AND coalesce(a.last_accessed_at, f.recorded_at) < ? LIMIT ?)`,
		p.Floor, p.Factor, p.Floor+1e-6, now.Add(-p.IdleFor), limit).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("decay importance: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// PrunePolicy removes low-value episodes that never became memory.
type PrunePolicy struct {
	OlderThan     time.Duration // occurred before now-OlderThan
	MaxImportance float64       // importance at most this
}

// PruneEvidence deletes evidence that supports (or contradicts) no fact, is not
// waiting for a review, is older than the policy allows and of low importance; then
// the events left without evidence and without facts. A fact's evidence is never
// pruned. It handles at most limit rows and returns evidence and events deleted.
func (s *Store) PruneEvidence(ctx context.Context, now time.Time, p PrunePolicy, limit int) (evidence, events int, err error) {
	if limit <= 0 {
		limit = 500
	}
	cutoff := now.Add(-p.OlderThan)
	err = s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var ids []string
		if err := tx.NewRaw(`SELECT e.id::text FROM evidence e
			WHERE e.occurred_at < ? AND e.importance <= ?::real
			AND NOT EXISTS (SELECT 1 FROM fact_evidence fe WHERE fe.tenant_id = e.tenant_id AND fe.evidence_id = e.id)
			AND NOT EXISTS (SELECT 1 FROM candidate_evidence ce JOIN candidates c ON c.tenant_id = ce.tenant_id AND c.id = ce.candidate_id
				WHERE ce.tenant_id = e.tenant_id AND ce.evidence_id = e.id AND (c.status IN ('PENDING', 'NEEDS_CONFIRMATION') OR c.fact_id IS NOT NULL))
			AND NOT EXISTS (SELECT 1 FROM events ev WHERE ev.tenant_id = e.tenant_id AND ev.id = e.event_id AND ev.status IN ('RECEIVED', 'PROCESSING', 'PENDING_REVIEW'))
			ORDER BY e.occurred_at LIMIT ? FOR UPDATE SKIP LOCKED`, cutoff, p.MaxImportance, limit).Scan(ctx, &ids); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.NewRaw("DELETE FROM outbox WHERE kind = 'EVIDENCE' AND ref_id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
			return err
		}
		res, err := tx.NewRaw("DELETE FROM evidence WHERE id IN (?)", bun.In(ids)).Exec(ctx)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		evidence = int(n)
		res, err = tx.NewRaw(`DELETE FROM events ev WHERE ev.occurred_at < ? AND ev.status IN ('COMMITTED', 'UNPARSED', 'FAILED')
			AND NOT EXISTS (SELECT 1 FROM evidence e WHERE e.tenant_id = ev.tenant_id AND e.event_id = ev.id)
			AND NOT EXISTS (SELECT 1 FROM candidates c WHERE c.tenant_id = ev.tenant_id AND c.event_id = ev.id AND c.fact_id IS NOT NULL)`, cutoff).Exec(ctx)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		events = int(n)
		return nil
	})
	return evidence, events, err
}

// ConsolidationGroup is a set of fine-grained ACTIVE facts about one subject,
// predicate and entity in one scope, numerous enough to fold into a summary.
type ConsolidationGroup struct {
	TenantID     string       `json:"tenant_id" bun:"tenant_id"`
	Scope        memory.Scope `json:"scope" bun:"scope"`
	DepartmentID string       `json:"department_id" bun:"department_id"`
	UserID       string       `json:"user_id" bun:"user_id"`
	AgentID      string       `json:"agent_id" bun:"agent_id"`
	SessionID    string       `json:"session_id" bun:"session_id"`
	TaskID       string       `json:"task_id" bun:"task_id"`
	Subject      string       `json:"subject" bun:"subject"`
	Predicate    string       `json:"predicate" bun:"predicate"`
	EntityType   string       `json:"entity_type" bun:"entity_type"`
	EntityID     string       `json:"entity_id" bun:"entity_id"`
	Count        int          `json:"count" bun:"n"`
}

// Key is the memory key of the group's summary fact.
func (g ConsolidationGroup) Key() string {
	h := sha256.Sum256([]byte(strings.Join([]string{string(g.Scope), g.DepartmentID, g.UserID, g.AgentID, g.SessionID, g.TaskID, g.Subject, g.Predicate, g.EntityType, g.EntityID}, "\x1f")))
	return "consolidated|" + g.Predicate + "|" + hex.EncodeToString(h[:12])
}

const groupCols = "tenant_id, scope, department_id, user_id, agent_id, session_id, task_id, subject, predicate, entity_type, entity_id"

// ConsolidationCandidates finds groups of at least min ACTIVE facts of the given
// memory types observed before `before` (summary facts themselves excluded).
func (s *Store) ConsolidationCandidates(ctx context.Context, types []memory.MemoryType, min int, before time.Time, limit int) ([]ConsolidationGroup, error) {
	if min < 2 {
		min = 2
	}
	if limit <= 0 {
		limit = 100
	}
	var out []ConsolidationGroup
	err := s.conn(ctx).NewRaw(`SELECT `+groupCols+`, count(*) AS n FROM facts
		WHERE status = 'ACTIVE' AND memory_type IN (?) AND observed_at < ? AND memory_key NOT LIKE 'consolidated|%'
		GROUP BY `+groupCols+` HAVING count(*) >= ? ORDER BY count(*) DESC LIMIT ?`,
		bun.In(types), before, min, limit).Scan(ctx, &out)
	return out, err
}

// GroupFacts loads the ACTIVE facts of a group (oldest first) and its current
// summary, if one exists.
func (s *Store) GroupFacts(ctx context.Context, g ConsolidationGroup, types []memory.MemoryType, before time.Time) (facts []Fact, summary *Fact, err error) {
	err = s.conn(ctx).NewSelect().Model(&facts).ExcludeColumn("embedding").
		Where("tenant_id = ? AND status = 'ACTIVE' AND memory_type IN (?) AND observed_at < ? AND memory_key NOT LIKE 'consolidated|%'", g.TenantID, bun.In(types), before).
		Where("scope = ? AND department_id = ? AND user_id = ? AND agent_id = ? AND session_id = ? AND task_id = ?", g.Scope, g.DepartmentID, g.UserID, g.AgentID, g.SessionID, g.TaskID).
		Where("subject = ? AND predicate = ? AND entity_type = ? AND entity_id = ?", g.Subject, g.Predicate, g.EntityType, g.EntityID).
		Order("observed_at", "id").Scan(ctx)
	if err != nil {
		return nil, nil, err
	}
	cur, err := CurrentFact(ctx, s.conn(ctx), g.TenantID, g.Key())
	if err == ErrNotFound {
		return facts, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return facts, cur, nil
}

// Consolidate writes the summary fact of a group (a new revision of the group's
// summary key when one exists) linked to every source's evidence and to the
// previous summary's, and marks each source SUPERSEDED with consolidated_into set:
// nothing is lost, the originals stay readable by id and in history. It is
// idempotent per source set: sources already consolidated are skipped.
func (s *Store) Consolidate(ctx context.Context, g ConsolidationGroup, sourceIDs []string, summary *Fact, searchText string) (*Fact, error) {
	var out *Fact
	err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var live []string
		if err := tx.NewSelect().Table("facts").Column("id").
			Where("tenant_id = ? AND id IN (?) AND status = 'ACTIVE' AND consolidated_into IS NULL", g.TenantID, bun.In(sourceIDs)).
			For("UPDATE").Scan(ctx, &live); err != nil {
			return err
		}
		if len(live) == 0 {
			return nil
		}
		prev, err := CurrentFact(ctx, tx, g.TenantID, g.Key())
		if err != nil && err != ErrNotFound {
			return err
		}
		summary.MemoryKey = g.Key()
		f, err := WriteFactRevision(ctx, tx, g.TenantID, summary, WriteCurrent, searchText)
		if err != nil {
			return err
		}
		// Evidence of every source and of the previous summary supports the new one.
		args := []any{f.ID, g.TenantID, bun.In(live)}
		extra := ""
		if prev != nil && prev.ID != "" {
			extra = " OR fact_id = ?"
			args = append(args, prev.ID)
		}
		if _, err := tx.NewRaw(`INSERT INTO fact_evidence (tenant_id, fact_id, evidence_id, relation)
			SELECT DISTINCT tenant_id, ?::uuid, evidence_id, 'SUPPORT' FROM fact_evidence WHERE tenant_id = ? AND (fact_id IN (?)`+extra+`)
			ON CONFLICT DO NOTHING`, args...).Exec(ctx); err != nil {
			return fmt.Errorf("link summary evidence: %w", err)
		}
		now := time.Now().UTC()
		if _, err := tx.NewUpdate().Table("facts").
			Set("status = 'SUPERSEDED', closed_at = ?, consolidated_into = ?, reason = ?", now, f.ID, "consolidated into "+f.ID).
			Where("tenant_id = ? AND id IN (?)", g.TenantID, bun.In(live)).Exec(ctx); err != nil {
			return err
		}
		for _, id := range append(live, f.ID) {
			if err := EnqueueFact(ctx, tx, g.TenantID, id); err != nil {
				return err
			}
		}
		out = f
		return nil
	})
	return out, err
}

// AttributeUse is an attribute key the extractor produced for a predicate, with how
// often and a few example values.
type AttributeUse struct {
	SchemaName string   `json:"schema" bun:"schema_name"`
	Predicate  string   `json:"predicate" bun:"predicate"`
	EntityType string   `json:"entity_type" bun:"entity_type"`
	Attribute  string   `json:"attribute" bun:"attr"`
	Count      int      `json:"count" bun:"n"`
	Examples   []string `json:"examples" bun:"examples,array"`
}

// AttributeUsage counts the attribute keys of a tenant's candidates since a time
// (every tenant when tenantID is empty), with up to three example values each.
func (s *Store) AttributeUsage(ctx context.Context, tenantID string, since time.Time) ([]AttributeUse, error) {
	var out []AttributeUse
	q := `SELECT c.schema_name, c.predicate, c.entity_type, a.key AS attr, count(*) AS n,
		(array_agg(DISTINCT left(a.value #>> '{}', 80)))[1:3] AS examples
		FROM candidates c CROSS JOIN LATERAL jsonb_each(c.attributes) a
		WHERE c.created_at >= ? AND (? = '' OR c.tenant_id = ?)
		GROUP BY 1, 2, 3, 4 ORDER BY n DESC, 1, 2, 4`
	err := s.conn(ctx).NewRaw(q, since, tenantID, tenantID).Scan(ctx, &out)
	return out, err
}

// RejectedReasons returns the status reasons of events whose extraction never
// validated (UNPARSED) since a time, with their schema: unknown predicates the
// extractor keeps proposing show up here.
func (s *Store) RejectedReasons(ctx context.Context, tenantID string, since time.Time, limit int) ([]struct {
	SchemaName string `bun:"schema_name"`
	Reason     string `bun:"status_reason"`
}, error) {
	if limit <= 0 {
		limit = 5000
	}
	var out []struct {
		SchemaName string `bun:"schema_name"`
		Reason     string `bun:"status_reason"`
	}
	err := s.conn(ctx).NewRaw(`SELECT schema_name, status_reason FROM events WHERE status = 'UNPARSED' AND received_at >= ?
		AND (? = '' OR tenant_id = ?) ORDER BY received_at DESC LIMIT ?`, since, tenantID, tenantID, limit).Scan(ctx, &out)
	return out, err
}

// FactCounts counts a tenant's facts by status (for reports and tests).
func (s *Store) FactCounts(ctx context.Context, tenantID, userID string) (map[string]int, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	q := s.conn(ctx).NewSelect().Table("facts").ColumnExpr("status, count(*) AS n").Where("tenant_id = ?", tenantID).GroupExpr("status")
	if userID != "" {
		q = q.Where("user_id = ?", userID)
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// summaryAttributes is the attributes JSON of a summary fact.
func SummaryAttributes(n int, first, last time.Time, objects []string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"consolidated_count": n, "first": first.UTC().Format(time.RFC3339), "last": last.UTC().Format(time.RFC3339), "objects": objects})
	return b
}

// Analyze refreshes the planner's statistics of every table in the database
// (ANALYZE), which also makes each pooled connection plan its prepared statements
// again. The pool's connections keep generic plans (Open), and a plan made while a
// table was nearly empty can walk a tenant's whole index instead of the unique one
// (the lookup of an event by key, planned on an empty events table, filtered every
// event of the tenant) until autovacuum first analyzes the table, which it does a
// minute or more after 50 rows and a tenth of the table changed. A database that
// has been running is past that; engram bench write calls this after its warm-up so
// that it measures one.
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.conn(ctx).ExecContext(ctx, "ANALYZE")
	return err
}
