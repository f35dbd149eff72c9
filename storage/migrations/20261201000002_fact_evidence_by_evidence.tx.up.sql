-- The facts a turn stands on, by the turn (recall asks whether a turn only backs
-- values since superseded; deleting a turn cascades through it too).
CREATE INDEX IF NOT EXISTS fact_evidence_by_evidence ON fact_evidence (tenant_id, evidence_id);
