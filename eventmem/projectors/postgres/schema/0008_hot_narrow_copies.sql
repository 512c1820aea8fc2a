-- eventmem projection, version 8: a narrow copy written again with its vector, tags, type and time of
-- saving as they were (a memory's new importance, scope, time to live or supersession) stays in its
-- page and enters none of its indexes: a heap-only tuple (HOT). Before, such an update could insert
-- the row again into every index of eventmem_searched, the HNSW graph of the built-in embedder's
-- semantic part costing most (about 1-2 ms a row). Measured at 20,000 memories on a loaded 2-core
-- machine: 2,000 new importances set in eventmem_memories by one UPDATE took 13.8-15.2 s, none of them
-- HOT, and 2.0 s with this (1,567 HOT); a sync of 2,000 new importances and times to live after a
-- merged branch rewrote 1,663 of 1,919 narrow copies in their page instead of 1,047 (the server's CPU
-- 3.99 s instead of 5.08). Two things stood in the way:
-- - no room: the rows (about 1 KB, 7 a page) filled their pages, and a heap-only tuple must fit in the
--   page of the row it replaces. The table now keeps 15% of each page free as it is filled (new pages:
--   a table filled before keeps its full pages until a load writes its rows again);
-- - an equal tags array is not always stored the same, byte for byte, and PostgreSQL's HOT check
--   compares the stored bytes of each indexed column: an UPDATE of eventmem_memories by another writer
--   (the triggers keep the narrow copies whatever writes the memories) brings the array as that table
--   stores it, which did not match the narrow copy's (none of 200 such updates was HOT; the same
--   array parsed again, all were; the sync's own upserts matched). The trigger keeps the stored
--   array when the arrays are equal.
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
