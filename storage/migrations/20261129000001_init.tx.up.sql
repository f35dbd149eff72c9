-- Engram's data model. Every row carries tenant_id; foreign keys include the tenant
-- so that a row can never point at another tenant's row.

CREATE EXTENSION IF NOT EXISTS vector;

--bun:split

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

--bun:split

-- The embedding dimension is fixed once per database; the engine checks it at start.
INSERT INTO settings (key, value) VALUES ('embedding_dim', '512');

--bun:split

CREATE TABLE events (
    tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
    id              uuid        NOT NULL DEFAULT gen_random_uuid(),
    idempotency_key text        NOT NULL CHECK (idempotency_key <> ''),
    content_hash    text        NOT NULL,
    actor_type      text        NOT NULL CHECK (actor_type IN ('USER', 'AGENT', 'SYSTEM', 'TOOL')),
    actor_id        text        NOT NULL DEFAULT '',
    user_id         text        NOT NULL DEFAULT '',
    department_id   text        NOT NULL DEFAULT '',
    agent_id        text        NOT NULL DEFAULT '',
    session_id      text        NOT NULL DEFAULT '',
    task_id         text        NOT NULL DEFAULT '',
    event_type      text        NOT NULL CHECK (event_type IN ('MESSAGE', 'TOOL_RESULT', 'SYSTEM_EVENT', 'DOCUMENT')),
    source          text        NOT NULL DEFAULT '',
    schema_name     text        NOT NULL DEFAULT '',
    content         text        NOT NULL DEFAULT '',
    payload         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status          text        NOT NULL DEFAULT 'RECEIVED'
                    CHECK (status IN ('RECEIVED', 'PROCESSING', 'COMMITTED', 'PENDING_REVIEW', 'UNPARSED', 'FAILED')),
    status_reason   text        NOT NULL DEFAULT '',
    workflow_id     text        NOT NULL DEFAULT '',
    occurred_at     timestamptz NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, idempotency_key)
);

--bun:split

CREATE INDEX events_tenant_user_time ON events (tenant_id, user_id, occurred_at DESC);

--bun:split

CREATE TABLE evidence (
    tenant_id      text        NOT NULL CHECK (tenant_id <> ''),
    id             uuid        NOT NULL DEFAULT gen_random_uuid(),
    event_id       uuid        NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('TURN', 'DOCUMENT', 'TOOL_RESULT', 'API_RESPONSE', 'SYSTEM')),
    content        text        NOT NULL,
    locator        text        NOT NULL DEFAULT '',
    source_version text        NOT NULL DEFAULT '',
    speaker        text        NOT NULL DEFAULT '',
    user_id        text        NOT NULL DEFAULT '',
    department_id  text        NOT NULL DEFAULT '',
    agent_id       text        NOT NULL DEFAULT '',
    session_id     text        NOT NULL DEFAULT '',
    task_id        text        NOT NULL DEFAULT '',
    occurred_at    timestamptz NOT NULL,
    importance     real        NOT NULL DEFAULT 0.3 CHECK (importance >= 0 AND importance <= 1),
    key_id         text        NOT NULL DEFAULT '',
    embedding      vector(512),
    search         tsvector,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, event_id, locator),
    FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE INDEX evidence_tenant_user_time ON evidence (tenant_id, user_id, occurred_at DESC);

--bun:split

CREATE INDEX evidence_search_gin ON evidence USING gin (search);

--bun:split

CREATE INDEX evidence_embedding_hnsw ON evidence USING hnsw (embedding vector_cosine_ops);

--bun:split

