-- The sentences of long turns, each with its own vector (issue 27): a turn of
-- several sentences is one average in the turn's vector, and the sentence that
-- answers a question is diluted by the others; recall scores a turn by its best
-- sentence. Written with the turn (write.Record), read with it (the recall
-- statement joins them to the visible turns); user_id is kept so an index can
-- drive the search by principal later. Erasing the turn erases its sentences.
CREATE TABLE IF NOT EXISTS evidence_sentences (
    tenant_id   text        NOT NULL,
    evidence_id uuid        NOT NULL,
    n           int         NOT NULL CHECK (n >= 0),
    user_id     text        NOT NULL DEFAULT '',
    embedding   vector(512) NOT NULL,
    PRIMARY KEY (tenant_id, evidence_id, n),
    FOREIGN KEY (tenant_id, evidence_id) REFERENCES evidence (tenant_id, id) ON DELETE CASCADE
);

--bun:split

CREATE INDEX IF NOT EXISTS evidence_sentences_user ON evidence_sentences (tenant_id, user_id);
