package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/turntext"
)

// Evidence is the raw basis of memory: a turn, a document, a tool result.
type Evidence struct {
	bun.BaseModel `bun:"table:evidence"`

	TenantID      string           `bun:"tenant_id,notnull"`
	ID            string           `bun:"id,pk,type:uuid"`
	EventID       string           `bun:"event_id,type:uuid,notnull"`
	Kind          string           `bun:"kind,notnull"`
	Content       string           `bun:"content,notnull"`
	Locator       string           `bun:"locator,notnull"`
	SourceVersion string           `bun:"source_version,notnull"`
	Speaker       string           `bun:"speaker,notnull"`
	UserID        string           `bun:"user_id,notnull"`
	DepartmentID  string           `bun:"department_id,notnull"`
	AgentID       string           `bun:"agent_id,notnull"`
	SessionID     string           `bun:"session_id,notnull"`
	TaskID        string           `bun:"task_id,notnull"`
	OccurredAt    time.Time        `bun:"occurred_at,notnull"`
	Importance    float32          `bun:"importance,notnull"`
	KeyID         string           `bun:"key_id,notnull"`
	Embedding     *pgvector.Vector `bun:"embedding,type:vector(512)"`
	CreatedAt     time.Time        `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

func validateEmbedding(field string, v *pgvector.Vector) error {
	if v == nil {
		return nil
	}
	if n := len(v.Slice()); n != EmbeddingDim {
		return memory.FieldError{Field: field, Problem: fmt.Sprintf("has %d dimensions, the database stores %d", n, EmbeddingDim)}
	}
	return nil
}

// EvidenceSentence is the vector of one sentence of a long turn (see
// Sentences): recall scores a turn by its best sentence.
type EvidenceSentence struct {
	bun.BaseModel `bun:"table:evidence_sentences"`

	TenantID   string           `bun:"tenant_id,pk"`
	EvidenceID string           `bun:"evidence_id,pk,type:uuid"`
	N          int              `bun:"n,pk"`
	UserID     string           `bun:"user_id,notnull"`
	Embedding  *pgvector.Vector `bun:"embedding,type:vector(512),notnull"`
}

// InsertEvidenceSentences stores the sentence vectors of a turn of the same
// tenant, in order; a retry writes nothing twice.
func (s *Store) InsertEvidenceSentences(ctx context.Context, tenantID, evidenceID, userID string, vecs []*pgvector.Vector) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if len(vecs) == 0 {
		return nil
	}
	rows := make([]EvidenceSentence, len(vecs))
	for i, v := range vecs {
		if v == nil {
			return memory.FieldError{Field: fmt.Sprintf("sentences[%d]", i), Problem: "has no vector"}
		}
		if err := validateEmbedding(fmt.Sprintf("sentences[%d]", i), v); err != nil {
			return err
		}
		rows[i] = EvidenceSentence{TenantID: tenantID, EvidenceID: evidenceID, N: i, UserID: userID, Embedding: v}
	}
	if _, err := s.conn(ctx).NewInsert().Model(&rows).On("CONFLICT DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("insert evidence sentences: %w", err)
	}
	return nil
}

// EvidenceSearch is what a stored turn is found by: Told, the words that count in
// full (what it says, and its speaker's name); Asked, the words of its questions,
// indexed at weight B (keyword scoring counts them at Fusion.Asked); Context, the
// turn before it at weight C (a reply is found by the question it answers; counted
// at a fraction, see recall's BM25).
type EvidenceSearch struct {
	Told, Asked, Context string
}

// InsertEvidence stores evidence for an event of the same tenant. It is idempotent
// on (event, locator): a retry returns the stored row.
//
// searchText is what the row is found by: its statements count in full and its
// questions at weight B (turntext.SplitAsked); contextText, when given, is indexed beside
// it at weight C (see EvidenceSearch).
func (s *Store) InsertEvidence(ctx context.Context, tenantID string, ev *Evidence, searchText string, contextText ...string) (*Evidence, error) {
	told, asked := turntext.SplitAsked(searchText)
	return s.InsertEvidenceSearch(ctx, tenantID, ev, EvidenceSearch{Told: told, Asked: asked, Context: strings.Join(contextText, " ")})
}

// InsertEvidenceSearch is InsertEvidence with the search text in its parts.
func (s *Store) InsertEvidenceSearch(ctx context.Context, tenantID string, ev *Evidence, search EvidenceSearch) (*Evidence, error) {
	ev.TenantID = tenantID
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if ev.EventID == "" {
		return nil, memory.FieldError{Field: "event_id", Problem: "is empty"}
	}
	if err := oneOf("kind", ev.Kind, EvidenceKinds); err != nil {
		return nil, err
	}
	if ev.OccurredAt.IsZero() {
		return nil, memory.FieldError{Field: "occurred_at", Problem: "is missing"}
	}
	if ev.Importance == 0 {
		ev.Importance = 0.3
	}
	if err := validateEmbedding("embedding", ev.Embedding); err != nil {
		return nil, err
	}
	q := s.conn(ctx).NewInsert().Model(ev)
	expr, args := "to_tsvector('english', ?)", []any{search.Told}
	if a := strings.TrimSpace(search.Asked); a != "" {
		expr, args = expr+" || setweight(to_tsvector('english', ?), 'B')", append(args, a)
	}
	if c := strings.TrimSpace(search.Context); c != "" {
		expr, args = expr+" || setweight(to_tsvector('english', ?), 'C')", append(args, c)
	}
	q = q.Value("search", expr, args...)
	q = q.On("CONFLICT (tenant_id, event_id, locator) DO NOTHING").Returning("id")
	if ev.ID == "" {
		q = q.ExcludeColumn("id")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert evidence: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return ev, nil
	}
	existing := new(Evidence)
	err = s.conn(ctx).NewSelect().Model(existing).
		Where("tenant_id = ? AND event_id = ? AND locator = ?", tenantID, ev.EventID, ev.Locator).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("load evidence: %w", err)
	}
	return existing, nil
}

// EvidenceForEvent lists an event's evidence.
func (s *Store) EvidenceForEvent(ctx context.Context, tenantID, eventID string) ([]Evidence, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Evidence
	err := s.conn(ctx).NewSelect().Model(&out).ExcludeColumn("embedding").
		Where("tenant_id = ? AND event_id = ?", tenantID, eventID).Order("created_at").Scan(ctx)
	if err != nil {
		return nil, err
	}
	return out, s.DecryptEvidence(out)
}
