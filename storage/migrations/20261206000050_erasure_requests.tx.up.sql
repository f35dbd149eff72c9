-- Every erasure request (issue 50): the tombstone is the subject's erasure state
-- (RUNNING refuses writes) and a second erasure of the subject reopened it,
-- overwriting who asked and why. Each erasure run now appends its request here:
-- who, when, why, and when it finished with what it removed.
CREATE TABLE erasure_requests (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL CHECK (tenant_id <> ''),
    subject_type text        NOT NULL CHECK (subject_type IN ('USER', 'TENANT')),
    subject_id   text        NOT NULL,
    requested_by text        NOT NULL DEFAULT '',
    reason       text        NOT NULL DEFAULT '',
    requested_at timestamptz NOT NULL DEFAULT now(),
    workflow_id  text        NOT NULL DEFAULT '',
    -- The erasure run the request started; a retried BeginErasure of the run adds
    -- nothing. Empty for requests recorded before this table (one per tombstone).
    run_id       text        NOT NULL DEFAULT '',
    status       text        NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'DONE')),
    counts       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    finished_at  timestamptz
);

--bun:split

CREATE UNIQUE INDEX erasure_requests_run ON erasure_requests (tenant_id, subject_type, subject_id, run_id) WHERE run_id <> '';

--bun:split

CREATE INDEX erasure_requests_tenant ON erasure_requests (tenant_id, requested_at DESC);

--bun:split

-- The request each tombstone still remembers.
INSERT INTO erasure_requests (tenant_id, subject_type, subject_id, requested_by, reason, requested_at, workflow_id, status, counts, finished_at)
SELECT tenant_id, subject_type, subject_id, requested_by, reason, requested_at, workflow_id, status, counts, finished_at FROM tombstones;
