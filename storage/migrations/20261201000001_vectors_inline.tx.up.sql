-- Vectors stored in the row (issue 16). pgvector's vector type defaults to
-- EXTERNAL storage, so every 512-dimension vector (2,056 bytes, just over the
-- TOAST threshold) lived in the TOAST table: each exact distance recall computed
-- (the facts of a user, its department and agent, the user's turns) and each
-- distance it projects read the vector's chunks through the TOAST index, about
-- 10 µs a row. MAIN keeps a vector inline unless the row would not fit in a page
-- (content and search, EXTENDED, are moved out first). Only rows written from now
-- on are stored so; VACUUM FULL facts, evidence (or pg_repack) rewrites the
-- older ones.
ALTER TABLE facts ALTER COLUMN embedding SET STORAGE MAIN;

--bun:split

ALTER TABLE evidence ALTER COLUMN embedding SET STORAGE MAIN;
