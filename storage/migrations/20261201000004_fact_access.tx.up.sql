-- How often and when each fact revision was recalled, in a narrow table of its own
-- (issue 16). Kept in facts, every recall rewrote the whole row of each fact it
-- returned (about 2.5 kB with the vector inline): a new row version in the heap
-- and in the WAL per fact, pages to prune for the reads beside it, and visibility
-- map bits cleared, so index-only scans went back to the heap. At eight callers
-- that update cost about 0.9 ms of server time per recall, a fifth of the recall.
-- Here a read is a row of four columns updated in place. Deleting a fact (an
-- erasure) deletes its counts with it.
CREATE TABLE IF NOT EXISTS fact_access (
    tenant_id        text        NOT NULL,
    fact_id          uuid        NOT NULL,
    access_count     bigint      NOT NULL CHECK (access_count >= 0),
    last_accessed_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, fact_id),
    FOREIGN KEY (tenant_id, fact_id) REFERENCES facts (tenant_id, id) ON DELETE CASCADE
) WITH (fillfactor = 50);

--bun:split

-- The counts recorded so far move over; the old columns stay (a binary of the
-- previous release still selects them) but are no longer written.
INSERT INTO fact_access (tenant_id, fact_id, access_count, last_accessed_at)
SELECT tenant_id, id, access_count, coalesce(last_accessed_at, recorded_at) FROM facts
WHERE access_count > 0 OR last_accessed_at IS NOT NULL
ON CONFLICT DO NOTHING;

--bun:split

COMMENT ON COLUMN facts.access_count IS 'not written since fact_access (20261201000004); see fact_access';
COMMENT ON COLUMN facts.last_accessed_at IS 'not written since fact_access (20261201000004); see fact_access';
