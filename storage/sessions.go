package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Working-memory defaults: a session keeps its last KeepTurns turns, and its rolling
// summary is refreshed every SummaryEvery turns.
const (
	DefaultKeepTurns    = 12
	DefaultSummaryEvery = 6
	// MaxTurnRunes bounds the text of one remembered turn; the full text stays in
	// the evidence row the turn names.
	MaxTurnRunes = 2000
)

// Turn is one remembered turn of a session, traceable to its evidence.
type Turn struct {
	EvidenceID string    `json:"evidence_id"`
	Speaker    string    `json:"speaker,omitempty"`
	Text       string    `json:"text"`
	At         time.Time `json:"at"`
}

// Session is the working memory of one conversation: its recent turns (oldest
// first) and a rolling summary of what came before.
type Session struct {
	bun.BaseModel `bun:"table:sessions"`

	TenantID         string    `bun:"tenant_id,pk"`
	ID               string    `bun:"id,pk"`
	UserID           string    `bun:"user_id,notnull"`
	Recent           []Turn    `bun:"recent,type:jsonb,notnull"`
	Summary          string    `bun:"summary,notnull"`
	TurnCount        int       `bun:"turn_count,notnull"`
	SummarizedAtTurn int       `bun:"summarized_at_turn,notnull"`
	UpdatedAt        time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// SummaryDue reports whether every summaryEvery turns have passed since the last
// summary, and returns the turns added since then (oldest first).
func (s *Session) SummaryDue(summaryEvery int) ([]Turn, bool) {
	if summaryEvery <= 0 {
		summaryEvery = DefaultSummaryEvery
	}
	n := s.TurnCount - s.SummarizedAtTurn
	if n < summaryEvery {
		return nil, false
	}
	if n > len(s.Recent) {
		n = len(s.Recent)
	}
	return slices.Clone(s.Recent[len(s.Recent)-n:]), true
}

// errSessionRace is returned internally when a concurrent writer changed the row.
var errSessionRace = errors.New("session changed concurrently")

// GetSession loads a session of the tenant.
func (s *Store) GetSession(ctx context.Context, tenantID, sessionID string) (*Session, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	out := new(Session)
	return out, notFound(firstPrepared(ctx, s.conn(ctx), getSessionSQL, out, tenantID, sessionID))
}

// getSessionSQL selects a session ($1 tenant, $2 id).
var getSessionSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Session)(nil)).Where("tenant_id = ? AND id = ?", p...).String()
})

// AppendTurn adds a turn to a session's working memory, keeping the last keep
// turns in time order. It is idempotent per evidence id: a turn already kept, or
// no newer than every kept turn of a full window (it was kept once and has aged
// out, perhaps beside a turn of the same instant that stayed), changes nothing
// and returns appended=false. So a turn that arrives that late for the first
// time is not counted either: a retried request never counts twice. The session row is created on first
// use and belongs to userID; a turn for a session of another user is refused.
func (s *Store) AppendTurn(ctx context.Context, tenantID, sessionID, userID string, t Turn, keep int) (sess *Session, appended bool, err error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, false, err
	}
	if strings.TrimSpace(sessionID) == "" {
		return nil, false, memory.FieldError{Field: "session_id", Problem: "is empty"}
	}
	if strings.TrimSpace(t.EvidenceID) == "" {
		return nil, false, memory.FieldError{Field: "turn.evidence_id", Problem: "is empty"}
	}
	if t.At.IsZero() {
		return nil, false, memory.FieldError{Field: "turn.at", Problem: "is missing"}
	}
	if keep <= 0 {
		keep = DefaultKeepTurns
	}
	t.At = t.At.UTC()
	if r := []rune(t.Text); len(r) > MaxTurnRunes {
		t.Text = string(r[:MaxTurnRunes]) + "…"
	}
	for attempt := 0; attempt < 8; attempt++ {
		sess, appended, err = s.appendTurnOnce(ctx, tenantID, sessionID, userID, t, keep)
		if !errors.Is(err, errSessionRace) {
			return sess, appended, err
		}
	}
	return nil, false, fmt.Errorf("append turn: %w", errSessionRace)
}

func (s *Store) appendTurnOnce(ctx context.Context, tenantID, sessionID, userID string, t Turn, keep int) (*Session, bool, error) {
	// Read the row (creating it when missing), then write back only if nobody else
	// wrote in between (turn_count is the version).
	sess, err := s.GetSession(ctx, tenantID, sessionID)
	if errors.Is(err, ErrNotFound) {
		if _, err := s.conn(ctx).NewInsert().Model(&Session{TenantID: tenantID, ID: sessionID, UserID: userID, Recent: []Turn{}}).
			On("CONFLICT (tenant_id, id) DO NOTHING").Exec(ctx); err != nil {
			return nil, false, fmt.Errorf("create session: %w", err)
		}
		sess, err = s.GetSession(ctx, tenantID, sessionID)
	}
	if err != nil {
		return nil, false, err
	}
	if sess.UserID != "" && userID != "" && sess.UserID != userID {
		return nil, false, memory.FieldError{Field: "session_id", Problem: "belongs to another user"}
	}
	for _, r := range sess.Recent {
		if r.EvidenceID == t.EvidenceID {
			return sess, false, nil
		}
	}
	if len(sess.Recent) >= keep && len(sess.Recent) > 0 && !t.At.After(sess.Recent[0].At) {
		return sess, false, nil
	}
	recent := append(slices.Clone(sess.Recent), t)
	slices.SortStableFunc(recent, func(a, b Turn) int { return a.At.Compare(b.At) })
	if len(recent) > keep {
		recent = recent[len(recent)-keep:]
	}
	raw, err := json.Marshal(recent)
	if err != nil {
		return nil, false, err
	}
	res, err := execPrepared(ctx, s.conn(ctx), appendTurnSQL, string(raw), userID, tenantID, sessionID, sess.TurnCount)
	if err != nil {
		return nil, false, fmt.Errorf("update session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, errSessionRace
	}
	sess.Recent, sess.TurnCount = recent, sess.TurnCount+1
	if sess.UserID == "" {
		sess.UserID = userID
	}
	return sess, true, nil
}

// appendTurnSQL stores a session's recent turns ($1, JSON) and counts the turn,
// naming its user ($2) if none was, unless another writer counted one first
// (tenant $3, id $4, turn count read $5).
var appendTurnSQL = statementText(5, func(db bun.IDB, p []any) string {
	return db.NewUpdate().Model((*Session)(nil)).
		Set("recent = ?::jsonb", p[0]).
		Set("turn_count = turn_count + 1").
		Set("user_id = CASE WHEN user_id = '' THEN ? ELSE user_id END", p[1]).
		Set("updated_at = now()").
		Where("tenant_id = ? AND id = ? AND turn_count = ?", p[2:]...).String()
})

// SetSessionSummary stores a rolling summary made at turn atTurn, unless a newer
// summary is already there (summaries may be computed outside the row's lock).
func (s *Store) SetSessionSummary(ctx context.Context, tenantID, sessionID string, atTurn int, summary string) (bool, error) {
	if err := checkTenant(tenantID); err != nil {
		return false, err
	}
	res, err := s.conn(ctx).NewUpdate().Model((*Session)(nil)).
		Set("summary = ?, summarized_at_turn = ?, updated_at = now()", summary, atTurn).
		Where("tenant_id = ? AND id = ? AND summarized_at_turn < ?", tenantID, sessionID, atTurn).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("set session summary: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
