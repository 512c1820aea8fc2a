-- eventmem projection, version 11: a stem's postings in the order of what each adds to a score.
-- A keyword search whose rarest word is common (past the postings budget, it is asked alone) ranked
-- every memory holding it: 13,000 at 100,000 memories, and ten times as many at a million. For one
-- word, BM25 grows with a posting's frequency and falls with its memory's size, so the best holders
-- are among the first of each frequency taken by size: the key is now (project, stem, impact, memory),
-- ``impact`` the frequency (a whole number: the column weights are) negated in its high 32 bits and
-- the memory's size in tokens in its low 32, and a search reads a few of each frequency
-- (eventmem.projectors.postgres.keywords). The frequency and the size were kept beside the key
-- (INCLUDE); the impact holds both, so the key is as wide as before, and a posting is as cheap to add.
-- A posting is removed through its key with the impact its memory's row gives (the row it was made from).
CREATE FUNCTION eventmem_posting_impact(freq real, tokens integer) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ((-(freq::bigint)) << 32) | tokens::bigint
$$;

CREATE TABLE eventmem_impact_postings (
    project integer NOT NULL,
    stem text COLLATE "C" NOT NULL,
    memory bigint NOT NULL,
    impact bigint NOT NULL
);
INSERT INTO eventmem_impact_postings (project, stem, memory, impact)
    SELECT project, stem, memory, eventmem_posting_impact(freq, tokens) FROM eventmem_postings;
DROP TABLE eventmem_postings;
ALTER TABLE eventmem_impact_postings RENAME TO eventmem_postings;
CREATE UNIQUE INDEX eventmem_postings_key ON eventmem_postings (project, stem, impact, memory);
ANALYZE eventmem_postings;
