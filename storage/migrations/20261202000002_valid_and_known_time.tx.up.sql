-- Issue 28: valid time decides, and every revision keeps its transaction time.
--
-- stated_at: the times (valid time) a revision's value was stated, the statement
-- that wrote it and every duplicate since; governance places a late statement
-- among them. Empty on rows written before it means valid_from alone (no backfill:
-- a rewrite of every fact).
ALTER TABLE facts ADD COLUMN IF NOT EXISTS stated_at timestamptz[] NOT NULL DEFAULT '{}';

--bun:split

-- A revision is learned when its row is written, not when its transaction began
-- (a writer waits for the memory key's lock after it began; the clock then orders
-- a key's revisions as their writers held the key).
ALTER TABLE facts ALTER COLUMN recorded_at SET DEFAULT clock_timestamp();

--bun:split

-- changed_at: since when the memory holds the row's status and validity as they
-- are (NULL: since recorded_at). Earlier ones are in fact_versions.
ALTER TABLE facts ADD COLUMN IF NOT EXISTS changed_at timestamptz;

--bun:split

-- fact_versions: a revision's earlier status and validity, each with the span of
-- transaction time the memory held it ([held_from, held_until)), so a read
-- "known at T" sees a revision as it was then (ACTIVE before a later statement
-- closed it, open before a late one trimmed it).
CREATE TABLE IF NOT EXISTS fact_versions (
    tenant_id   text        NOT NULL,
    fact_id     uuid        NOT NULL,
    status      text        NOT NULL,
    valid_from  timestamptz NOT NULL,
    valid_until timestamptz,
    held_from   timestamptz NOT NULL,
    held_until  timestamptz NOT NULL,
    FOREIGN KEY (tenant_id, fact_id) REFERENCES facts (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE INDEX IF NOT EXISTS fact_versions_by_fact ON fact_versions (tenant_id, fact_id, held_until);

--bun:split

-- Every change of a revision's status or validity, whichever code makes it
-- (governance, invalidation, expiry, consolidation), keeps the version it ends.
CREATE OR REPLACE FUNCTION facts_keep_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now_ts timestamptz := clock_timestamp();
BEGIN
    INSERT INTO fact_versions (tenant_id, fact_id, status, valid_from, valid_until, held_from, held_until)
    VALUES (OLD.tenant_id, OLD.id, OLD.status, OLD.valid_from, OLD.valid_until, coalesce(OLD.changed_at, OLD.recorded_at), now_ts);
    NEW.changed_at := now_ts;
    RETURN NEW;
END
$$;

--bun:split

DROP TRIGGER IF EXISTS facts_keep_version ON facts;

--bun:split

CREATE TRIGGER facts_keep_version BEFORE UPDATE OF status, valid_from, valid_until ON facts
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.valid_from IS DISTINCT FROM NEW.valid_from OR OLD.valid_until IS DISTINCT FROM NEW.valid_until)
    EXECUTE FUNCTION facts_keep_version();
