-- Recall over a user's turns whose cost does not grow with the user's history
-- (issue 29). Recall compared every visible turn of the user exactly and counted
-- the keyword statistics over them per recall: about 5 ms per thousand turns. A
-- user with many turns is now served from indexes, a bounded set scored exactly:
--
--   meaning: evidence_embedding_hnsw, walked with pgvector's iterative scans and
--            filtered by tenant, user and time (recall/stmt.go);
--   words:   evidence_postings, each lexeme's turns ordered by a cheap score (its
--            term frequency against the turn's length), so the best N turns of each
--            query word are an index range; BM25 then scores those;
--   BM25's collection statistics: evidence_stats (turns, their lexemes) and
--            evidence_terms (turns per lexeme), kept per tenant and user.
--
-- All three tables are kept by the statement triggers below, in the transaction
-- that writes the evidence: a commit, a redaction or an erasure changes them with
-- the turns, and a rolled-back write leaves no trace. Row locks of the upserts
-- are taken in (tenant, user, lexeme) order within a statement, so concurrent
-- writers wait for each other instead of deadlocking. A user whose counts fall to
-- zero (erasure) leaves no row: the lexemes are the user's words.
CREATE TABLE evidence_stats (
    tenant_id text   NOT NULL,
    user_id   text   NOT NULL,
    docs      bigint NOT NULL, -- turns
    lex_docs  bigint NOT NULL, -- turns with a search vector
    lex_len   bigint NOT NULL, -- their own lexemes (BM25's length), summed
    PRIMARY KEY (tenant_id, user_id)
);

--bun:split

CREATE TABLE evidence_terms (
    tenant_id text   NOT NULL,
    user_id   text   NOT NULL,
    lexeme    text   NOT NULL,
    df        bigint NOT NULL, -- turns whose search vector holds the lexeme
    PRIMARY KEY (tenant_id, user_id, lexeme)
);

--bun:split

-- w is the cheap score (see evidence_lexemes); read backwards, the key gives a
-- lexeme's best turns first.
CREATE TABLE evidence_postings (
    tenant_id   text NOT NULL,
    user_id     text NOT NULL,
    lexeme      text NOT NULL,
    w           real NOT NULL,
    evidence_id uuid NOT NULL,
    PRIMARY KEY (tenant_id, user_id, lexeme, w, evidence_id)
);

--bun:split

-- A search vector's lexemes with their term frequency as recall's BM25 counts it
-- (a turn's own words in full, the turn before it, weight C, at 0.35) and the
-- cheap score w: BM25's saturation of that frequency against the turn's own
-- length (k1 1.2, b 0.75) over a fixed average length of 8, so it depends on the
-- turn alone and can be computed again to delete its posting.
CREATE FUNCTION evidence_lexemes(s tsvector)
RETURNS TABLE (lexeme text, w real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT u.lexeme,
           (x.tf / (x.tf + 1.2 * (0.25 + 0.75 * greatest(length(ts_filter(s, '{a,b,d}')), 1) / 8.0)))::real
    FROM unnest(s) u
    CROSS JOIN LATERAL (SELECT coalesce((SELECT sum(CASE wt WHEN 'C' THEN 0.35 ELSE 1.0 END) FROM unnest(u.weights) wt), 1.0)::float8 AS tf) x
$$;

--bun:split

-- evidence_index_apply adds (sign 1) or removes (sign -1) turns from the
-- statistics and postings: one row per turn in the arrays (tenant, user, search,
-- id).
CREATE FUNCTION evidence_index_apply(tenants text[], users text[], searches tsvector[], ids uuid[], sign int)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evidence_stats AS s (tenant_id, user_id, docs, lex_docs, lex_len)
    SELECT r.t, r.u, sign * count(*), sign * count(r.s),
           sign * coalesce(sum(greatest(length(ts_filter(r.s, '{a,b,d}')), 1)) FILTER (WHERE r.s IS NOT NULL), 0)
    FROM unnest(tenants, users, searches) r(t, u, s)
    GROUP BY r.t, r.u ORDER BY r.t, r.u
    ON CONFLICT (tenant_id, user_id) DO UPDATE
        SET docs = s.docs + excluded.docs, lex_docs = s.lex_docs + excluded.lex_docs, lex_len = s.lex_len + excluded.lex_len;

    INSERT INTO evidence_terms AS t (tenant_id, user_id, lexeme, df)
    SELECT r.t, r.u, l.lexeme, sign * count(*)
    FROM unnest(tenants, users, searches) r(t, u, s) CROSS JOIN LATERAL unnest(r.s) l
    WHERE r.s IS NOT NULL
    GROUP BY r.t, r.u, l.lexeme ORDER BY r.t, r.u, l.lexeme
    ON CONFLICT (tenant_id, user_id, lexeme) DO UPDATE SET df = t.df + excluded.df;

    IF sign > 0 THEN
        INSERT INTO evidence_postings (tenant_id, user_id, lexeme, w, evidence_id)
        SELECT r.t, r.u, l.lexeme, l.w, r.id
        FROM unnest(tenants, users, searches, ids) r(t, u, s, id) CROSS JOIN LATERAL evidence_lexemes(r.s) l
        WHERE r.s IS NOT NULL
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT DO NOTHING;
        RETURN;
    END IF;

    DELETE FROM evidence_postings p
    USING (SELECT r.t, r.u, l.lexeme, l.w, r.id
           FROM unnest(tenants, users, searches, ids) r(t, u, s, id) CROSS JOIN LATERAL evidence_lexemes(r.s) l
           WHERE r.s IS NOT NULL) k
    WHERE p.tenant_id = k.t AND p.user_id = k.u AND p.lexeme = k.lexeme AND p.w = k.w AND p.evidence_id = k.id;
    DELETE FROM evidence_terms t
    USING (SELECT DISTINCT r.t, r.u, l.lexeme FROM unnest(tenants, users, searches) r(t, u, s) CROSS JOIN LATERAL unnest(r.s) l WHERE r.s IS NOT NULL) k
    WHERE t.tenant_id = k.t AND t.user_id = k.u AND t.lexeme = k.lexeme AND t.df <= 0;
    DELETE FROM evidence_stats s
    USING (SELECT DISTINCT r.t, r.u FROM unnest(tenants, users) r(t, u)) k
    WHERE s.tenant_id = k.t AND s.user_id = k.u AND s.docs <= 0;
END
$$;

--bun:split

CREATE FUNCTION evidence_index_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM evidence_index_apply(array_agg(tenant_id), array_agg(user_id), array_agg(search), array_agg(id), 1)
    FROM new_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

CREATE FUNCTION evidence_index_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM evidence_index_apply(array_agg(tenant_id), array_agg(user_id), array_agg(search), array_agg(id), -1)
    FROM old_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

-- An update matters only when it changes what a turn is found by or whose it is
-- (setting its vector, the common update, does not).
CREATE FUNCTION evidence_index_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM evidence_index_apply(array_agg(o.tenant_id), array_agg(o.user_id), array_agg(o.search), array_agg(o.id), -1)
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE o.search IS DISTINCT FROM n.search OR o.user_id <> n.user_id OR o.tenant_id <> n.tenant_id
    HAVING count(*) > 0;
    PERFORM evidence_index_apply(array_agg(n.tenant_id), array_agg(n.user_id), array_agg(n.search), array_agg(n.id), 1)
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE o.search IS DISTINCT FROM n.search OR o.user_id <> n.user_id OR o.tenant_id <> n.tenant_id
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

CREATE TRIGGER evidence_index_insert AFTER INSERT ON evidence
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION evidence_index_insert();

--bun:split

CREATE TRIGGER evidence_index_delete AFTER DELETE ON evidence
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION evidence_index_delete();

--bun:split

CREATE TRIGGER evidence_index_update AFTER UPDATE ON evidence
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION evidence_index_update();

--bun:split

-- The turns already stored.
SELECT evidence_index_apply(array_agg(tenant_id), array_agg(user_id), array_agg(search), array_agg(id), 1)
FROM evidence HAVING count(*) > 0;

--bun:split

-- Read by recall for a user with many turns (see above); a user with few is still
-- compared exactly, through evidence_tenant_user_time.
CREATE INDEX IF NOT EXISTS evidence_embedding_hnsw ON evidence USING hnsw (embedding vector_cosine_ops);
