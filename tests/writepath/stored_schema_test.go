package writepath

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

const petsSchema = `
name: pets
version: 1
description: What a user tells about their pets.
extends: general
predicates:
  - name: pet_name
    description: The name of the user's pet.
    memory_type: FACT
    value_type: string
    scopes: [USER]
    mentions: ['猫.*叫什么', '\bpet''s name\b']
    examples:
      - {text: "我的猫叫年糕", object: "年糕", scope: USER, origin: STATED}
    patterns:
      - lang: zh
        regex: '我的(?:猫|狗)叫(?P<value>[\p{Han}A-Za-z]+)'
        confidence: 0.9
`

// storedSchemaEnv starts a write worker (the rule extractor) whose schemas are
// the tenant's stored ones, else the built-ins, and a recall engine over the same
// store and schemas.
func storedSchemaEnv(t *testing.T) (*env, *recall.Engine) {
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	q := testenv.TaskQueue(t)
	acts := writetest.Activities(st)
	acts.Schemas = schema.Stored(st.LookupSchema)
	writetest.Worker(t, c, q, acts)
	eng := recall.New(st, acts.Embedder, recall.NewPostgresKeyword(st), acts.Schemas, recall.Options{AccessLog: recall.AccessLogOff})
	t.Cleanup(func() { eng.Close() })
	return &env{t: t, st: st, c: c, queue: q}, eng
}

// A tenant's schema stored with PutSchema drives the write path for that tenant
// only: its patterns extract, its version is recorded on the fact, and another
// tenant using the same name gets the built-in behaviour (here: no such schema).
func TestStoredSchemaDrivesTheWritePath(t *testing.T) {
	_, err := schema.Load([]byte(petsSchema))
	require.NoError(t, err, "the test's schema is valid")
	e, _ := storedSchemaEnv(t)
	st := e.st
	ctx := context.Background()
	for i := 0; i < 2; i++ { // two versions: the write pins the latest
		require.NoError(t, st.PutSchema(ctx, "t1", &storage.StoredSchema{Name: "pets", Source: petsSchema, CreatedBy: "admin"}, 0, -1))
	}

	r := e.write(writetest.Event("t1", "u1", "pets", "我的猫叫年糕", base))
	require.Equal(t, write.WriteCommitted, r.Status, r.Reason)
	f := find(e.active("t1", "u1"), "pet_name", memory.ScopeUser)
	require.NotNil(t, f)
	assert.Equal(t, "年糕", f.Object)
	assert.Equal(t, "pets", f.SchemaName)
	assert.Equal(t, 2, f.SchemaVersion, "the fact records the stored version it was written under")
	assert.Equal(t, 1, e.count("candidates", "tenant_id = 't1' AND schema_name = 'pets' AND schema_version = 2"),
		"candidates carry the bare name and version, so the schema report groups them")

	// Tenant t2 has no schema "pets": the write is refused as bad input, nothing stored.
	err = e.start(write.MemoryWriteInput{Event: writetest.Event("t2", "u1", "pets", "我的猫叫年糕", base)}).Get(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pets")
	assert.Equal(t, 0, e.count("events", "tenant_id = 't2'"))
}

// A tenant's stored schema drives recall too: the query parser reads the
// question with the tenant's predicates (the "pets" mention finds pet_name) and
// the fact comes back first; a tenant without that schema gets a schema field
// error that names the built-ins, never another tenant's schema.
func TestStoredSchemaDrivesRecall(t *testing.T) {
	e, eng := storedSchemaEnv(t)
	st := e.st
	ctx := context.Background()
	require.NoError(t, st.PutSchema(ctx, "t1", &storage.StoredSchema{Name: "pets", Source: petsSchema, CreatedBy: "admin"}, 0, -1))
	r := e.write(writetest.Event("t1", "u1", "pets", "我的猫叫年糕", base))
	require.Equal(t, write.WriteCommitted, r.Status, r.Reason)

	res, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "t1", UserID: "u1"}, Query: "我的猫叫什么？", Schema: "pets", AsOf: base.Add(time.Hour), K: 5, Explain: true})
	require.NoError(t, err)
	require.NotNil(t, res.Parsed)
	assert.Contains(t, res.Parsed.Predicates, "pet_name", "the tenant's predicate parsed the question")
	require.NotEmpty(t, res.Items)
	assert.Equal(t, recall.KindFact, res.Items[0].Kind)
	assert.Equal(t, "年糕", res.Items[0].Object)

	_, err = eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "t2", UserID: "u1"}, Query: "我的猫叫什么？", Schema: "pets", AsOf: base.Add(time.Hour)})
	var fe memory.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "schema", fe.Field)
	assert.Contains(t, fe.Problem, "general", "the error names the built-ins")
}
