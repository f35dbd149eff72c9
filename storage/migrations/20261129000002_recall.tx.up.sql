-- Indexes for recall (issue 5). Every recall query filters by tenant and by the
-- principal's visible scopes; these let each scope branch read only its own rows.

-- Facts a user owns (USER, SESSION, TASK scopes), current or as of a past time.
CREATE INDEX facts_recall_user ON facts (tenant_id, user_id, status, valid_from);

--bun:split

-- Shared facts (TENANT, DEPARTMENT, AGENT scopes) that are current.
CREATE INDEX facts_recall_shared ON facts (tenant_id, scope, department_id, agent_id)
    WHERE status = 'ACTIVE' AND scope IN ('TENANT', 'DEPARTMENT', 'AGENT');

--bun:split

-- Shared facts as of a past time.
CREATE INDEX facts_recall_shared_hist ON facts (tenant_id, scope, valid_from)
    WHERE scope IN ('TENANT', 'DEPARTMENT', 'AGENT');

--bun:split

-- Facts about an entity (the graph retriever ends there).
CREATE INDEX facts_recall_entity ON facts (tenant_id, entity_id) WHERE entity_id <> '';

--bun:split

-- Multi-hop walks leave an entity through its outgoing edges.
CREATE INDEX edges_from ON edges (tenant_id, from_type, from_id);

--bun:split

-- A user's entities (the walk starts from the user and the entities named).
CREATE INDEX entities_user ON entities (tenant_id, user_id, type, state);

--bun:split

-- Reading access_count/last_accessed_at updates in place: room on each page keeps
-- them HOT, so a recall never adds entries to the vector or full-text indexes.
ALTER TABLE facts SET (fillfactor = 85);

--bun:split

-- Semantic search over the shared facts a principal may see (TENANT, its DEPARTMENT,
-- its AGENT) walks this smaller graph instead of the whole table's, so a
-- visibility filter that keeps a few percent of rows still fills the top k.
CREATE INDEX facts_embedding_shared_hnsw ON facts USING hnsw (embedding vector_cosine_ops)
    WHERE status = 'ACTIVE' AND scope IN ('TENANT', 'DEPARTMENT', 'AGENT');