CREATE TABLE candidates (
    tenant_id         text        NOT NULL CHECK (tenant_id <> ''),
    id                uuid        NOT NULL,
    event_id          uuid        NOT NULL,
    workflow_id       text        NOT NULL DEFAULT '',
    memory_type       text        NOT NULL CHECK (memory_type IN ('FACT', 'PREFERENCE', 'CONSTRAINT', 'DECISION', 'EXPERIENCE', 'EVENT')),
    scope             text        NOT NULL CHECK (scope IN ('TENANT', 'DEPARTMENT', 'USER', 'AGENT', 'SESSION', 'TASK')),
    department_id     text        NOT NULL DEFAULT '',
    user_id           text        NOT NULL DEFAULT '',
    agent_id          text        NOT NULL DEFAULT '',
    session_id        text        NOT NULL DEFAULT '',
    task_id           text        NOT NULL DEFAULT '',
    memory_key        text        NOT NULL DEFAULT '',
    subject           text        NOT NULL DEFAULT '',
    predicate         text        NOT NULL DEFAULT '',
    object            text        NOT NULL DEFAULT '',
    content           text        NOT NULL DEFAULT '',
    entity_type       text        NOT NULL DEFAULT '',
    entity_id         text        NOT NULL DEFAULT '',
    attributes        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    relations         jsonb       NOT NULL DEFAULT '[]'::jsonb,
    confidence        real        NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    origin            text        NOT NULL CHECK (origin IN ('STATED', 'INFERRED')),
    retraction        boolean     NOT NULL DEFAULT false,
    extractor         text        NOT NULL DEFAULT '',
    extractor_version text        NOT NULL DEFAULT '',
    schema_name       text        NOT NULL DEFAULT '',
    schema_version    integer     NOT NULL DEFAULT 0,
    valid_from        timestamptz,
    valid_until       timestamptz,
    status            text        NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'ACCEPTED', 'REJECTED', 'NEEDS_CONFIRMATION', 'SUPERSEDED')),
    action            text        NOT NULL DEFAULT '',
    reason            text        NOT NULL DEFAULT '',
    fact_id           uuid,
    reviewer          text        NOT NULL DEFAULT '',
    review_note       text        NOT NULL DEFAULT '',
    reviewed_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id) ON DELETE CASCADE,
    CHECK (valid_until IS NULL OR valid_from IS NULL OR valid_until >= valid_from)
);

--bun:split

CREATE INDEX candidates_tenant_status ON candidates (tenant_id, status);

--bun:split

