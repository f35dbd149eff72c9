package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/privacy"
)

// Protection is how a Store protects content at rest: redaction of personal data
// in evidence, and AES-GCM sealing of evidence, event and fact content.
type Protection struct {
	// Redactor, when set, replaces personal data in evidence (and the event's copy)
	// before anything is stored or indexed.
	Redactor *privacy.Redactor
	// KeepOriginal keeps the unredacted text, sealed, in evidence.original_sealed
	// (needs Keyring). Otherwise the original is dropped.
	KeepOriginal bool
	// Keyring, when set, seals content with its current key.
	Keyring *privacy.Keyring
}

var protections sync.Map // *Store → Protection

// SetProtection configures redaction and encryption for this Store (the worker and
// the API server call it once at start with config (storage.ParseProtection)), and
// for its Readers (on a Reader: for the store it was made from).
func (s *Store) SetProtection(p Protection) error {
	if p.KeepOriginal && p.Keyring == nil {
		return fmt.Errorf("keeping redacted originals needs an encryption key: set ENGRAM_ENCRYPTION_KEY or ENGRAM_REDACT_ORIGINAL=drop")
	}
	protections.Store(s.protected(), p)
	return nil
}

// protected is the store whose protection s uses: the one a Reader was made from.
func (s *Store) protected() *Store {
	if s.base != nil {
		return s.base
	}
	return s
}

// Protection returns the Store's protection settings (zero: none).
func (s *Store) Protection() Protection {
	if v, ok := protections.Load(s.protected()); ok {
		return v.(Protection)
	}
	return Protection{}
}

// ProtectedContent is one piece of evidence ready to store.
type ProtectedContent struct {
	// Redacted is the clear text after redaction: build the keyword index
	// (SearchText) and the embedding from it, never from Stored.
	Redacted string
	// Stored goes into evidence.content, KeyID into evidence.key_id.
	Stored string
	KeyID  string
	// EventContent goes into events.content: the redacted text, sealed
	// deterministically so a retried ingest has the same fingerprint.
	EventContent string
	// OriginalSealed and OriginalKeyID keep the unredacted text when configured.
	OriginalSealed string
	OriginalKeyID  string
	// Redactions counts what was redacted, by kind (no personal data).
	Redactions map[privacy.Kind]int
}

// ProtectContent redacts and seals one evidence text according to the Store's
// protection. Without protection it returns the text unchanged everywhere.
func (s *Store) ProtectContent(content string) (ProtectedContent, error) {
	p := s.Protection()
	out := ProtectedContent{Redacted: content, Stored: content, EventContent: content}
	if p.Redactor != nil {
		red, ms := p.Redactor.Redact(content)
		out.Redacted, out.Stored, out.EventContent = red, red, red
		if len(ms) > 0 {
			out.Redactions = map[privacy.Kind]int{}
			for _, m := range ms {
				out.Redactions[m.Kind]++
			}
			if p.KeepOriginal && p.Keyring != nil {
				kid, sealed, err := p.Keyring.Seal(content)
				if err != nil {
					return out, err
				}
				out.OriginalKeyID, out.OriginalSealed = kid, sealed
			}
		}
	}
	if p.Keyring != nil {
		kid, sealed, err := p.Keyring.Seal(out.Redacted)
		if err != nil {
			return out, err
		}
		out.KeyID, out.Stored = kid, sealed
		_, out.EventContent = p.Keyring.SealDeterministic(out.Redacted)
	}
	return out, nil
}

// SealContent seals a fact's content for storage: it returns the key id for the
// key_id column and the value for the content column. Without a keyring the text
// passes through and the key id is empty.
func (s *Store) SealContent(plaintext string) (keyID, stored string, err error) {
	k := s.Protection().Keyring
	if k == nil {
		return "", plaintext, nil
	}
	return k.Seal(plaintext)
}

// DecryptContent returns the clear text of a content column given the row's
// key_id ("" for rows written before encryption, which pass through). A missing or
// wrong key is an error that says so, never garbage.
func (s *Store) DecryptContent(keyID, content string) (string, error) {
	return privacy.Open(s.Protection().Keyring, keyID, content)
}

// DecryptFacts replaces each fact's content with its clear text, in place.
func (s *Store) DecryptFacts(fs []Fact) error {
	for i := range fs {
		pt, err := s.DecryptContent(fs[i].KeyID, fs[i].Content)
		if err != nil {
			return fmt.Errorf("fact %s: %w", fs[i].ID, err)
		}
		fs[i].Content = pt
	}
	return nil
}

