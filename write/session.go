package write

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// UpdateSessionInput is one turn to add to a session's working memory.
type UpdateSessionInput struct {
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
	// Turn names its evidence row: the turn is idempotent per evidence id.
	Turn storage.Turn `json:"turn"`
	At   time.Time    `json:"at"` // when the turn happened; defaults to Turn.At
}

// SessionTurn is the UpdateSessionInput of ev's turn, stored as evidence evidenceID
// with text (the stored, redacted text).
func SessionTurn(ev memory.IngestEvent, evidenceID, text string) UpdateSessionInput {
	return UpdateSessionInput{TenantID: ev.TenantID, SessionID: ev.SessionID, UserID: ev.UserID, At: ev.OccurredAt,
		Turn: storage.Turn{EvidenceID: evidenceID, Speaker: ev.ActorType + ":" + ev.UserID, Text: text, At: ev.OccurredAt}}
}

// UpdateSessionResult says what changed.
type UpdateSessionResult struct {
	Appended   bool `json:"appended"`
	Summarized bool `json:"summarized"`
	TurnCount  int  `json:"turn_count"`
}

// UpdateSession appends a turn to the session's recent turns (the last
// storage.DefaultKeepTurns are kept) and, every storage.DefaultSummaryEvery
// turns, refreshes the rolling summary from the turns since the last refresh with
// the configured summariser (extractive offline). Retrying it is safe: a turn
// already recorded changes nothing, and a summary never replaces a newer one.
// An event without a session has no working memory: nothing to do.
func (a *MemoryActivities) UpdateSession(ctx context.Context, in UpdateSessionInput) (UpdateSessionResult, error) {
	if strings.TrimSpace(in.SessionID) == "" {
		return UpdateSessionResult{}, nil
	}
	if strings.TrimSpace(in.TenantID) == "" {
		return UpdateSessionResult{}, badWriteInput(memory.FieldError{Field: "tenant_id", Problem: "is empty"})
	}
	if in.Turn.At.IsZero() {
		in.Turn.At = in.At
	}
	sess, appended, err := a.Store.AppendTurn(ctx, in.TenantID, in.SessionID, in.UserID, in.Turn, storage.DefaultKeepTurns)
	var fe memory.FieldError
	if errors.As(err, &fe) {
		return UpdateSessionResult{}, badWriteInput(err)
	}
	if err != nil {
		return UpdateSessionResult{}, err
	}
	res := UpdateSessionResult{Appended: appended, TurnCount: sess.TurnCount}
	turns, due := sess.SummaryDue(storage.DefaultSummaryEvery)
	if !due {
		return res, nil
	}
	texts := make([]string, len(turns))
	for i, t := range turns {
		texts[i] = t.Text
		if role, _, ok := strings.Cut(t.Speaker, ":"); ok && role != "" {
			texts[i] = strings.ToLower(role) + ": " + t.Text
		}
	}
	// Offline extractive summary; an LLM summariser plugs in here once
	// MemoryActivities carries one.
	summary, err := llm.NewExtractiveSummariser(llm.DefaultSummaryRunes).Summarise(ctx, texts, sess.Summary)
	if err != nil {
		return res, fmt.Errorf("summarise session: %w", err)
	}
	ok, err := a.Store.SetSessionSummary(ctx, in.TenantID, in.SessionID, sess.TurnCount, summary)
	if err != nil {
		return res, err
	}
	res.Summarized = ok
	return res, nil
}
