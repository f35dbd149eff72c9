-- Rows of up to a page stored in the page (issue 16). A 512-dimension vector is
-- 2,056 bytes, just over the TOAST threshold (about 2 kB), so with the default
-- toast_tuple_target every vector lived in the TOAST table (pgvector's type is
-- EXTERNAL): each exact distance recall computes (the facts of a user, its
-- department and agent, the user's turns) and each distance it projects read the
-- vector's chunks through the TOAST index, about 10 µs a row. Storing the vector
-- MAIN instead is worse: to get under the threshold Postgres then moves every
-- other long column out (content, search), and the keyword retriever reads the
-- TOAST table for each row it filters. A target of a whole page keeps rows inline
-- (vectors uncompressed, EXTERNAL) unless a row is longer than a page. Only rows
-- written from now on are stored so; VACUUM FULL facts, evidence (or pg_repack)
-- rewrites the older ones.
ALTER TABLE facts SET (toast_tuple_target = 8160);

--bun:split

ALTER TABLE evidence SET (toast_tuple_target = 8160);
