-- eventmem projection, version 7: a narrow copy of each memory for the searches that read every
-- memory a filter passes (the exact vector scan, the sitting neighbours, the keyword hits' cosines):
-- its key, the columns a filter reads and the fusion ranks with, and its vector; not its text, stems
-- or record. A memory's row in eventmem_memories averages about 4 KB at 20,000 memories (2.1 a page:
-- the stems 1 KB, the record 0.9 KB, the vector 1.5 KB), so an exact scan read one page every two
-- memories; here a row is about 0.9 KB (8 a page) and a selective filter finds its rows through this
-- table's own indexes. The vector is kept in half precision (halfvec: 768 bytes at 384 dimensions), as
-- the in-process index keeps it (float16 codes): a scan reads half the pages, and at 20,000 memories
-- the table stays under a quarter of a default server's shared buffers (128 MB), above which a
-- sequential scan goes through a small ring of buffers and reads every page from the system again
-- (measured: a 41 MB float32 copy, 4,243 pages read a scan). Kept by triggers on eventmem_memories,
-- whatever writes it (a statement a row, an upsert, COPY, a cascade from eventmem_projects): the sync
-- writes eventmem_memories alone, as before, and a dropped database rebuilds it with the rest.
CREATE TABLE eventmem_searched (
    -- (the fixed-width columns first: a scan finds them at fixed offsets in every row)
    importance double precision NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    superseded boolean NOT NULL,
    project text NOT NULL,
    id text NOT NULL,
    kind text NOT NULL,
    scope text NOT NULL,
    origin_project text NOT NULL,
    tags text[] NOT NULL,
    embedding halfvec,
    PRIMARY KEY (project, id)
);
-- (in the row, as in eventmem_memories: a vector does not compress)
ALTER TABLE eventmem_searched ALTER COLUMN embedding SET STORAGE MAIN;
CREATE INDEX eventmem_searched_kind ON eventmem_searched (kind);
CREATE INDEX eventmem_searched_tags ON eventmem_searched USING gin (tags);
CREATE INDEX eventmem_searched_sitting ON eventmem_searched (project, created_at);

INSERT INTO eventmem_searched
SELECT importance, created_at, updated_at, expires_at, superseded, project, id, kind, scope, origin_project, tags,
       embedding::halfvec
FROM eventmem_memories;

-- (one function for both: an insert's trigger has no table of removed rows, and never reads it)
CREATE FUNCTION eventmem_searched_written() RETURNS trigger LANGUAGE plpgsql AS $$
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
        kind = excluded.kind, scope = excluded.scope, tags = excluded.tags, importance = excluded.importance,
        origin_project = excluded.origin_project, created_at = excluded.created_at,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at, superseded = excluded.superseded,
        embedding = excluded.embedding;
    RETURN NULL;
END
$$;

CREATE FUNCTION eventmem_searched_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM eventmem_searched s USING removed r WHERE s.project = r.project AND s.id = r.id;
    RETURN NULL;
END
$$;

CREATE FUNCTION eventmem_searched_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE eventmem_searched;
    RETURN NULL;
END
$$;

CREATE TRIGGER eventmem_searched_inserted AFTER INSERT ON eventmem_memories
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION eventmem_searched_written();
CREATE TRIGGER eventmem_searched_updated AFTER UPDATE ON eventmem_memories
    REFERENCING OLD TABLE AS removed NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION eventmem_searched_written();
CREATE TRIGGER eventmem_searched_deleted AFTER DELETE ON eventmem_memories
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION eventmem_searched_deleted();
CREATE TRIGGER eventmem_searched_truncated AFTER TRUNCATE ON eventmem_memories
    FOR EACH STATEMENT EXECUTE FUNCTION eventmem_searched_truncated();

ANALYZE eventmem_searched;
