-- One review item per key and value (issue 50): a candidate that needs a reviewer
-- while an identical one (same tenant, memory key, value and retraction) already
-- waits joins it instead of opening a second item. It stays PENDING, its evidence
-- linked to the item too, and takes the item's outcome when the item is decided.
ALTER TABLE candidates
    ADD COLUMN joined_candidate_id uuid;

--bun:split

-- The open item of a key, found under the key's lock by a candidate about to join.
CREATE INDEX candidates_review_items ON candidates (tenant_id, memory_key) WHERE status = 'NEEDS_CONFIRMATION';

--bun:split

-- The candidates that joined an item, settled with it.
CREATE INDEX candidates_joined ON candidates (tenant_id, joined_candidate_id) WHERE joined_candidate_id IS NOT NULL;
