"""The PostgreSQL projector: one journal's memories, links, events and segment positions as rows.

Every batch is one transaction: the rows and the position they bring the journal to commit together
or not at all, so a crash anywhere leaves the database at a batch boundary the next sync resumes from.
Rows are keyed by (project, id) and a batch carries whole folded records, so a batch delivered again
changes nothing. Text columns hold a NUL character (which PostgreSQL refuses) as U+FFFD; the exact
folded record is kept beside them, msgpack-encoded.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from eventmem.core.codec import UnknownEvent, encode_event
from eventmem.core.errors import InvalidInput
from eventmem.core.events import AnyEvent
from eventmem.core.ids import iso_to_epoch
from eventmem.core.query_rules import Filters
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.embedders.embedcache import EmbeddingCache, content_hash
from eventmem.embedders.embedder import Embedder
from eventmem.projectors.base import Batch, Projected, ProjectionGone, SegmentPosition
from eventmem.projectors.postgres import keywords, queries
from eventmem.projectors.postgres.bulk import (
    EVENT_TYPES,
    MEMORY_TYPES,
    POSTING_COLUMNS,
    VectorBytes,
    copy_data,
    copy_rows,
    create_indexes,
    drop_indexes,
    pg_name,
    pg_text,
    postings_data,
    real_array,
    register_arrays,
    register_vectors,
    secondary_indexes,
    text_array,
    vector_bytes,
)
from eventmem.projectors.postgres.links import write_links
from eventmem.projectors.postgres.schema import migrate
from eventmem.projectors.postgres.vector_index import VectorIndex
from eventmem.projectors.vectors import embed_text

if TYPE_CHECKING:
    import numpy.typing as npt
    import psycopg

__all__ = ["PostgresProjector", "decode_record", "pg_name", "pg_text", "vector_literal"]

_log = logging.getLogger("eventmem.sync")

_ENCODE = msgspec.msgpack.Encoder()
_RECORD = msgspec.msgpack.Decoder(MemoryRecord)
_LINK = msgspec.msgpack.Decoder(LinkRecord)
EMBED_BATCH = 256
LOAD_CHUNK = 4096
"""Memories a load copies before their keyword postings (a chunk's rows are made while the one before is copied)."""
BULK_INDEX_FROM = 1000
"""A load of at least this many memories (and more than the other projects hold) drops every secondary
index and makes it again after instead of inserting each row into it; a batch changing this many (and
:data:`BULK_APPLY_SHARE` of the rows) removes its postings by one read of the posting table."""
BULK_APPLY_SHARE = 0.2
"""A batch changing at least this share of the rows every project holds (upserts and removals: a merged
branch) finds the postings it removes by reading the posting table once, not through its index, a
posting at a time (measured at 20,000 memories in main's code: 156 s of a 10,000-event merge's 241 s
were those look-ups, random reads of a 362 MB index). Its indexes stay: dropping them for the batch
and making them again wrote the same merge in 70-94 s, but every reader of the database waits while
a table's index is dropped, and a server answering recall must not stop for a minute."""
REMOVED_BY_SCAN_SHARE = 0.02
"""A batch whose memories' postings are replaced or removed, when they are at least this share of the
rows every project holds, finds those postings by reading the posting table once (:data:`_DROP_POSTINGS_READ`),
not a stem at a time through its index (:data:`_DROP_POSTINGS_OF`). Measured at 20,000 memories, 2.6
million postings, a quiet 2-core machine: read once in 0.18-0.21 s whatever the batch; through the
index, in its order, the postings of 900 memories in 0.32-0.38 s, about 0.4 ms a memory (at 100,000
memories, 0.43-0.44 s), so reading the table pays from 2-2.5% of the rows (at first, the index was read
a row's stems at a time, about 1 ms a memory: from about 1%; an incremental sync of 2,000 mixed
events, 1,100 memories reposted: 736-796 -> 883-942 events/s)."""
_MEMORY_COLUMNS = (
    "project, id, branch, kind, scope, title, content, summary, tags, importance, ttl_seconds, origin_project, "
    "created_at, updated_at, created_by, updated_by, expires_at, superseded, archived, event_count, record, embedding, "
    "tokens, stems, freqs"
)
_KEYWORD_TYPES: tuple[str, ...] = ("int4", "text[]", "float4[]")
"""The types of eventmem_memories' keyword columns, after the embedding (see :mod:`.keywords`)."""
_INCOMING = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS eventmem_incoming_memories "
    "(LIKE eventmem_memories INCLUDING DEFAULTS) ON COMMIT DELETE ROWS; "
    "CREATE TEMPORARY TABLE IF NOT EXISTS eventmem_incoming_events "
    "(LIKE eventmem_events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
)
"""A batch's rows are copied here first (binary ``COPY``), then upserted by one statement each
instead of a statement a row. (Measured: it is not where an incremental sync's time goes; the HNSW
inserts are, 500 saves onto 2,500 memories upserted by the one statement in 16.5 s.)"""
_CHANGING = _MEMORY_COLUMNS.split(", ")[2:]
_UPSERT_MEMORY = (
    f"INSERT INTO eventmem_memories ({_MEMORY_COLUMNS}) SELECT {_MEMORY_COLUMNS} FROM eventmem_incoming_memories "
    "ON CONFLICT (project, id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _CHANGING)
    + " WHERE ("
    + ", ".join(f"eventmem_memories.{c}" for c in _CHANGING)
    + ") IS DISTINCT FROM ("
    + ", ".join(f"excluded.{c}" for c in _CHANGING)
    + ")"
)
"""A row written again only if it changed: every new version of a row is inserted into every index,
the HNSW graph's costing most (measured: 2,000 rows inserted into 20,000 in 18.9 s with it, 1.1 s
without), and a batch carries the memories at both ends of a new link unchanged."""
_EVENT_COLUMNS = "project, id, type, ts, line"
_INSERT_EVENT = (
    f"INSERT INTO eventmem_events ({_EVENT_COLUMNS}) SELECT {_EVENT_COLUMNS} FROM eventmem_incoming_events "
    "ON CONFLICT (project, id) DO NOTHING"
)
_POSTINGS_COPIED = "eventmem_postings"
_POSTINGS_OF_ROWS = (
    "INSERT INTO eventmem_postings (project, memory, tokens, stem, freq) "
    "SELECT %s, m.no, m.tokens, s.stem, s.freq FROM ("
    "SELECT eventmem_memory_number(id) AS no, tokens, stems, freqs FROM eventmem_memories "
    "WHERE project = %s AND id = ANY(%s::text[]) OFFSET 0) m "
    "CROSS JOIN LATERAL unnest(m.stems, m.freqs) AS s(stem, freq)"
)
"""The keyword postings of a load's memories and of a large batch's (a merged branch), made by the
server from the rows just written (each memory's stems and frequencies, its number computed once),
not made here and copied: the sync's process then only sends rows. There, making a ``COPY`` stream
of 130 postings a memory cost the sync's process more than the server spends inserting them
(measured at 20,000 memories on a quiet 2-core machine: a first sync's process 5.9 -> 4.1 s of CPU,
the server's postings 0.8 -> 1.5 s, its WAL 397 -> 520 MB, 11.7 -> 9.0 s in all; a merged branch of
10,000 events 4.5 -> 2.4 s and 2.2 -> 3.1 s, 8.8 -> 7.8 s in all). An ordinary batch's postings
are still made here (:func:`.bulk.postings_data`): its sync waits on the server, and ``INSERT ...
SELECT`` writes a row at a time where ``COPY`` writes many (an incremental sync of 2,000 events:
the postings 0.49 -> 0.71 s of the server's 1.9, for 0.3 s of the process's)."""
_POSTINGS_IN_KEY_ORDER = ' ORDER BY s.stem COLLATE "C", m.no'
"""(postings inserted into the key's index, in its order: a large batch's, a load's where the key is kept)"""
_DROP_POSTINGS_OF = (
    "DELETE FROM eventmem_postings e USING (SELECT s.stem, m.no FROM ("
    "SELECT eventmem_memory_number(id) AS no, stems FROM eventmem_memories WHERE project = %s AND id = ANY(%s) "
    'OFFSET 0) m CROSS JOIN LATERAL unnest(m.stems) AS s(stem) ORDER BY s.stem COLLATE "C", m.no) d '
    'WHERE e.project = %s AND e.stem = d.stem COLLATE "C" AND e.memory = d.no'
)
"""Remove these memories' postings, named by the stems their rows hold (before the rows change),
each found through the postings' index (:data:`_BY_INDEX`), in the index's order. The rows are read
once (``OFFSET 0``: each row's stems unpacked once, its number computed once; without it a sort read
every row's stems again and again, 2.9 s instead of 1.1-1.3 for 1,100 memories' 143,000 postings).
Measured on a quiet 2-core machine, 900 memories' 117,000 postings, three rounds each: at 100,000
memories (13 million postings) 424-441 ms instead of 837-901 ms a row's stems at a time; at 20,000,
324-381 ms instead of 702-750 (read in the rows' order but once: 396-456 ms)."""
_DROP_POSTINGS_READ = "DELETE FROM eventmem_postings WHERE project = %s AND memory = ANY(%s::int8[])"
"""Remove these memories' postings by reading the posting table once (with :data:`_SEQUENTIAL`, for a
batch that removes many: :data:`REMOVED_BY_SCAN_SHARE`)."""
_SEQUENTIAL = (
    "SELECT set_config('enable_indexscan', %s, true), set_config('enable_bitmapscan', %s, true), "
    "set_config('enable_indexonlyscan', %s, true)"
)
_BY_INDEX = "SELECT set_config('enable_hashjoin', %s, true), set_config('enable_mergejoin', %s, true)"
"""(The planner, underestimating the postings of the rows named, chose to hash the whole posting table
instead: 2,000 memories' postings in 20,000's removed in 16 s, spilling to disk, and its time grows
with the table, where a look-up per posting grows with the batch.)"""
_ANALYZE = (
    "ANALYZE eventmem_memories (project, id, branch, kind, scope, tags, importance, ttl_seconds, origin_project, "
    "created_at, updated_at, created_by, updated_by, expires_at, superseded, archived, event_count, tokens)"
)
"""The columns searches filter and join on: not the texts, records, vectors and stems (measured at
20,000 memories: 0.7 s instead of 4.6 s, most of it the element statistics of every row's stems)."""
_UPSERT_POSITION = (
    "INSERT INTO eventmem_positions (project, segment, byte_offset, digest) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (project, segment) DO UPDATE SET byte_offset = excluded.byte_offset, digest = excluded.digest"
)