// DecryptEvidence replaces each evidence row's content with its clear text, in place.
func (s *Store) DecryptEvidence(es []Evidence) error {
	for i := range es {
		pt, err := s.DecryptContent(es[i].KeyID, es[i].Content)
		if err != nil {
			return fmt.Errorf("evidence %s: %w", es[i].ID, err)
		}
		es[i].Content = pt
	}
	return nil
}

// DecryptEvent replaces an event's content with its clear (redacted) text.
func (s *Store) DecryptEvent(e *Event) error {
	pt, err := s.DecryptContent("", e.Content)
	if err != nil {
		return fmt.Errorf("event %s: %w", e.ID, err)
	}
	e.Content = pt
	return nil
}

// SetEvidenceOriginal stores the sealed unredacted original of an evidence row
// (nothing when there is none to keep). Idempotent.
func (s *Store) SetEvidenceOriginal(ctx context.Context, tenantID, evidenceID string, p ProtectedContent) error {
	if p.OriginalSealed == "" {
		return nil
	}
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	_, err := s.conn(ctx).NewUpdate().Table("evidence").Set("original_sealed = ?, original_key_id = ?", p.OriginalSealed, p.OriginalKeyID).
		Where("tenant_id = ? AND id = ?", tenantID, evidenceID).Exec(ctx)
	return err
}

// EvidenceOriginal opens the unredacted original of an evidence row ("" when it was
// dropped or nothing was redacted). Only privileged callers should use it.
func (s *Store) EvidenceOriginal(ctx context.Context, tenantID, evidenceID string) (string, error) {
	if err := checkTenant(tenantID); err != nil {
		return "", err
	}
	var row struct {
		Sealed string `bun:"original_sealed"`
		KeyID  string `bun:"original_key_id"`
	}
	err := s.conn(ctx).NewSelect().Table("evidence").Column("original_sealed", "original_key_id").
		Where("tenant_id = ? AND id = ?", tenantID, evidenceID).Scan(ctx, &row)
	if err != nil {
		return "", notFound(err)
	}
	if row.Sealed == "" {
		return "", nil
	}
	return s.DecryptContent(row.KeyID, row.Sealed)
}

// RotationTables are the tables `engram keys rotate-data` re-seals.
var RotationTables = []string{"evidence", "evidence_original", "facts", "events"}

