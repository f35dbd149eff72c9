package storage

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// TextToEmbed is the clear text of a fact or evidence row to build a vector from,
// with the evidence's speaker and user (empty for facts).
type TextToEmbed struct {
	ID      string `bun:"id"`
	Content string `bun:"content"`
	KeyID   string `bun:"key_id"`
	Speaker string `bun:"speaker"`
	UserID  string `bun:"user_id"`
}

// FactsToEmbed loads the clear text of the tenant's facts ids.
func (s *Store) FactsToEmbed(ctx context.Context, tenantID string, ids []string) ([]TextToEmbed, error) {
	return s.textsToEmbed(ctx, "facts", tenantID, ids, "id", "content", "key_id")
}

// EvidenceToEmbed loads the clear text, speaker and user of the tenant's evidence ids.
func (s *Store) EvidenceToEmbed(ctx context.Context, tenantID string, ids []string) ([]TextToEmbed, error) {
	return s.textsToEmbed(ctx, "evidence", tenantID, ids, "id", "content", "key_id", "speaker", "user_id")
}

func (s *Store) textsToEmbed(ctx context.Context, table, tenantID string, ids []string, cols ...string) ([]TextToEmbed, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []TextToEmbed
	err := s.conn(ctx).NewSelect().Table(table).Column(cols...).
		Where("tenant_id = ? AND id IN (?)", tenantID, bun.In(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load %s to index: %w", table, err)
	}
	for i := range rows {
		if rows[i].Content, err = s.DecryptContent(rows[i].KeyID, rows[i].Content); err != nil {
			return nil, fmt.Errorf("decrypt %s %s: %w", table, rows[i].ID, err)
		}
	}
	return rows, nil
}
