-- The walk of facts_embedding_tenant_hnsw that finds a tenant's current
-- TENANT-scope facts nearest a question (recall/stmt.go tenantSemCurrent), as a
-- function of its own, for the reason evidence_walk is one: the index holds every
-- tenant's TENANT facts, a generic plan takes one tenant's share for 1/(number of
-- tenants), and with a few hundred tenants it read and sorted every tenant's
-- TENANT facts instead of walking the index (1,300 facts of 301 tenants:
-- TestTenantFactsWalkedWithManyTenants). Sequential scans and sorts are priced
-- out here, so the plan is the walk (iterative scan: it walks on until k facts of
-- the tenant valid at p_at are found or hnsw.max_scan_tuples is reached).
CREATE FUNCTION facts_tenant_walk(p_tenant text, p_q vector, p_at timestamptz, p_k int)
RETURNS TABLE (id uuid, tid tid, d float8)
LANGUAGE plpgsql STABLE ROWS 100
SET enable_seqscan = off
SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    SELECT x.id, x.tid, x.d FROM (
        SELECT f.id, f.ctid AS tid, f.tenant_id AS t, f.valid_from AS vf, f.valid_until AS vu, f.embedding <=> p_q AS d
        FROM facts f WHERE f.status = 'ACTIVE' AND f.scope = 'TENANT' AND f.embedding IS NOT NULL
        ORDER BY f.embedding <=> p_q OFFSET 0) x
    WHERE x.t = p_tenant AND x.vf <= p_at AND (x.vu IS NULL OR x.vu > p_at)
    LIMIT p_k;
END
$$;
