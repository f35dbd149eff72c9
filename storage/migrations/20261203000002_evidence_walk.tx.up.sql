-- The walk of evidence_embedding_hnsw that finds a heavy user's turns nearest a
-- question (recall/stmt.go evidenceSemanticSQL), as a function of its own: the
-- nearest k turns of the tenant's user visible at a time, by cosine distance,
-- with the row's tuple id.
--
-- Inside the recall statement the walk was an ordered scan of the index with the
-- tenant, user and time filtered above it (OFFSET 0, so the generic plan could not
-- read the user's turns through a btree and sort them). But a generic plan
-- estimates a user's share of the table as 1/(number of users): with a few
-- hundred users it expected fewer rows than the limit, costed the walk as a walk
-- of the whole index, and read and sorted every row of the table instead (7,700
-- rows, 302 users: TestEvidenceFromIndexesOnlyForManyTurns), a cost that grows
-- with everyone's history. Here the plan is made with sequential scans and sorts
-- priced out, so the only plan left is the walk (the iterative scan,
-- hnsw.iterative_scan, walks on until k visible rows are found or
-- hnsw.max_scan_tuples is reached: the settings of the caller's session).
CREATE FUNCTION evidence_walk(p_tenant text, p_user text, p_q vector, p_at timestamptz, p_k int)
RETURNS TABLE (id uuid, tid tid, d float8)
LANGUAGE plpgsql STABLE ROWS 100
SET enable_seqscan = off
SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    SELECT x.id, x.tid, x.d FROM (
        SELECT e.id, e.ctid AS tid, e.tenant_id AS t, e.user_id AS u, e.occurred_at AS o, e.embedding <=> p_q AS d
        FROM evidence e WHERE e.embedding IS NOT NULL ORDER BY e.embedding <=> p_q OFFSET 0) x
    WHERE x.t = p_tenant AND x.u = p_user AND x.o <= p_at
    LIMIT p_k;
END
$$;
