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

--bun:split

-- The structured retriever over current TENANT facts reads the columns it filters
-- and ranks by from the index alone (an index-only scan), not every row's page.
-- "importance >= 0" always holds (a CHECK says so); only the structured statement
-- states it, so this index can serve that statement and nothing else (the
-- semantic one would otherwise read every TENANT fact through it and sort them
-- instead of walking facts_embedding_tenant_hnsw).
CREATE INDEX IF NOT EXISTS facts_recall_tenant_st ON facts (tenant_id)
    INCLUDE (predicate, memory_type, entity_id, task_id, importance, valid_from, valid_until, id)
    WHERE status = 'ACTIVE' AND scope = 'TENANT' AND importance >= 0;
