-- A write finds the turn before it in its session (write.Record's previousTurn:
-- the words of the question a reply answers): the user's turns in the session
-- before the event's time, latest first. Through evidence_tenant_user_time that
-- walked back through the user's turns of every session until it met one of this
-- session, and the first turn of a session met none: the whole history. At
-- 100,000 turns of one user (engram bench recall --history) the statement took
-- 3.3 ms on average, the most Postgres time of a batch ingest, growing with the
-- history. This index makes it one probe.
CREATE INDEX IF NOT EXISTS evidence_tenant_user_session_time ON evidence (tenant_id, user_id, session_id, occurred_at DESC);