// RotateBatch re-seals up to limit rows of one table that are sealed with a key
// other than the current one (and, with includeClear, rows still in clear text),
// and returns how many it changed. Call it until it returns 0. Each row is read
// and rewritten in one transaction, locked, so concurrent writers lose nothing.
func (s *Store) RotateBatch(ctx context.Context, table string, includeClear bool, limit int) (int, error) {
	k := s.Protection().Keyring
	if k == nil {
		return 0, fmt.Errorf("no encryption key configured: set ENGRAM_ENCRYPTION_KEY (and ENGRAM_ENCRYPTION_OLD_KEYS with the keys to rotate from)")
	}
	if limit <= 0 {
		limit = 200
	}
	cur := k.CurrentID()
	n := 0
	err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		switch table {
		case "evidence", "facts":
			var rows []struct {
				ID      string `bun:"id"`
				KeyID   string `bun:"key_id"`
				Content string `bun:"content"`
			}
			q := tx.NewSelect().Table(table).Column("id", "key_id", "content").Where("key_id <> ?", cur)
			if !includeClear {
				q = q.Where("key_id <> ''")
			}
			if err := q.Limit(int64(limit)).For("UPDATE SKIP LOCKED").Scan(ctx, &rows); err != nil {
				return err
			}
			for _, r := range rows {
				pt, err := k.Open(r.KeyID, r.Content)
				if err != nil {
					return fmt.Errorf("%s %s: %w", table, r.ID, err)
				}
				kid, sealed, err := k.Seal(pt)
				if err != nil {
					return err
				}
				if _, err := tx.NewUpdate().Table(table).Set("content = ?, key_id = ?", sealed, kid).Where("id = ?", r.ID).Exec(ctx); err != nil {
					return err
				}
				n++
			}
		case "evidence_original":
			var rows []struct {
				ID     string `bun:"id"`
				KeyID  string `bun:"original_key_id"`
				Sealed string `bun:"original_sealed"`
			}
			if err := tx.NewSelect().Table("evidence").Column("id", "original_key_id", "original_sealed").
				Where("original_sealed <> '' AND original_key_id <> ?", cur).Limit(int64(limit)).For("UPDATE SKIP LOCKED").Scan(ctx, &rows); err != nil {
				return err
			}
			for _, r := range rows {
				pt, err := k.Open(r.KeyID, r.Sealed)
				if err != nil {
					return fmt.Errorf("evidence original %s: %w", r.ID, err)
				}
				kid, sealed, err := k.Seal(pt)
				if err != nil {
					return err
				}
				if _, err := tx.NewUpdate().Table("evidence").Set("original_sealed = ?, original_key_id = ?", sealed, kid).Where("id = ?", r.ID).Exec(ctx); err != nil {
					return err
				}
				n++
			}
		case "events":
			var rows []Event
			q := tx.NewSelect().Model(&rows).Where("content NOT LIKE ?", "ev1:"+cur+":%")
			if !includeClear {
				q = q.Where("content LIKE 'ev1:%'")
			}
			if err := q.Limit(int64(limit)).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
				return err
			}
			for i := range rows {
				e := &rows[i]
				pt, err := k.Open("", e.Content)
				if err != nil {
					return fmt.Errorf("event %s: %w", e.ID, err)
				}
				// Sealed deterministically and re-fingerprinted, so a retried ingest of
				// the same event still matches after the rotation.
				_, e.Content = k.SealDeterministic(pt)
				e.ContentHash = HashEventContent(e)
				if _, err := tx.NewUpdate().Table("events").Set("content = ?, content_hash = ?", e.Content, e.ContentHash).Where("id = ?", e.ID).Exec(ctx); err != nil {
					return err
				}
				n++
			}
		default:
			return fmt.Errorf("unknown rotation table %q (allowed: evidence, evidence_original, facts, events)", table)
		}
		return nil
	})
	return n, err
}

// KeyUsage counts rows per key id in one table ("" is clear text), for
// `engram keys status` and rotation progress.
func (s *Store) KeyUsage(ctx context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, q := range []struct{ table, sql string }{
		{"evidence", "SELECT key_id AS k, count(*) AS n FROM evidence GROUP BY key_id"},
		{"facts", "SELECT key_id AS k, count(*) AS n FROM facts GROUP BY key_id"},
		{"events", "SELECT CASE WHEN content LIKE 'ev1:%' THEN split_part(content, ':', 2) ELSE '' END AS k, count(*) AS n FROM events GROUP BY 1"},
	} {
		var rows []struct {
			K string `bun:"k"`
			N int64  `bun:"n"`
		}
		if err := s.conn(ctx).NewRaw(q.sql).Scan(ctx, &rows); err != nil {
			return nil, err
		}
		out[q.table] = map[string]int64{}
		for _, r := range rows {
			out[q.table][r.K] = r.N
		}
	}
	return out, nil
}

// ParseProtection builds the protection settings config reads:
//
//	ENGRAM_REDACT            off (default) | all | a comma list of kinds (email, phone, card, …)
//	ENGRAM_REDACT_ORIGINAL   drop (default) | encrypted (keep the unredacted text sealed; needs a key)
//	ENGRAM_ENCRYPTION_KEY*   the keyring (privacy.ParseKeyring); nil stores content in clear
//
// Errors name the variable.
func ParseProtection(k *privacy.Keyring, redact, original string) (Protection, error) {
	p := Protection{Keyring: k}
	switch v := strings.ToLower(strings.TrimSpace(redact)); v {
	case "", "off", "none", "false":
	default:
		kinds, err := privacy.ParseKinds(v)
		if err != nil {
			return p, fmt.Errorf("ENGRAM_REDACT: %w", err)
		}
		p.Redactor = privacy.NewRedactor(kinds...)
	}
	switch v := strings.ToLower(strings.TrimSpace(original)); v {
	case "", "drop":
	case "encrypted", "encrypt", "keep":
		if p.Keyring == nil {
			return p, fmt.Errorf("ENGRAM_REDACT_ORIGINAL=%s needs ENGRAM_ENCRYPTION_KEY", v)
		}
		p.KeepOriginal = true
	default:
		return p, fmt.Errorf("ENGRAM_REDACT_ORIGINAL: %q must be drop or encrypted", v)
	}
	return p, nil
}