def vector_literal(vector: npt.NDArray[np.float32]) -> str:
    """A vector in pgvector's text form."""
    return "[" + ",".join(map(repr, vector.astype(np.float64).tolist())) + "]"


def decode_record(data: bytes) -> MemoryRecord:
    return _RECORD.decode(data)


LoadProgress = Callable[[int, int, str], None]
"""How far a load is: memories copied, memories in all, and what it does now (``eventmem sync``'s
bar on a terminal)."""


class PostgresProjector:
    """One journal (a project's, or the global one) projected into a PostgreSQL database."""

    name = "postgres"
    version = 1

    def __init__(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        project: str,
        embedder: Embedder,
        *,
        root: str = "",
        branch: str = "",
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.conn = conn
        self.cache = cache
        self.project = project
        self.progress: LoadProgress | None = None
        """Told how far a load is, while one is (see :data:`LoadProgress`)."""
        self._number = 0
        """The project's number (schema 9), read by each write transaction (:meth:`_claim`)."""
        self._held = False
        """Whether the database held the project's rows when this projector last looked (read their
        position, loaded or applied a batch): a batch is applied only onto rows still there."""
        self._beside = ThreadPoolExecutor(1, thread_name_prefix="eventmem-sync-rows")
        """The thread making a batch's keyword rows, memory rows and postings while the server writes
        (:meth:`_write`)."""
        self.embedder = embedder
        self.root = root
        self.branch = branch
        migrate(conn)
        self.vector_index = VectorIndex(conn, embedder)
        """The vector index the embedder's searches read (made, made again as memories grow, old ones dropped)."""
        self._check_embedder()
        self._vector_type = register_vectors(conn)
        register_arrays(conn)  # (its rows' arrays are sent in binary form: tags, stems, frequencies)

    # -- the contract ------------------------------------------------------------------------

    def apply(self, batch: Batch) -> None:
        vectors = vector_bytes(self._embed(batch.upserts))
        try:
            with self.conn.transaction():
                self._claim(held=self._held)
                self._write(batch, vectors)
                if batch.position:
                    self._cursor().executemany(
                        _UPSERT_POSITION,
                        [(self.project, name, p.offset, p.digest) for name, p in sorted(batch.position.items())],
                    )
            self._held = True
        finally:  # (a batch's work left to the thread never runs on into the next one's)
            wait([self._beside.submit(lambda: None)])

    def load(self, batch: Batch) -> None:
        with self.conn.transaction():
            self._claim()
            for table in ("eventmem_memories", "eventmem_links", "eventmem_events", "eventmem_words"):
                self.conn.execute(f"DELETE FROM {table} WHERE project = %s", [self.project])
            self.conn.execute("DELETE FROM eventmem_postings WHERE project = %s", [self._number])
            # building an index once costs less than inserting into it row by row (measured: 3,000
            # rows took 9 s inserted one by one into HNSW), when this load brings most of its rows
            others = self._rows_of_others()
            rebuild = len(batch.upserts) >= BULK_INDEX_FROM and others <= len(batch.upserts)
            indexes = secondary_indexes(self._cursor()) if rebuild else []
            drop_indexes(self._cursor(), indexes)
            if rebuild:  # (the narrow copies' vector index, made again with the rest)
                self.conn.execute(f"DROP INDEX IF EXISTS {self.vector_index.semantic_name()}")
                self.conn.execute(f"DROP INDEX IF EXISTS {self.vector_index.narrow_graph_name()}")
            self._told(0, len(batch.upserts), "copying the memories")
            words, tokens = self._copy_memories(batch.upserts, indexed=not rebuild)
            self._add_words(words, len(batch.upserts), tokens, absolute=True)
            write_links(self._cursor(), self.project, batch.links, held=False)
            self._copy_events(batch.events)
            done = len(batch.upserts)
            self._told(done, done, "building the indexes" if rebuild else "reading the tables' statistics")
            if rebuild:  # (the vector index as the size asks: HNSW_SMALL up to HNSW_SMALL_UP_TO)
                graph, memory_mb = self.vector_index.graph_name(), self.vector_index.build_memory_mb()
                create_indexes(self._cursor(), [i for i in indexes if i[0] != graph], memory_mb)
                self.vector_index.create(others + len(batch.upserts))
            self.conn.execute(_ANALYZE)  # (the planner then knows the HNSW index pays)
            self.conn.execute("ANALYZE eventmem_postings")
            # (the narrow copies the triggers wrote: without statistics, a filtered scan of 20,000 was
            # planned through the index on (project, created_at), 7 ms of reading every key)
            self.conn.execute("ANALYZE eventmem_searched")
            self.conn.execute("DELETE FROM eventmem_positions WHERE project = %s", [self.project])
            self._cursor().executemany(
                _UPSERT_POSITION,
                [(self.project, name, p.offset, p.digest) for name, p in sorted(batch.position.items())],
            )
        self._held = True

    def append_new(
        self, upserts: Sequence[Projected], *, indexed: bool = True, vectors: npt.NDArray[np.float32] | None = None
    ) -> None:
        """Add memories this project does not hold yet, with their keyword postings and statistics,
        in the caller's transaction: a load's rows, a part at a time, for a caller that cannot hold a
        whole journal's (``indexed``: the postings' key is there, see :meth:`load`; ``vectors``: the
        memories' own, made by this projector's embedder, else made here)."""
        row = self.conn.execute("SELECT no FROM eventmem_projects WHERE project = %s", [self.project]).fetchone()
        assert row is not None, "the project's row is made first (apply, load)"
        self._number = int(row[0])
        words, tokens = self._copy_memories(upserts, indexed=indexed, vectors=vectors)
        self._add_words(words, len(upserts), tokens)

    def position(self) -> dict[str, SegmentPosition] | None:
        with self.conn.transaction():
            known = self.conn.execute("SELECT 1 FROM eventmem_projects WHERE project = %s", [self.project]).fetchone()
            self._held = known is not None
            if known is None:
                return None
            rows = self.conn.execute(
                "SELECT segment, byte_offset, digest FROM eventmem_positions WHERE project = %s", [self.project]
            ).fetchall()
        return {str(name): SegmentPosition(int(offset), bytes(digest)) for name, offset, digest in rows}

    def events_held(self) -> int:
        """The project's events the database holds (each id once)."""
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT count(*) FROM eventmem_events WHERE project = %s", [self.project]
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def snapshot(self) -> bytes | None:
        return None  # (the database keeps itself)

    def restore(self, data: bytes | None) -> bool:
        """Whether the database holds this journal's rows to go on from (``data`` is not used)."""
        return self.position() is not None

    def reset(self) -> None:
        with self.conn.transaction():
            self.conn.execute("DELETE FROM eventmem_projects WHERE project = %s", [self.project])

    def close(self) -> None:
        self._beside.shutdown()
        self.conn.close()

    # -- queries, in memory ids -----------------------------------------------------------------

    def matching(self, filters: Filters, now: float | None = None) -> list[str]:
        """Ids of the visible memories passing ``filters``, by id."""
        return [i for _, i in queries.matching(self.conn, (self.project,), filters, now)]

    def keyword_search(self, text: str, k: int, filters: Filters, now: float | None = None) -> list[tuple[str, float]]:
        hits = queries.keyword_hits(self.conn, (self.project,), text, k, filters, now)
        return [(key[1], score) for key, score in hits]

    def vector_search(
        self, vector: npt.NDArray[np.float32], k: int, filters: Filters, now: float | None = None
    ) -> list[tuple[str, float]]:
        hits = queries.vector_hits(self.conn, (self.project,), vector, k, filters, now, model=self.embedder.model_id)
        return [(key[1], score) for key, score in hits]

    def record(self, memory_id: str) -> MemoryRecord | None:
        """The folded record of a visible memory."""
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT record FROM eventmem_memories WHERE project = %s AND id = %s", [self.project, memory_id]
            ).fetchone()
        return decode_record(bytes(row[0])) if row is not None else None

    def links(self) -> dict[str, LinkRecord]:
        """The live links, by id."""
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT id, record FROM eventmem_links WHERE project = %s", [self.project]
            ).fetchall()
        return {str(i): _LINK.decode(bytes(r)) for i, r in rows}

    def event_ids(self) -> set[str]:
        with self.conn.transaction():
            rows = self.conn.execute("SELECT id FROM eventmem_events WHERE project = %s", [self.project]).fetchall()
        return {str(r[0]) for r in rows}

    # -- inside ---------------------------------------------------------------------------------

    def _cursor(self) -> psycopg.Cursor[tuple[Any, ...]]:
        return self.conn.cursor()

    def _check_embedder(self) -> None:
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO eventmem_meta (key, value) VALUES ('embedder', %s) ON CONFLICT (key) DO NOTHING",
                [self.embedder.model_id],
            )
            row = self.conn.execute("SELECT value FROM eventmem_meta WHERE key = 'embedder'").fetchone()
            held = str(row[0]) if row is not None else self.embedder.model_id
            if held != self.embedder.model_id:
                raise InvalidInput(
                    f"the database holds vectors of the embedder {held!r}, not of {self.embedder.model_id!r}, which "
                    "this project embeds with (its setting `embedder`), and a database keeps one embedder's "
                    "vectors: set the project's embedder to the database's, or sync into another database"
                )
            self.vector_index.create()
        self.vector_index.drop_unread()

    def _rows_of_others(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM eventmem_memories WHERE project <> %s", [self.project]).fetchone()
        return int(row[0]) if row is not None else 0

    def _copy_memories(
        self, upserts: Sequence[Projected], *, indexed: bool, vectors: npt.NDArray[np.float32] | None = None
    ) -> tuple[Counter[str], int]:
        """Rows for memories this project does not hold yet, by binary ``COPY``, a chunk of
        :data:`LOAD_CHUNK` at a time: one thread makes a chunk's rows and postings (its vectors, its
        keyword columns) while this one copies the chunk before (``indexed``: the postings' key is
        there, and a chunk's postings are sent in its order). Returns the memories holding each word,
        and the tokens of them all."""
        if self.cache is not None and vectors is None:
            self.cache.refresh()
        chunks = [upserts[start : start + LOAD_CHUNK] for start in range(0, len(upserts), LOAD_CHUNK)]
        words: Counter[str] = Counter()

        def prepared(at: int) -> _Chunk:
            part = chunks[at]
            start = at * LOAD_CHUNK
            made = vector_bytes(
                vectors[start : start + len(part)] if vectors is not None else self._embed(part, refresh=False)
            )
            found = _keyword_rows(part)
            rows = [self._memory_row(item, vector, k) for item, vector, k in zip(part, made, found, strict=True)]
            held: Counter[str] = Counter()
            for k in found:
                held.update(k.words)
            return _Chunk(rows, held, sum(k.tokens for k in found))

        types: list[str | int] = [*MEMORY_TYPES, self._vector_type, *_KEYWORD_TYPES]
        cursor = self._cursor()
        postings = _POSTINGS_OF_ROWS + (_POSTINGS_IN_KEY_ORDER if indexed else "")
        tokens = 0
        # (the server stores a chunk while the next is made: docs/bench/postgres-limits.md, "A load's rows
        # made while the one before is copied")
        with ThreadPoolExecutor(1, thread_name_prefix="eventmem-load") as making:
            coming = making.submit(prepared, 0) if chunks else None
            for at in range(len(chunks)):
                assert coming is not None
                chunk = coming.result()
                coming = making.submit(prepared, at + 1) if at + 1 < len(chunks) else None
                copy_rows(cursor, "eventmem_memories", _MEMORY_COLUMNS, types, chunk.rows)
                cursor.execute(postings, [self._number, self.project, [row[1] for row in chunk.rows]])
                words.update(chunk.words)
                tokens += chunk.tokens
                self._told(min(len(upserts), (at + 1) * LOAD_CHUNK), len(upserts), "copying the memories")
        return words, tokens

    def _told(self, done: int, total: int, stage: str) -> None:
        if self.progress is not None:
            self.progress(done, total, stage)

    def _add_words(self, words: Counter[str], memories: int, tokens: int, *, absolute: bool = False) -> None:
        """Add these counts to the project's keyword statistics (``absolute``: they are all of them)."""
        changed = {w: n for w, n in words.items() if n}
        if changed:
            self.conn.execute(
                "INSERT INTO eventmem_words (project, word, memories) "
                "SELECT %s, w, n FROM unnest(%s::text[], %s::int[]) AS c(w, n) "
                "ON CONFLICT (project, word) DO UPDATE SET memories = eventmem_words.memories + excluded.memories",
                [self.project, list(changed), list(changed.values())],
            )
            gone = [w for w, n in changed.items() if n < 0]
            if gone:
                self.conn.execute(
                    "DELETE FROM eventmem_words WHERE project = %s AND word = ANY(%s) AND memories <= 0",
                    [self.project, gone],
                )
        if absolute:
            self.conn.execute(
                "UPDATE eventmem_projects SET memories = %s, tokens = %s WHERE project = %s",
                [memories, tokens, self.project],
            )
        elif memories or tokens:
            self.conn.execute(
                "UPDATE eventmem_projects SET memories = memories + %s, tokens = tokens + %s WHERE project = %s",
                [memories, tokens, self.project],
            )

    def _copy_events(self, events: Sequence[AnyEvent | UnknownEvent]) -> None:
        """Rows for events this project does not hold yet, by binary ``COPY``, once per id (the first)."""
        rows: dict[object, tuple[object, ...]] = {}
        for row in self._event_rows(events):
            rows.setdefault(row[1], row)
        copy_rows(self._cursor(), "eventmem_events", _EVENT_COLUMNS, EVENT_TYPES, rows.values())

    def _claim(self, *, held: bool = False) -> None:
        """Make or update the project's row, which holds its writers off until the transaction ends,
        and read its number (:attr:`_number`). (Updated first: an insert that meets the row takes a
        number from the sequence all the same.) ``held``: the rows are expected there; if the row is
        gone (dropped by another writer: ``eventmem sync --prune`` elsewhere, a reset),
        :class:`~eventmem.projectors.base.ProjectionGone` is raised and nothing is written."""
        values = [pg_name(self.root), pg_name(self.branch), self.version, self.project]
        row = self.conn.execute(
            "UPDATE eventmem_projects SET root = %s, branch = %s, projector_version = %s "
            "WHERE project = %s RETURNING no",
            values,
        ).fetchone()
        if row is None and held:
            self._held = False
            raise ProjectionGone(f"the database no longer holds the project {self.project!r}")
        if row is None:
            row = self.conn.execute(
                "INSERT INTO eventmem_projects (root, branch, projector_version, project) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (project) DO UPDATE SET root = excluded.root, branch = excluded.branch, "
                "projector_version = excluded.projector_version RETURNING no",
                values,
            ).fetchone()
        assert row is not None
        self._number = int(row[0])

    def _embed(self, upserts: Sequence[Projected], *, refresh: bool = True) -> npt.NDArray[np.float32]:
        """The vectors of these memories' texts: from the project's embedding cache when the
        in-process store made them already (read only), else made here."""
        texts = [embed_text(p.record) for p in upserts]
        if self.cache is not None and texts:
            if refresh:
                self.cache.refresh()
            vectors, missing = self.cache.lookup([content_hash(t) for t in texts])
        else:
            vectors, missing = np.zeros((len(texts), self.embedder.dim), np.float32), list(range(len(texts)))
        for start in range(0, len(missing), EMBED_BATCH):
            chunk = missing[start : start + EMBED_BATCH]
            vectors[chunk] = self.embedder.embed([texts[i] for i in chunk])
        return vectors

    def _write(self, batch: Batch, vectors: list[VectorBytes]) -> None:
        """Write a batch's rows. The postings it removes are found through the postings' index, or by
        reading the posting table once when they are at least :data:`REMOVED_BY_SCAN_SHARE` of the rows
        every project holds; the postings it adds are copied in the key's order, or made by the server
        from the rows when the batch changes at least :data:`BULK_INDEX_FROM` memories and
        :data:`BULK_APPLY_SHARE` of the rows (a merged branch). The upserts' keyword rows, their rows
        to copy, their postings and the statistics are made by the projector's thread, each while the
        server writes what comes before it."""
        cursor = self._cursor()
        changed = [*batch.removals, *(p.record.id for p in batch.upserts)]
        held_rows = queries.memories_held(self.conn) if changed else 0  # (the rows every project holds)
        large = len(changed) >= BULK_INDEX_FROM and len(changed) >= held_rows * BULK_APPLY_SHARE
        held: dict[str, _Held] = {
            str(memory_id): ((title, summary, content, tags), int(size), stems, freqs)
            for memory_id, title, summary, content, tags, size, stems, freqs in (
                cursor.execute(
                    "SELECT id, title, summary, content, tags, tokens, stems, freqs FROM eventmem_memories "
                    "WHERE project = %s AND id = ANY(%s)",
                    [self.project, changed],
                ).fetchall()
                if changed
                else ()
            )
        }
        # the keyword rows are made by the projector's thread while the server removes the postings they
        # replace: those of a memory whose texts changed (the others stay: a new link, a new importance)
        found = self._beside.submit(_keyword_rows, batch.upserts)
        upserted = {p.record.id: p.record for p in batch.upserts}  # (the last of an id)
        kept = {i for i, record in upserted.items() if _same_texts(held.get(i), record)}
        self._drop_postings([*batch.removals, *(i for i in upserted if i not in kept)], held_rows)
        if batch.removals:
            cursor.execute(
                "DELETE FROM eventmem_memories WHERE project = %s AND id = ANY(%s)",
                [self.project, list(batch.removals)],
            )
        if batch.upserts or batch.events:
            cursor.execute(_INCOMING)
        if batch.upserts:
            keyed = found.result()
            rows = self._beside.submit(self._memory_rows, batch.upserts, vectors, keyed)
            last = {p.record.id: (k.tokens, k.stems, k.freqs) for p, k in zip(batch.upserts, keyed, strict=True)}
            # (the same texts always make the same keywords, unless the keywords' code changed since)
            unlike = {i for i in upserted if i in kept and held[i][1:] != last[i]}
            self._drop_postings([i for i in upserted if i in unlike], held_rows)
            reposting = [i for i in last if i not in kept or i in unlike]  # (in the upserts' order)
            postings = (  # (a batch of a few: the server's time is the sync's, see _POSTINGS_OF_ROWS)
                self._beside.submit(postings_data, self._number, [(i, *last[i]) for i in reposting])
                if reposting and not large
                else None
            )
            posted = set(reposting)
            added = {p.record.id: k for p, k in zip(batch.upserts, keyed, strict=True) if p.record.id in posted}
            replaced = [held[i][:2] for i in [*batch.removals, *reposting] if i in held]
            counted = self._beside.submit(keywords.statistics_change, replaced, list(added.values()))
            types: list[str | int] = [*MEMORY_TYPES, self._vector_type, *_KEYWORD_TYPES]
            copy_rows(cursor, "eventmem_incoming_memories", _MEMORY_COLUMNS, types, rows.result().values())
            cursor.execute(_UPSERT_MEMORY)
            if postings is not None:  # (their postings into the key's index, in its order)
                copy_data(cursor, _POSTINGS_COPIED, POSTING_COLUMNS, postings.result())
            elif reposting:  # (made by the server from the rows just written)
                cursor.execute(_POSTINGS_OF_ROWS + _POSTINGS_IN_KEY_ORDER, [self._number, self.project, reposting])
            self._add_words(*counted.result())
        elif batch.removals:
            self._add_words(*keywords.statistics_change([held[i][:2] for i in batch.removals if i in held], []))
        write_links(cursor, self.project, batch.links)
        if batch.events:
            events: dict[object, tuple[object, ...]] = {}
            for event_row in self._event_rows(batch.events):
                events.setdefault(event_row[1], event_row)  # (the first of an id, as a row a statement kept it)
            copy_rows(cursor, "eventmem_incoming_events", _EVENT_COLUMNS, EVENT_TYPES, events.values())
            cursor.execute(_INSERT_EVENT)

    def _memory_rows(
        self, upserts: Sequence[Projected], vectors: list[VectorBytes], found: list[keywords.KeywordRow]
    ) -> dict[str, tuple[object, ...]]:
        """The rows of a batch's memories, one an id (the last: one statement cannot update a row twice)."""
        made = (self._memory_row(p, v, k) for p, v, k in zip(upserts, vectors, found, strict=True))
        return {str(row[1]): row for row in made}

    def _drop_postings(self, memory_ids: Sequence[str], held_rows: int) -> None:
        """Remove these memories' postings (before their rows change: found by the stems they hold)."""
        if not memory_ids:
            return
        cursor = self._cursor()
        if len(memory_ids) < held_rows * REMOVED_BY_SCAN_SHARE:
            cursor.execute(_BY_INDEX, ["off", "off"])
            cursor.execute(_DROP_POSTINGS_OF, [self.project, list(memory_ids), self._number])
            cursor.execute(_BY_INDEX, ["on", "on"])
        else:
            cursor.execute(_SEQUENTIAL, ["off", "off", "off"])
            cursor.execute(_DROP_POSTINGS_READ, [self._number, [keywords.memory_number(i) for i in memory_ids]])
            cursor.execute(_SEQUENTIAL, ["on", "on", "on"])

    def _memory_row(self, item: Projected, vector: VectorBytes, found: keywords.KeywordRow) -> tuple[object, ...]:
        r = item.record
        return (
            self.project,
            r.id,
            pg_name(self.branch),
            r.kind,
            r.scope,
            pg_text(r.title),
            pg_text(r.content),
            pg_text(r.summary),
            text_array([pg_text(t) for t in r.tags]),
            r.importance,
            r.ttl_seconds,
            pg_text(r.project),
            _epoch(r.created_at),
            _epoch(r.updated_at),
            pg_text(r.created_by),
            pg_text(r.updated_by),
            item.expires_at,
            item.superseded,
            r.archived,
            r.events,
            _ENCODE.encode(r),
            vector,
            found.tokens,
            text_array(found.stems),
            real_array(found.freqs),
        )

    def _event_rows(self, events: Iterable[AnyEvent | UnknownEvent]) -> Iterable[tuple[object, ...]]:
        for event in events:
            if isinstance(event, UnknownEvent):
                yield (self.project, event.id, pg_text(event.type), event.ts, event.raw)
            else:
                yield (self.project, event.id, event.__struct_config__.tag, event.ts, encode_event(event))


_Held = tuple[tuple[str, str, str, list[str]], int, list[str], list[float]]
"""A memory's row as a batch finds it: its texts (title, summary, content, tags), then its keyword
columns (tokens, stems, frequencies)."""


@dataclass(frozen=True, slots=True)
class _Chunk:
    """A load's chunk, ready to copy: its memories' rows, the memories holding each word and the
    tokens of them all."""

    rows: list[tuple[object, ...]]
    words: Counter[str]
    tokens: int


def _same_texts(held: _Held | None, record: MemoryRecord) -> bool:
    """Whether a memory's row holds the texts the record has, as text columns hold them (its keywords
    then are as they were, which the batch checks once they are made)."""
    if held is None:
        return False
    now = (pg_text(record.title), pg_text(record.summary), pg_text(record.content), [pg_text(t) for t in record.tags])
    return held[0] == now


def _keyword_rows(upserts: Sequence[Projected]) -> list[keywords.KeywordRow]:
    return keywords.keyword_rows([(p.record.title, p.record.summary, p.record.content, p.record.tags) for p in upserts])


def _epoch(iso: str) -> float:
    try:
        return iso_to_epoch(iso) if iso else 0.0
    except (ValueError, OverflowError):
        return math.nan
