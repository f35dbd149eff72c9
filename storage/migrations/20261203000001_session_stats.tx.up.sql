-- Recall scores a user's sessions as documents (recall/stmt.go sessionKeywordSQL):
-- BM25 needs the number of the user's sessions and their average length. A user
-- with few turns counts them from the turns it reads; a user with many counted
-- them from the sessions table, every session of the user's a heap page read
-- (1.3 ms of a recall at 900 sessions, growing with the history). session_stats
-- keeps them per tenant and user, by the statement triggers below, in the
-- transaction that writes the sessions (created, a turn appended, erased). Row
-- locks are taken in (tenant, user) order; a user with no sessions has no row.
CREATE TABLE session_stats (
    tenant_id text   NOT NULL,
    user_id   text   NOT NULL,
    sessions  bigint NOT NULL DEFAULT 0,
    turns     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id)
);

--bun:split

-- session_stats_apply adds each (tenant, user, sessions, turns) row of the arrays.
CREATE FUNCTION session_stats_apply(tenants text[], users text[], sessions bigint[], turns bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO session_stats AS s (tenant_id, user_id, sessions, turns)
    SELECT r.t, r.u, sum(r.n), sum(r.c)
    FROM unnest(tenants, users, sessions, turns) r(t, u, n, c)
    GROUP BY r.t, r.u ORDER BY r.t, r.u
    ON CONFLICT (tenant_id, user_id) DO UPDATE
        SET sessions = s.sessions + excluded.sessions, turns = s.turns + excluded.turns;
    DELETE FROM session_stats s
    USING (SELECT DISTINCT r.t, r.u FROM unnest(tenants, users) r(t, u)) k
    WHERE s.tenant_id = k.t AND s.user_id = k.u AND s.sessions <= 0;
END
$$;

--bun:split

CREATE FUNCTION session_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM session_stats_apply(array_agg(tenant_id), array_agg(user_id), array_agg(1::bigint), array_agg(turn_count::bigint))
    FROM new_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

CREATE FUNCTION session_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM session_stats_apply(array_agg(tenant_id), array_agg(user_id), array_agg(-1::bigint), array_agg(-turn_count::bigint))
    FROM old_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

-- An update matters when it changes the session's length or whose it is (a turn
-- appended, the user set on the first turn).
CREATE FUNCTION session_stats_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM session_stats_apply(array_agg(x.t), array_agg(x.u), array_agg(x.n), array_agg(x.c))
    FROM (SELECT o.tenant_id AS t, o.user_id AS u, -1::bigint AS n, -o.turn_count::bigint AS c
          FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
          WHERE o.turn_count <> n.turn_count OR o.user_id <> n.user_id
          UNION ALL
          SELECT n.tenant_id, n.user_id, 1, n.turn_count
          FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
          WHERE o.turn_count <> n.turn_count OR o.user_id <> n.user_id) x
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

--bun:split

CREATE TRIGGER session_stats_insert AFTER INSERT ON sessions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_stats_insert();

--bun:split

CREATE TRIGGER session_stats_delete AFTER DELETE ON sessions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION session_stats_delete();

--bun:split

CREATE TRIGGER session_stats_update AFTER UPDATE ON sessions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_stats_update();

--bun:split

-- The sessions already stored.
INSERT INTO session_stats (tenant_id, user_id, sessions, turns)
SELECT tenant_id, user_id, count(*), sum(turn_count) FROM sessions GROUP BY tenant_id, user_id;
