-- eventmem projection, version 6: the memories of a project in creation order, then id as the
-- in-process store orders them (code points: collation "C"), so that a hybrid recall reads the
-- memories saved just before and after each of its best candidates (their sitting neighbours,
-- eventmem.projectors.postgres.sittings) from the index, a few rows each, whatever the project's size.
CREATE INDEX eventmem_memories_sitting ON eventmem_memories (project, created_at, id COLLATE "C");
