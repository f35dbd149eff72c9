// Package typesense is the scale-out keyword index: a recall.KeywordIndex backed by
// a Typesense cluster through typesense-go/v2, fed from the Postgres outbox.
// Postgres stays the source of truth; everything here can be rebuilt by Reindex.
// It may import memory, storage and recall (the interface it implements).
//
// One collection (default "engram_memory") holds every tenant's documents, and
// every query the adapter sends carries `tenant_id:=<tenant>`; see README.md for
// why a shared collection rather than one per tenant.
//
// It has been tested only against internal/faketypesense, an in-memory stand-in:
// no Typesense server can be run on the development machines.
package typesense

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ts "github.com/typesense/typesense-go/v2/typesense"
	"github.com/typesense/typesense-go/v2/typesense/api"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
)

// DefaultCollection is the collection name when none is configured.
const DefaultCollection = "engram_memory"

// The environment variables config reads into the adapter's Config; errors name them.
const (
	EnvURL        = "ENGRAM_TYPESENSE_URL"
	EnvAPIKey     = "ENGRAM_TYPESENSE_API_KEY"
	EnvCollection = "ENGRAM_TYPESENSE_COLLECTION"
)

// Config says where the cluster is.
type Config struct {
	URL        string        // e.g. http://typesense:8108; empty means Typesense is not used
	APIKey     string        // an admin key (the indexer creates the collection and writes)
	Collection string        // default engram_memory
	Timeout    time.Duration // per request (default 5s)
	BatchSize  int           // documents per import request (default 200)
}

// Index is the adapter. It is safe for concurrent use.
type Index struct {
	client     *ts.Client
	collection string
	batch      int
}

var _ recall.KeywordIndex = (*Index)(nil)

// New builds the adapter; it does not contact the server (EnsureCollection does).
func New(cfg Config) (*Index, error) {
	if cfg.URL == "" {
		return nil, memory.FieldError{Field: EnvURL, Problem: "is empty"}
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, memory.FieldError{Field: EnvURL, Problem: fmt.Sprintf("%q is not an http(s) URL", cfg.URL)}
	}
	if cfg.APIKey == "" {
		return nil, memory.FieldError{Field: EnvAPIKey, Problem: "is empty"}
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 200
	}
	c := ts.NewClient(
		ts.WithServer(strings.TrimRight(cfg.URL, "/")),
		ts.WithAPIKey(cfg.APIKey),
		ts.WithConnectionTimeout(cfg.Timeout),
		ts.WithCircuitBreakerName("engram-typesense"),
	)
	return &Index{client: c, collection: cfg.Collection, batch: cfg.BatchSize}, nil
}

// Name implements recall.KeywordIndex.
func (ix *Index) Name() string { return "typesense" }

// Collection returns the collection name.
func (ix *Index) Collection() string { return ix.collection }

// Schema is the collection the adapter needs. content carries locale zh so
// Typesense segments Chinese into words; content_en holds the same text under the
// default locale so English is tokenised the usual way (typo tolerance and prefix
// matching stand in for stemming, which typesense-go v2.0.0's schema type cannot
// switch on).
func (ix *Index) Schema() *api.CollectionSchema {
	str := func(name string, facet bool) api.Field {
		return api.Field{Name: name, Type: "string", Facet: ptr(facet)}
	}
	num := func(name string) api.Field { return api.Field{Name: name, Type: "int64"} }
	return &api.CollectionSchema{
		Name: ix.collection,
		Fields: []api.Field{
			str(FieldTenant, true),
			str(FieldKind, true),
			{Name: FieldRefID, Type: "string", Index: ptr(false), Optional: ptr(true)},
			{Name: FieldContent, Type: "string", Locale: ptr("zh")},
			{Name: FieldContentEn, Type: "string"},
			str(FieldMemoryType, true),
			str(FieldMemoryKey, false),
			str(FieldScope, true),
			str(FieldUser, true),
			str(FieldDepartment, true),
			str(FieldAgent, true),
			str(FieldSession, true),
			str(FieldTask, true),
			str(FieldStatus, true),
			num(FieldValidFrom),
			num(FieldValidUntil),
			num(FieldOccurredAt),
			num(FieldClosedAt),
			num(FieldIndexedAt),
			{Name: FieldImportance, Type: "float"},
		},
	}
}

