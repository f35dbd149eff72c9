package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Roles an API key can hold.
const (
	RoleAgent    = "agent"
	RoleReviewer = "reviewer"
	RoleAdmin    = "admin"
)

// Roles lists every role.
var Roles = []string{RoleAgent, RoleReviewer, RoleAdmin}

// APIKey is an API key's record. The secret is never stored: only the sha256 of the
// whole key, and a public prefix that finds the row.
type APIKey struct {
	bun.BaseModel `bun:"table:api_keys"`

	ID           string     `bun:"id,pk,type:uuid,default:gen_random_uuid()"`
	TenantID     string     `bun:"tenant_id,notnull"`
	Principal    string     `bun:"principal,notnull"`
	Roles        []string   `bun:"roles,array,notnull"`
	UserID       string     `bun:"user_id,notnull"`
	DepartmentID string     `bun:"department_id,notnull"`
	AgentID      string     `bun:"agent_id,notnull"`
	AllowedUsers []string   `bun:"allowed_users,array,notnull"`
	Prefix       string     `bun:"prefix,notnull"`
	KeyHash      string     `bun:"key_hash,notnull"`
	CreatedAt    time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	RevokedAt    *time.Time `bun:"revoked_at"`
}

// HasRole reports whether the key holds role.
func (k *APIKey) HasRole(role string) bool {
	for _, r := range k.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// keyPrefix is the fixed start of every Engram API key, so a leaked key is easy to
// recognise in logs and by secret scanners.
const keyPrefix = "egk_"

var principalRe = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,128}$`)

func hashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// CreateAPIKey stores a new key and returns the secret key string, which exists
// only in this return value: "egk_<prefix>_<secret>".
func (s *Store) CreateAPIKey(ctx context.Context, k *APIKey) (string, error) {
	if err := checkTenant(k.TenantID); err != nil {
		return "", err
	}
	if strings.Contains(k.TenantID, "/") {
		return "", memory.FieldError{Field: "tenant", Problem: "must not contain '/'"}
	}
	if !principalRe.MatchString(k.Principal) {
		return "", memory.FieldError{Field: "principal", Problem: "must be 1-128 letters, digits or . _ : @ -"}
	}
	if len(k.Roles) == 0 {
		return "", memory.FieldError{Field: "role", Problem: "at least one role is required (agent, reviewer, admin)"}
	}
	for _, r := range k.Roles {
		if r != RoleAgent && r != RoleReviewer && r != RoleAdmin {
			return "", memory.FieldError{Field: "role", Problem: fmt.Sprintf("unknown role %q (allowed: agent, reviewer, admin)", r)}
		}
	}
	if k.AllowedUsers == nil {
		k.AllowedUsers = []string{}
	}
	for _, u := range k.AllowedUsers {
		if strings.TrimSpace(u) == "" {
			return "", memory.FieldError{Field: "allow-user", Problem: "empty user id"}
		}
	}
	pre := make([]byte, 6)
	sec := make([]byte, 24)
	if _, err := rand.Read(pre); err != nil {
		return "", err
	}
	if _, err := rand.Read(sec); err != nil {
		return "", err
	}
	k.Prefix = hex.EncodeToString(pre)
	key := keyPrefix + k.Prefix + "_" + hex.EncodeToString(sec)
	k.KeyHash = hashKey(key)
	if _, err := s.conn(ctx).NewInsert().Model(k).ExcludeColumn("id", "created_at", "revoked_at").Returning("id, created_at").Exec(ctx); err != nil {
		return "", fmt.Errorf("insert api key: %w", err)
	}
	return key, nil
}

// ErrBadKey is returned when a key is malformed, unknown or revoked.
var ErrBadKey = fmt.Errorf("invalid or revoked API key")

// LookupAPIKey resolves a key string to its record: by prefix, then a
// constant-time comparison of the hash. Revoked and unknown keys give ErrBadKey.
func (s *Store) LookupAPIKey(ctx context.Context, key string) (*APIKey, error) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return nil, ErrBadKey
	}
	prefix, _, ok := strings.Cut(rest, "_")
	if !ok || len(prefix) != 12 {
		return nil, ErrBadKey
	}
	k := new(APIKey)
	err := firstPrepared(ctx, s.conn(ctx), apiKeySQL, k, prefix)
	if err := notFound(err); err == ErrNotFound {
		return nil, ErrBadKey
	} else if err != nil {
		return nil, fmt.Errorf("look up api key: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(k.KeyHash), []byte(hashKey(key))) != 1 || k.RevokedAt != nil {
		return nil, ErrBadKey
	}
	return k, nil
}

// apiKeySQL selects an API key by its prefix ($1).
var apiKeySQL = statementText(1, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*APIKey)(nil)).Where("prefix = ?", p...).String()
})

// ListAPIKeys lists keys, of one tenant when tenantID is not empty, newest first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string, includeRevoked bool) ([]APIKey, error) {
	var out []APIKey
	q := s.conn(ctx).NewSelect().Model(&out).ExcludeColumn("key_hash")
	if tenantID != "" {
		q = q.Where("tenant_id = ?", tenantID)
	}
	if !includeRevoked {
		q = q.Where("revoked_at IS NULL")
	}
	err := q.Order("created_at DESC").Scan(ctx)
	return out, err
}

// RevokeAPIKey revokes a key by id or prefix (within tenantID when not empty). It
// returns ErrNotFound when no live key matches.
func (s *Store) RevokeAPIKey(ctx context.Context, tenantID, idOrPrefix string) (*APIKey, error) {
	idOrPrefix = strings.TrimPrefix(strings.TrimSpace(idOrPrefix), keyPrefix)
	if p, _, ok := strings.Cut(idOrPrefix, "_"); ok {
		idOrPrefix = p
	}
	if idOrPrefix == "" {
		return nil, memory.FieldError{Field: "key", Problem: "is empty"}
	}
	k := new(APIKey)
	q := s.conn(ctx).NewUpdate().Model(k).Set("revoked_at = now()").Where("revoked_at IS NULL")
	if len(idOrPrefix) == 36 {
		q = q.Where("id::text = ?", idOrPrefix)
	} else {
		q = q.Where("prefix = ?", idOrPrefix)
	}
	if tenantID != "" {
		q = q.Where("tenant_id = ?", tenantID)
	}
	res, err := q.Returning("id, tenant_id, principal, prefix, revoked_at").Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("revoke api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, ErrNotFound
	}
	return k, nil
}
