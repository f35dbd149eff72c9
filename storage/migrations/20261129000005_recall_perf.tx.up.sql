-- Recall runs as one prepared statement with a cached generic plan (issue 5,
-- performance). Its semantic search over shared facts is split by scope: the
-- TENANT-scope facts a principal may see walk this index (a tenant filter keeps
-- about 1/tenants of it, which an iterative HNSW scan handles), while the facts of
-- its DEPARTMENT and AGENT, a few hundred at most, are compared exactly through
-- facts_recall_shared.
CREATE INDEX IF NOT EXISTS facts_embedding_tenant_hnsw ON facts USING hnsw (embedding vector_cosine_ops)
    WHERE status = 'ACTIVE' AND scope = 'TENANT';

--bun:split

-- Keyword search over the current TENANT-scope facts: the matches among them only,
-- instead of every TENANT fact of the tenant or every match in the table.
CREATE INDEX IF NOT EXISTS facts_search_tenant_gin ON facts USING gin (search)
    WHERE status = 'ACTIVE' AND scope = 'TENANT';
