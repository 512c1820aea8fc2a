-- eventmem projection, version 2: full-text search over title, summary, content and tags.
-- Weights follow the in-process index (title and tags above summary above content). A tsvector holds
-- at most 1 MB: the first 100,000 characters of the content are indexed (content may reach 1 MiB).
-- (array_to_string is only STABLE in general; on text[] it is immutable, as a generated column needs)
CREATE FUNCTION eventmem_words_of(tags text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string(tags, ' ') $$;
ALTER TABLE eventmem_memories ADD COLUMN keywords tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', title), 'A')
    || setweight(to_tsvector('english', eventmem_words_of(tags)), 'A')
    || setweight(to_tsvector('english', summary), 'B')
    || setweight(to_tsvector('english', left(content, 100000)), 'C')
) STORED;
CREATE INDEX eventmem_memories_keywords ON eventmem_memories USING gin (keywords);
