-- eventmem projection, version 1: the projects, their segment positions, memories, links and events.
-- Every row is derived from a journal; dropping all of it loses nothing (sync projects it again).
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE eventmem_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE eventmem_projects (
    project text PRIMARY KEY,
    root text NOT NULL,
    branch text NOT NULL DEFAULT '',
    projector_version integer NOT NULL
);

-- how far each segment of a project's journal is projected, committed with the rows
CREATE TABLE eventmem_positions (
    project text NOT NULL REFERENCES eventmem_projects (project) ON DELETE CASCADE,
    segment text NOT NULL,
    byte_offset bigint NOT NULL,
    digest bytea NOT NULL,
    PRIMARY KEY (project, segment)
);

-- one visible memory (live, saved); text columns hold NUL as U+FFFD, record holds the exact fold
CREATE TABLE eventmem_memories (
    project text NOT NULL REFERENCES eventmem_projects (project) ON DELETE CASCADE,
    id text NOT NULL,
    branch text NOT NULL,
    kind text NOT NULL,
    scope text NOT NULL,
    title text NOT NULL,
    content text NOT NULL,
    summary text NOT NULL,
    tags text[] NOT NULL,
    importance double precision NOT NULL,
    ttl_seconds numeric,
    origin_project text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    created_by text NOT NULL,
    updated_by text NOT NULL,
    expires_at double precision NOT NULL,
    superseded boolean NOT NULL,
    archived boolean NOT NULL,
    event_count integer NOT NULL,
    record bytea NOT NULL,
    embedding vector,
    PRIMARY KEY (project, id)
);
-- a vector does not compress: kept in the row (long texts go out of line first), not in TOAST,
-- where every distance computed would fetch it again (measured: 3,000 rows, 46 ms a scan)
ALTER TABLE eventmem_memories ALTER COLUMN embedding SET STORAGE MAIN;
CREATE INDEX eventmem_memories_kind ON eventmem_memories (kind);
CREATE INDEX eventmem_memories_scope ON eventmem_memories (scope);
CREATE INDEX eventmem_memories_importance ON eventmem_memories (importance);
CREATE INDEX eventmem_memories_created ON eventmem_memories (created_at);
CREATE INDEX eventmem_memories_updated ON eventmem_memories (updated_at);
CREATE INDEX eventmem_memories_expires ON eventmem_memories (expires_at);
CREATE INDEX eventmem_memories_superseded ON eventmem_memories (superseded);
CREATE INDEX eventmem_memories_tags ON eventmem_memories USING gin (tags);

-- a live link between two memories
CREATE TABLE eventmem_links (
    project text NOT NULL REFERENCES eventmem_projects (project) ON DELETE CASCADE,
    id text NOT NULL,
    source text NOT NULL,
    target text NOT NULL,
    relation text NOT NULL,
    strength double precision NOT NULL,
    context text NOT NULL,
    added_by text NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX eventmem_links_source ON eventmem_links (project, source);
CREATE INDEX eventmem_links_target ON eventmem_links (project, target);

-- every event folded, once per id: the line as the journal holds it (encoded again)
CREATE TABLE eventmem_events (
    project text NOT NULL REFERENCES eventmem_projects (project) ON DELETE CASCADE,
    id text NOT NULL,
    type text NOT NULL,
    ts text NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (project, id)
);
