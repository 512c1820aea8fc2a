-- eventmem projection, version 8: a narrow copy written again with its vector, tags, type and time of
-- saving as they were (a memory's new importance, scope, time to live or supersession) stays in its
-- page and enters none of its indexes: a heap-only tuple (HOT). Before, each such update inserted the
-- row again into every index of eventmem_searched, the HNSW graph of the built-in embedder's semantic
-- part costing most (measured at 20,000 memories, a loaded 2-core machine: 2,000 new importances in
-- 13.8-15.2 s, none of them HOT; with this, 2.0 s, 1,567 of them HOT). Two things stood in the way:
-- - no room: the rows (about 1 KB, 7 a page) filled their pages, and a heap-only tuple must fit in the
--   page of the row it replaces. The table now keeps 15% of each page free as it is filled (new pages:
--   a table filled before keeps its full pages until a load writes its rows again);
-- - a tags array written again is not the stored one byte for byte (PostgreSQL's HOT check compares
--   the stored bytes of each indexed column; a text[] from eventmem_memories never matched, measured:
--   none of 200 updates setting it from there was HOT, all of 200 setting the importance were), so the
--   trigger keeps the stored array when the arrays are equal.
ALTER TABLE eventmem_searched SET (fillfactor = 85);

CREATE OR REPLACE FUNCTION eventmem_searched_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN  -- (a memory whose key changed: never done by the sync, kept right all the same)
        DELETE FROM eventmem_searched s USING removed r
        WHERE s.project = r.project AND s.id = r.id
          AND NOT EXISTS (SELECT 1 FROM written w WHERE w.project = r.project AND w.id = r.id);
    END IF;
    INSERT INTO eventmem_searched
    SELECT importance, created_at, updated_at, expires_at, superseded, project, id, kind, scope, origin_project,
           tags, embedding::halfvec
    FROM written
    ON CONFLICT (project, id) DO UPDATE SET
        kind = excluded.kind, scope = excluded.scope,
        -- (the stored array kept when equal: see above)
        tags = CASE WHEN eventmem_searched.tags = excluded.tags THEN eventmem_searched.tags ELSE excluded.tags END,
        importance = excluded.importance,
        origin_project = excluded.origin_project, created_at = excluded.created_at,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at, superseded = excluded.superseded,
        embedding = excluded.embedding;
    RETURN NULL;
END
$$;
