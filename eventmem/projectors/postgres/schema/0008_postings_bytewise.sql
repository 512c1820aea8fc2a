-- eventmem projection, version 8: the keyword postings' stems compared byte by byte (COLLATE "C"),
-- and their key led by the stem. A stem is only ever matched for equality, which is the same in
-- every collation; ordering stems by the database's locale only made each comparison of an index
-- build or insert dearer, and a key led by the project (the same in every row of a project) kept
-- PostgreSQL from sorting by short abbreviated keys. Measured at 20,000 memories (2.6 million
-- postings, one database, 2 cores): the key built in 3.1-5.8 s instead of 5.3-6.2 s. A search's
-- lookups are unchanged: it names the project and each stem, so it reads one range of the key either
-- way. The project and the memory id keep the database's collation: a posting's id is joined to the
-- memories' and the narrow copies' keys, whose indexes serve only a comparison in their own
-- collation (with the id bytewise too, each keyword hit's row was found by reading the whole table:
-- a hybrid search at 1,000,000 memories took 14 s). Whatever a stem is compared with (a query's
-- stems, a row's array of stems) has the default collation, which gives way to "C".
DROP INDEX eventmem_postings_key;
ALTER TABLE eventmem_postings ALTER COLUMN stem TYPE text COLLATE "C";
CREATE UNIQUE INDEX eventmem_postings_key ON eventmem_postings (stem, project, id) INCLUDE (freq, tokens);
ANALYZE eventmem_postings;
