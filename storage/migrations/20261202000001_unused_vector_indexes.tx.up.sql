-- Vector indexes no statement reads (issue 15). Recall compares the facts of a
-- user, its department and its agent, and the user's turns, exactly (each a few
-- hundred rows found through btree indexes), and walks facts_embedding_tenant_hnsw
-- for current TENANT facts; past recall compares TENANT facts exactly too. No
-- query orders facts or evidence by distance over a whole table or over every
-- shared scope, which is what these three indexes serve. Every write still paid
-- for them: an HNSW insert per evidence row and per fact revision, and another
-- each time an UPDATE rewrites a row (a status change touches indexed columns, so
-- it is never a HOT update). engram bench write at 32 callers, two interleaved
-- pairs: Postgres CPU per write 4.65 / 4.30 -> 4.18 / 3.88 ms; the cost grows with
-- the table, since an insert walks the graph. engram bench recall builds an index
-- of its own for its bare pgvector row.
DROP INDEX IF EXISTS facts_embedding_hnsw;

--bun:split

DROP INDEX IF EXISTS evidence_embedding_hnsw;

--bun:split

DROP INDEX IF EXISTS facts_embedding_shared_hnsw;
