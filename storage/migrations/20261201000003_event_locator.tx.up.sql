-- The event's locator (the client's message or turn id), so the maintenance sweep
-- can start an acknowledged write whose workflow never started from the stored
-- event alone, with the locator its evidence would have had. Not part of the
-- content hash: events stored before this migration keep their fingerprints.
ALTER TABLE events ADD COLUMN IF NOT EXISTS locator text NOT NULL DEFAULT '';