// EnsureCollection creates the collection when it is missing and checks that an
// existing one has every field the adapter writes. It is idempotent and safe to
// call from several workers at once.
func (ix *Index) EnsureCollection(ctx context.Context) error {
	want := ix.Schema()
	got, err := ix.client.Collection(ix.collection).Retrieve(ctx)
	if status(err) == http.StatusNotFound {
		_, err = ix.client.Collections().Create(ctx, want)
		if status(err) == http.StatusConflict { // another worker created it first
			return nil
		}
		if err != nil {
			return fmt.Errorf("create typesense collection %s: %w", ix.collection, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("retrieve typesense collection %s: %w", ix.collection, err)
	}
	have := map[string]api.Field{}
	for _, f := range got.Fields {
		have[f.Name] = f
	}
	var missing []string
	for _, f := range want.Fields {
		h, ok := have[f.Name]
		if !ok || h.Type != f.Type {
			missing = append(missing, f.Name+" "+f.Type)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("typesense collection %s lacks fields the adapter writes (%s): point %s at a new collection and reindex", ix.collection, strings.Join(missing, ", "), EnvCollection)
	}
	if h := have[FieldContent]; h.Locale == nil || *h.Locale != "zh" {
		return fmt.Errorf("typesense collection %s: field content must have locale zh so Chinese is segmented; point %s at a new collection and reindex", ix.collection, EnvCollection)
	}
	return nil
}

// ImportError lists the documents Typesense refused in an import.
type ImportError struct {
	Failed map[string]string // document id → Typesense's message
}

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "typesense refused %d document(s)", len(e.Failed))
	n := 0
	for id, msg := range e.Failed {
		if n == 3 {
			b.WriteString("; …")
			break
		}
		fmt.Fprintf(&b, "; %s: %s", id, msg)
		n++
	}
	return b.String()
}

// Upsert imports documents with action=upsert in batches. When Typesense refuses
// some documents the others are still written and an *ImportError names the
// refused ones; a transport or server error fails the call (nothing is known to
// be written, and upserting again is harmless).
func (ix *Index) Upsert(ctx context.Context, docs []Document) error {
	if len(docs) == 0 {
		return nil
	}
	now := time.Now().Unix()
	failed := map[string]string{}
	for start := 0; start < len(docs); start += ix.batch {
		end := min(start+ix.batch, len(docs))
		batch := make([]any, 0, end-start)
		for i := start; i < end; i++ {
			d := docs[i]
			if err := d.check(); err != nil {
				failed[d.ID] = err.Error()
				continue
			}
			d.IndexedAt = now
			batch = append(batch, d)
		}
		if len(batch) == 0 {
			continue
		}
		res, err := ix.client.Collection(ix.collection).Documents().Import(ctx, batch,
			&api.ImportDocumentsParams{Action: ptr("upsert"), BatchSize: ptr(len(batch))})
		if err != nil {
			return fmt.Errorf("typesense import: %w", err)
		}
		if len(res) != len(batch) {
			return fmt.Errorf("typesense import: %d results for %d documents", len(res), len(batch))
		}
		for i, r := range res {
			if r == nil || !r.Success {
				msg := "no result"
				if r != nil {
					msg = r.Error
				}
				failed[batch[i].(Document).ID] = msg
			}
		}
	}
	if len(failed) > 0 {
		return &ImportError{Failed: failed}
	}
	return nil
}

// Delete removes one document; a document that is not there is not an error.
func (ix *Index) Delete(ctx context.Context, tenantID string, kind recall.Kind, refID string) error {
	if err := checkValue("tenant_id", tenantID); err != nil {
		return err
	}
	_, err := ix.client.Collection(ix.collection).Document(DocID(tenantID, kind, refID)).Delete(ctx)
	if err != nil && status(err) != http.StatusNotFound {
		return fmt.Errorf("typesense delete %s %s: %w", kind, refID, err)
	}
	return nil
}

// Filter selects documents of one tenant for DeleteByFilter. Empty fields do not
// filter; at least one field must be set, or All for the whole tenant.
type Filter struct {
	Kind      recall.Kind
	UserID    string
	SessionID string
	TaskID    string
	MemoryKey string
	// IndexedBefore selects documents last written before this time (unix seconds);
	// Reindex uses it to drop documents whose rows are gone.
	IndexedBefore int64
	All           bool
}

// DeleteByFilter deletes a tenant's documents matching f (erasure of a user, a
// whole tenant, stale documents after a reindex) and returns how many went.
func (ix *Index) DeleteByFilter(ctx context.Context, tenantID string, f Filter) (int, error) {
	expr, err := deleteFilter(tenantID, f)
	if err != nil {
		return 0, err
	}
	n, err := ix.client.Collection(ix.collection).Documents().Delete(ctx, &api.DeleteDocumentsParams{FilterBy: &expr, BatchSize: ptr(500)})
	if err != nil {
		return 0, fmt.Errorf("typesense delete by filter: %w", err)
	}
	return n, nil
}

// EraseSubject removes a user's documents (userID empty: the whole tenant's) for
// an erasure; it satisfies activities.KeywordEraser.
func (ix *Index) EraseSubject(ctx context.Context, tenantID, userID string) (int64, error) {
	n, err := ix.DeleteByFilter(ctx, tenantID, Filter{UserID: userID, All: userID == ""})
	return int64(n), err
}

// MaxQueryBytes bounds the query text sent to Typesense.
const MaxQueryBytes = 2048

// Search implements recall.KeywordIndex: the tenant, visibility and as_of filters
// are part of the Typesense query, never applied afterwards.
func (ix *Index) Search(ctx context.Context, v recall.Visibility, query string, kinds []recall.Kind, limit int) ([]recall.KeywordHit, error) {
	filter, visible, err := VisibilityFilter(v, kinds)
	if err != nil || !visible {
		return nil, err
	}
	q := cleanQuery(query)
	if q == "" {
		return nil, nil
	}
	if limit <= 0 {
		limit = 10
	}
	limit = min(limit, 250) // Typesense's per_page ceiling
	params := &api.SearchCollectionParams{
		Q:             &q,
		QueryBy:       ptr(FieldContent + "," + FieldContentEn),
		FilterBy:      &filter,
		SortBy:        ptr("_text_match:desc," + FieldOccurredAt + ":desc"),
		PerPage:       &limit,
		Page:          ptr(1),
		IncludeFields: ptr(FieldKind + "," + FieldRefID + "," + FieldTenant),
	}
	res, err := ix.client.Collection(ix.collection).Documents().Search(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("typesense search: %w", err)
	}
	if res.Hits == nil {
		return nil, nil
	}
	out := make([]recall.KeywordHit, 0, len(*res.Hits))
	for _, h := range *res.Hits {
		if h.Document == nil {
			continue
		}
		d := *h.Document
		// Belt and braces: the filter already restricts the tenant.
		if t, _ := d[FieldTenant].(string); t != v.TenantID {
			return nil, fmt.Errorf("typesense returned a document of another tenant: refusing the result")
		}
		kind, _ := d[FieldKind].(string)
		ref, _ := d[FieldRefID].(string)
		var score float64
		if h.TextMatch != nil {
			score = float64(*h.TextMatch)
		}
		out = append(out, recall.KeywordHit{Kind: recall.Kind(kind), ID: ref, Score: score})
	}
	return out, nil
}

// cleanQuery keeps the query to words: Typesense reads a leading '-' as "exclude"
// and quotes as phrases, neither of which a recall question means.
func cleanQuery(s string) string {
	if len(s) > MaxQueryBytes {
		s = strings.ToValidUTF8(s[:MaxQueryBytes], "")
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case '"', '`', '*':
			return ' '
		}
		return r
	}, s)
	words := strings.Fields(s)
	for i, w := range words {
		words[i] = strings.TrimLeft(w, "-")
	}
	return strings.TrimSpace(strings.Join(words, " "))
}

// DocID is the document id of a row: kind, row id and a digest of the tenant, so
// an id built for one tenant can never address another tenant's document.
func DocID(tenantID string, kind recall.Kind, refID string) string {
	h := sha256.Sum256([]byte(tenantID))
	k := "f"
	if kind == recall.KindEvidence {
		k = "e"
	}
	return k + "_" + refID + "_" + hex.EncodeToString(h[:8])
}

func status(err error) int {
	var he *ts.HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// IsUnavailable reports whether err is a transport error, a 429 or a 5xx from
// Typesense (worth retrying later) rather than a refusal of the request or of
// some documents.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ie *ImportError
	var fe memory.FieldError
	if errors.As(err, &ie) || errors.As(err, &fe) {
		return false
	}
	s := status(err)
	return s == 0 || s == http.StatusTooManyRequests || s >= 500
}

func ptr[T any](v T) *T { return &v }
