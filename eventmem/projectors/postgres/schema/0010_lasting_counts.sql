-- eventmem projection, version 10: each project's lasting memories (not superseded, no time to live:
-- visible to every search at any time) counted by type and scope, and by tag. A vector search with a
-- filter counts the memories the filter passes, up to 10,001, to choose between an exact scan and the
-- index (eventmem.projectors.postgres.queries.counted_vector_query); a filter passing many took a
-- scan of the narrow copies until 10,001 of them passed: measured at 100,000 memories, 21-27 ms for a
-- type held by 23% of them (the recall's statement took 62 ms), 3.7 ms for the scope `project`. The
-- lasting memories a filter of types and a scope, or of one tag, passes are a lower bound of those it
-- passes at any time: at least 10,001 of them, and that count is known without reading a row.
-- Kept by triggers on eventmem_memories, whatever writes it, beside the narrow copies' own (the same
-- statements' tables of written and removed rows); no index of eventmem_searched changes, so a narrow
-- copy written again with its type, tags and vector kept still stays in its page (version 8).
CREATE TABLE eventmem_lasting_kinds (
    project text NOT NULL,
    kind text NOT NULL,
    scope text NOT NULL,
    memories bigint NOT NULL,
    PRIMARY KEY (project, kind, scope)
);
CREATE TABLE eventmem_lasting_tags (
    project text NOT NULL,
    tag text NOT NULL,
    memories bigint NOT NULL,
    PRIMARY KEY (project, tag)
);

INSERT INTO eventmem_lasting_kinds (project, kind, scope, memories)
SELECT project, kind, scope, count(*) FROM eventmem_memories
WHERE NOT superseded AND expires_at = 'Infinity'
GROUP BY project, kind, scope;
INSERT INTO eventmem_lasting_tags (project, tag, memories)
SELECT m.project, t.tag, count(*) FROM eventmem_memories m
CROSS JOIN LATERAL (SELECT DISTINCT u AS tag FROM unnest(m.tags) AS u) t
WHERE NOT m.superseded AND m.expires_at = 'Infinity'
GROUP BY m.project, t.tag;

-- (each statement's changes added up before they are written: one row a project and type and
-- scope, or tag, whatever the number of memories; a row counting none is kept, for the next memory)
CREATE FUNCTION eventmem_lasting_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO eventmem_lasting_kinds AS l (project, kind, scope, memories)
    SELECT project, kind, scope, sum(d) FROM (
        SELECT project, kind, scope, 1 AS d FROM written WHERE NOT superseded AND expires_at = 'Infinity'
    ) c GROUP BY project, kind, scope HAVING sum(d) <> 0
    ON CONFLICT (project, kind, scope) DO UPDATE SET memories = l.memories + excluded.memories;
    INSERT INTO eventmem_lasting_tags AS l (project, tag, memories)
    SELECT project, tag, sum(d) FROM (
        SELECT m.project, t.tag, 1 AS d FROM written m
        CROSS JOIN LATERAL (SELECT DISTINCT u AS tag FROM unnest(m.tags) AS u) t
        WHERE NOT m.superseded AND m.expires_at = 'Infinity'
    ) c GROUP BY project, tag HAVING sum(d) <> 0
    ON CONFLICT (project, tag) DO UPDATE SET memories = l.memories + excluded.memories;
    RETURN NULL;
END
$$;

CREATE FUNCTION eventmem_lasting_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO eventmem_lasting_kinds AS l (project, kind, scope, memories)
    SELECT project, kind, scope, sum(d) FROM (
        SELECT project, kind, scope, 1 AS d FROM written WHERE NOT superseded AND expires_at = 'Infinity'
        UNION ALL
        SELECT project, kind, scope, -1 AS d FROM removed WHERE NOT superseded AND expires_at = 'Infinity'
    ) c GROUP BY project, kind, scope HAVING sum(d) <> 0
    ON CONFLICT (project, kind, scope) DO UPDATE SET memories = l.memories + excluded.memories;
    INSERT INTO eventmem_lasting_tags AS l (project, tag, memories)
    SELECT project, tag, sum(d) FROM (
        SELECT m.project, t.tag, 1 AS d FROM written m
        CROSS JOIN LATERAL (SELECT DISTINCT u AS tag FROM unnest(m.tags) AS u) t
        WHERE NOT m.superseded AND m.expires_at = 'Infinity'
        UNION ALL
        SELECT m.project, t.tag, -1 AS d FROM removed m
        CROSS JOIN LATERAL (SELECT DISTINCT u AS tag FROM unnest(m.tags) AS u) t
        WHERE NOT m.superseded AND m.expires_at = 'Infinity'
    ) c GROUP BY project, tag HAVING sum(d) <> 0
    ON CONFLICT (project, tag) DO UPDATE SET memories = l.memories + excluded.memories;
    RETURN NULL;
END
$$;

CREATE FUNCTION eventmem_lasting_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO eventmem_lasting_kinds AS l (project, kind, scope, memories)
    SELECT project, kind, scope, sum(d) FROM (
        SELECT project, kind, scope, -1 AS d FROM removed WHERE NOT superseded AND expires_at = 'Infinity'
    ) c GROUP BY project, kind, scope HAVING sum(d) <> 0
    ON CONFLICT (project, kind, scope) DO UPDATE SET memories = l.memories + excluded.memories;
    INSERT INTO eventmem_lasting_tags AS l (project, tag, memories)
    SELECT project, tag, sum(d) FROM (
        SELECT m.project, t.tag, -1 AS d FROM removed m
        CROSS JOIN LATERAL (SELECT DISTINCT u AS tag FROM unnest(m.tags) AS u) t
        WHERE NOT m.superseded AND m.expires_at = 'Infinity'
    ) c GROUP BY project, tag HAVING sum(d) <> 0
    ON CONFLICT (project, tag) DO UPDATE SET memories = l.memories + excluded.memories;
    RETURN NULL;
END
$$;

CREATE FUNCTION eventmem_lasting_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE eventmem_lasting_kinds, eventmem_lasting_tags;
    RETURN NULL;
END
$$;

CREATE TRIGGER eventmem_lasting_inserted AFTER INSERT ON eventmem_memories
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION eventmem_lasting_inserted();
CREATE TRIGGER eventmem_lasting_updated AFTER UPDATE ON eventmem_memories
    REFERENCING OLD TABLE AS removed NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION eventmem_lasting_updated();
CREATE TRIGGER eventmem_lasting_deleted AFTER DELETE ON eventmem_memories
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION eventmem_lasting_deleted();
CREATE TRIGGER eventmem_lasting_truncated AFTER TRUNCATE ON eventmem_memories
    FOR EACH STATEMENT EXECUTE FUNCTION eventmem_lasting_truncated();
