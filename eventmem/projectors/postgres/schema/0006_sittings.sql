-- eventmem projection, version 6: the memories of a project in creation order, so that a hybrid
-- recall reads the memories saved just before and after each of its best candidates (their sitting
-- neighbours, eventmem.projectors.postgres.sittings) from the index, a few rows each. The index on
-- created_at alone reads every project's memories of those minutes (measured: 50,000 memories beside
-- another project's 50,000 saved within a day, three lenders: 561 rows read and dropped a side, 3-17
-- ms; with this one, one row, 0.2 ms). The ids of one time are ordered after the scan (rare ties):
-- an id column here with collation "C" made the planner keep the other index.
CREATE INDEX eventmem_memories_sitting ON eventmem_memories (project, created_at);
