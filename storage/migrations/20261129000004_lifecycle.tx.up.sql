-- Memory life cycle and privacy (issue 9): erasure progress, consolidation marks,
-- sealed originals of redacted evidence.

-- The workflow that erases a subject and how far it got; counts stays the record of
-- what was removed.
ALTER TABLE tombstones
    ADD COLUMN workflow_id text NOT NULL DEFAULT '',
    ADD COLUMN steps_done  text[] NOT NULL DEFAULT '{}';

--bun:split

-- A fine-grained fact folded into a summary fact by consolidation: the original
-- row stays (status SUPERSEDED, reason "consolidated"), pointing at its summary.
ALTER TABLE facts
    ADD COLUMN consolidated_into uuid;

--bun:split

CREATE INDEX facts_consolidated_into ON facts (tenant_id, consolidated_into) WHERE consolidated_into IS NOT NULL;

--bun:split

-- Expiry looks for ACTIVE facts whose validity ended.
CREATE INDEX facts_active_valid_until ON facts (valid_until) WHERE status = 'ACTIVE' AND valid_until IS NOT NULL;

--bun:split

-- Redaction keeps the original text only sealed (AES-GCM envelope) when configured;
-- original_key_id names the key that sealed it.
ALTER TABLE evidence
    ADD COLUMN original_sealed text NOT NULL DEFAULT '',
    ADD COLUMN original_key_id text NOT NULL DEFAULT '';

--bun:split

-- Erasure and the access log find rows by user; these are the scans they run.
CREATE INDEX candidates_tenant_user ON candidates (tenant_id, user_id);

--bun:split

CREATE INDEX entities_tenant_user ON entities (tenant_id, user_id);

--bun:split

CREATE INDEX edges_tenant_user ON edges (tenant_id, user_id);

--bun:split

CREATE INDEX sessions_tenant_user ON sessions (tenant_id, user_id);

--bun:split

CREATE INDEX tasks_tenant_user ON tasks (tenant_id, user_id);

--bun:split

CREATE INDEX outbox_ref ON outbox (tenant_id, ref_id);