CREATE TABLE candidate_evidence (
    tenant_id    text NOT NULL,
    candidate_id uuid NOT NULL,
    evidence_id  uuid NOT NULL,
    relation     text NOT NULL CHECK (relation IN ('SUPPORT', 'CONFLICT', 'REFERENCE')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, candidate_id, evidence_id, relation),
    FOREIGN KEY (tenant_id, candidate_id) REFERENCES candidates (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, evidence_id) REFERENCES evidence (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE TABLE facts (
    tenant_id           text        NOT NULL CHECK (tenant_id <> ''),
    id                  uuid        NOT NULL DEFAULT gen_random_uuid(),
    memory_key          text        NOT NULL CHECK (memory_key <> ''),
    revision            integer     NOT NULL CHECK (revision >= 1),
    owner_type          text        NOT NULL DEFAULT '',
    owner_id            text        NOT NULL DEFAULT '',
    scope               text        NOT NULL CHECK (scope IN ('TENANT', 'DEPARTMENT', 'USER', 'AGENT', 'SESSION', 'TASK')),
    department_id       text        NOT NULL DEFAULT '',
    user_id             text        NOT NULL DEFAULT '',
    agent_id            text        NOT NULL DEFAULT '',
    session_id          text        NOT NULL DEFAULT '',
    task_id             text        NOT NULL DEFAULT '',
    memory_type         text        NOT NULL CHECK (memory_type IN ('FACT', 'PREFERENCE', 'CONSTRAINT', 'DECISION', 'EXPERIENCE', 'EVENT')),
    subject             text        NOT NULL DEFAULT '',
    predicate           text        NOT NULL DEFAULT '',
    object              text        NOT NULL DEFAULT '',
    content             text        NOT NULL,
    attributes          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    entity_type         text        NOT NULL DEFAULT '',
    entity_id           text        NOT NULL DEFAULT '',
    status              text        NOT NULL CHECK (status IN ('ACTIVE', 'SUPERSEDED', 'EXPIRED', 'INVALIDATED')),
    origin              text        NOT NULL DEFAULT 'STATED' CHECK (origin IN ('STATED', 'INFERRED')),
    confidence          real        NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    importance          real        NOT NULL DEFAULT 0.5 CHECK (importance >= 0 AND importance <= 1),
    valid_from          timestamptz NOT NULL,
    valid_until         timestamptz,
    observed_at         timestamptz NOT NULL,
    supersedes_id       uuid,
    source_candidate_id uuid,
    schema_name         text        NOT NULL DEFAULT '',
    schema_version      integer     NOT NULL DEFAULT 0,
    reason              text        NOT NULL DEFAULT '',
    key_id              text        NOT NULL DEFAULT '',
    embedding           vector(512),
    search              tsvector,
    access_count        bigint      NOT NULL DEFAULT 0,
    last_accessed_at    timestamptz,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    closed_at           timestamptz,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, memory_key, revision),
    FOREIGN KEY (tenant_id, supersedes_id) REFERENCES facts (tenant_id, id) ON DELETE SET NULL (supersedes_id),
    FOREIGN KEY (tenant_id, source_candidate_id) REFERENCES candidates (tenant_id, id) ON DELETE SET NULL (source_candidate_id),
    CHECK (valid_until IS NULL OR valid_until >= valid_from),
    -- a scope carries the id it needs
    CHECK (scope <> 'DEPARTMENT' OR department_id <> ''),
    CHECK (scope <> 'USER' OR user_id <> ''),
    CHECK (scope <> 'AGENT' OR agent_id <> ''),
    CHECK (scope <> 'SESSION' OR session_id <> ''),
    CHECK (scope <> 'TASK' OR task_id <> '')
);

--bun:split

-- At most one ACTIVE revision per memory key: the rule that keeps recall honest.
CREATE UNIQUE INDEX facts_one_active ON facts (tenant_id, memory_key) WHERE status = 'ACTIVE';

--bun:split

CREATE INDEX facts_tenant_user_status ON facts (tenant_id, user_id, status);

--bun:split

CREATE INDEX facts_tenant_key_valid ON facts (tenant_id, memory_key, valid_from);

--bun:split

CREATE INDEX facts_embedding_hnsw ON facts USING hnsw (embedding vector_cosine_ops);

--bun:split

CREATE INDEX facts_search_gin ON facts USING gin (search);

--bun:split

ALTER TABLE candidates
    ADD FOREIGN KEY (tenant_id, fact_id) REFERENCES facts (tenant_id, id) ON DELETE SET NULL (fact_id);

--bun:split

CREATE TABLE fact_evidence (
    tenant_id   text NOT NULL,
    fact_id     uuid NOT NULL,
    evidence_id uuid NOT NULL,
    relation    text NOT NULL DEFAULT 'SUPPORT' CHECK (relation IN ('SUPPORT', 'CONFLICT', 'REFERENCE')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, fact_id, evidence_id),
    FOREIGN KEY (tenant_id, fact_id) REFERENCES facts (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, evidence_id) REFERENCES evidence (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE TABLE entities (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    type        text        NOT NULL CHECK (type <> ''),
    id          text        NOT NULL CHECK (id <> ''),
    user_id     text        NOT NULL DEFAULT '',
    state       text        NOT NULL DEFAULT '',
    attributes  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, type, id)
);

--bun:split

CREATE TABLE edges (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    id          bigserial   PRIMARY KEY,
    type        text        NOT NULL CHECK (type <> ''),
    from_type   text        NOT NULL,
    from_id     text        NOT NULL,
    to_type     text        NOT NULL,
    to_id       text        NOT NULL,
    user_id     text        NOT NULL DEFAULT '',
    attributes  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    valid_from  timestamptz NOT NULL DEFAULT now(),
    valid_until timestamptz,
    evidence_id uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, type, from_type, from_id, to_type, to_id),
    FOREIGN KEY (tenant_id, from_type, from_id) REFERENCES entities (tenant_id, type, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, to_type, to_id) REFERENCES entities (tenant_id, type, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, evidence_id) REFERENCES evidence (tenant_id, id) ON DELETE SET NULL (evidence_id),
    CHECK (valid_until IS NULL OR valid_until >= valid_from)
);

--bun:split

CREATE INDEX edges_to ON edges (tenant_id, to_type, to_id);

--bun:split

CREATE TABLE tasks (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    id          text        NOT NULL CHECK (id <> ''),
    user_id     text        NOT NULL DEFAULT '',
    session_id  text        NOT NULL DEFAULT '',
    agent_id    text        NOT NULL DEFAULT '',
    goal        text        NOT NULL DEFAULT '',
    state       text        NOT NULL CHECK (state IN ('CREATED', 'PLANNING', 'WAITING_CONFIRMATION', 'EXECUTING', 'COMPLETED', 'FAILED', 'CANCELLED', 'OUTCOME_UNKNOWN')),
    done        jsonb       NOT NULL DEFAULT '[]'::jsonb,
    todo        jsonb       NOT NULL DEFAULT '[]'::jsonb,
    next_step   text        NOT NULL DEFAULT '',
    last_error  text        NOT NULL DEFAULT '',
    workflow_id text        NOT NULL DEFAULT '',
    seq         bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

--bun:split

CREATE TABLE task_transitions (
    id         bigserial   PRIMARY KEY,
    tenant_id  text        NOT NULL,
    task_id    text        NOT NULL,
    seq        bigint      NOT NULL,
    from_state text        NOT NULL CHECK (from_state IN ('', 'CREATED', 'PLANNING', 'WAITING_CONFIRMATION', 'EXECUTING', 'COMPLETED', 'FAILED', 'CANCELLED', 'OUTCOME_UNKNOWN')),
    to_state   text        NOT NULL CHECK (to_state IN ('CREATED', 'PLANNING', 'WAITING_CONFIRMATION', 'EXECUTING', 'COMPLETED', 'FAILED', 'CANCELLED', 'OUTCOME_UNKNOWN')),
    actor      text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    step       text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL,
    UNIQUE (tenant_id, task_id, seq),
    FOREIGN KEY (tenant_id, task_id) REFERENCES tasks (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE TABLE sessions (
    tenant_id          text        NOT NULL CHECK (tenant_id <> ''),
    id                 text        NOT NULL CHECK (id <> ''),
    user_id            text        NOT NULL DEFAULT '',
    recent             jsonb       NOT NULL DEFAULT '[]'::jsonb,
    summary            text        NOT NULL DEFAULT '',
    turn_count         integer     NOT NULL DEFAULT 0,
    summarized_at_turn integer     NOT NULL DEFAULT 0,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

--bun:split

CREATE TABLE outbox (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL CHECK (tenant_id <> ''),
    kind         text        NOT NULL CHECK (kind IN ('FACT', 'EVIDENCE')),
    ref_id       uuid        NOT NULL,
    op           text        NOT NULL CHECK (op IN ('UPSERT', 'DELETE')),
    payload      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz
);

--bun:split

CREATE INDEX outbox_pending ON outbox (id) WHERE processed_at IS NULL;

--bun:split

CREATE TABLE api_keys (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     text        NOT NULL CHECK (tenant_id <> ''),
    principal     text        NOT NULL CHECK (principal <> ''),
    roles         text[]      NOT NULL CHECK (roles <@ ARRAY['agent', 'reviewer', 'admin']::text[] AND cardinality(roles) > 0),
    user_id       text        NOT NULL DEFAULT '',
    department_id text        NOT NULL DEFAULT '',
    agent_id      text        NOT NULL DEFAULT '',
    allowed_users text[]      NOT NULL DEFAULT '{}',
    prefix        text        NOT NULL,
    key_hash      text        NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);

--bun:split

CREATE TABLE access_log (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL CHECK (tenant_id <> ''),
    principal    text        NOT NULL DEFAULT '',
    purpose      text        NOT NULL DEFAULT '',
    user_id      text        NOT NULL DEFAULT '',
    query        text        NOT NULL DEFAULT '',
    fact_ids     uuid[]      NOT NULL DEFAULT '{}',
    evidence_ids uuid[]      NOT NULL DEFAULT '{}',
    at           timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX access_log_tenant_user ON access_log (tenant_id, user_id, at DESC);

--bun:split

CREATE TABLE tombstones (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL CHECK (tenant_id <> ''),
    subject_type text        NOT NULL CHECK (subject_type IN ('USER', 'TENANT')),
    subject_id   text        NOT NULL,
    requested_by text        NOT NULL DEFAULT '',
    reason       text        NOT NULL DEFAULT '',
    status       text        NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'DONE')),
    counts       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    requested_at timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    UNIQUE (tenant_id, subject_type, subject_id)
);
