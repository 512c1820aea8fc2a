"""The vector indexes a PostgreSQL database's searches read, for the embedder its vectors are of.

A learned model's vectors are found through an HNSW graph of the whole vectors, sized by the memories
it is built over. The built-in embedder's, whose vectors are close to random for a graph, through an
inverted file (pgvector's ``ivfflat``) of the narrow copies' semantic part, made again concurrently
when the memories outgrow its lists, with no index of the whole vectors (none reads it, every write
would pay for it). One owner for their names, their making, their remaking and the dropping of the
ones an earlier version made.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eventmem.embedders.embedder import Embedder, semantic_dims
from eventmem.projectors.postgres import queries
from eventmem.projectors.postgres.queries import SEARCHED, narrow_graph_order, semantic_order

if TYPE_CHECKING:
    import psycopg

__all__ = ["VectorIndex", "ivf_lists"]

_log = logging.getLogger("eventmem.sync")

HNSW_M = 32
HNSW_EF_CONSTRUCTION = 128
"""The HNSW graph's links per node and candidates kept while building it (pgvector's defaults: 16, 64).
Measured at 100,000 memories of hashing vectors (the worst case of a graph index), a loaded 2-core
machine: recall@10 against exact 0.82 at ``hnsw.ef_search`` 400 and 0.90 at 800 with the defaults,
0.94 and 0.98 with these; the index built in 215 s instead of 55 s. An index made before keeps its
graph until a load rebuilds it (``eventmem sync`` of a whole journal)."""
HNSW_SMALL = (16, 128)
"""(``m``, ``ef_construction``) of an index built over at most :data:`HNSW_SMALL_UP_TO` memories.
Measured at 20,000 memories (hashing vectors, 40 queries, one database, a loaded 2-core machine):
built in 33 s instead of 60, and searched at ``ef_search`` 800 (a hybrid search's depth of 50) with
recall against exact 0.98 of the top 10 and of the top 50 in 19 ms (0.945 and 0.936 at 400), where
:data:`HNSW_M` and :data:`HNSW_EF_CONSTRUCTION` gave 0.985 and 0.99 in 61 ms (0.978 and 0.975 at
400); ``m`` 16 with ``ef_construction`` 64 built in the same time and found 0.97 and 0.967 at 800."""
HNSW_SMALL_UP_TO = 50_000
IVF_LISTS_FROM = 5_000
"""The built-in embedder's vectors are found by an inverted file of their semantic part
(:data:`eventmem.projectors.postgres.queries.IVF_PROBES_PER_ROOT`): of one list below this many memories
(a search compares the query with every memory's part, about a millisecond at 5,000), of the square
root of their number from it (:func:`ivf_lists`). A list's centre is drawn from the memories there
when the index is made: made over too few, the lists would be drawn at random."""
_INDEX_LOCK_CLASS = 0x65766D69
"""The class of the advisory lock one process holds while it makes the inverted file again."""
DROP_LOCK_WAIT = "2s"
"""How long a sync waits for the readers of a table to drop an index no search reads."""
INDEX_MEMORY_MB = (64, 1024)
"""Bounds of the memory a rebuild of the HNSW index is given (``maintenance_work_mem``, for its
transaction): enough for its graph, so that it is not built on disk (measured: 60,000 random 384-d
vectors built in 187 s with PostgreSQL's default 64 MB, in 65 s with 512 MB)."""


class VectorIndex:
    """The vector index of one database for one embedder (a projector's, on its connection)."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]], embedder: Embedder) -> None:
        self.conn = conn
        self.embedder = embedder

    def graph_name(self) -> str:
        """The HNSW graph of the memories' whole vectors (an embedder of neither kind below; a learned
        model's, as an earlier version made it)."""
        return f"eventmem_memories_hnsw_{int(self.embedder.dim)}"

    def narrow_graph_name(self) -> str:
        """A learned model's HNSW graph, of the narrow copies' half-precision vectors."""
        return f"eventmem_searched_hnsw_{int(self.embedder.dim)}"

    def _learned(self) -> bool:
        return queries.learned(self.embedder.model_id)

    def _graph_definition(self, name: str, rows: int, made: str = "INDEX") -> str:
        """The statement making a learned model's graph over ``rows`` memories (``made``: how)."""
        m, ef_construction = graph_settings(rows)
        return (
            f"CREATE {made} {name} ON {SEARCHED} USING hnsw ({narrow_graph_order(int(self.embedder.dim), '')} "
            f"halfvec_ip_ops) WITH (m = {m}, ef_construction = {ef_construction})"
        )

    def _exists(self, name: str) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()
        return bool(row is not None and row[0])

    def semantic_name(self) -> str:
        return f"eventmem_searched_semantic_ivf_{int(self.embedder.dim)}"

    def _old_semantic_graph(self) -> str:
        """The HNSW index of the semantic part an earlier version made (dropped: no search reads it)."""
        return f"eventmem_searched_semantic_{int(self.embedder.dim)}"

    def _semantic_definition(self, name: str, lists: int, made: str = "INDEX") -> str:
        """The statement making the inverted file of the semantic part (``made``: how the index is made,
        e.g. ``INDEX IF NOT EXISTS``)."""
        dim = int(self.embedder.dim)
        part = semantic_dims(self.embedder.model_id)
        return (
            f"CREATE {made} {name} ON {SEARCHED} USING ivfflat ({semantic_order(dim, part, '')} halfvec_ip_ops) "
            f"WITH (lists = {int(lists)})"
        )

    def _semantic_lists(self) -> int | None:
        """The lists the inverted file of the semantic part was made with (``None``: there is none)."""
        row = self.conn.execute(
            f"SELECT (SELECT max({queries.LISTS_OPTION}) FROM unnest(c.reloptions) AS o) "
            "FROM pg_class c WHERE c.oid = to_regclass(%s)",
            [self.semantic_name()],
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def refresh(self) -> bool:
        """Make the built-in embedder's inverted file again when the memories would now have at least
        twice its lists (:func:`ivf_lists`: an index made over few memories has one list, which a
        search reads whole; its lists are chosen when it is made, and a search reads a share of them,
        so an index made over fewer memories reads a larger share of each list's). Made beside the old
        one and put in its place without holding off readers or writers (``CONCURRENTLY``), by one
        process at a time, when a sync has started (``eventmem sync``, ``serve --store``: the runner's
        start, once the journals are taken); returns whether it was made again. A learned model's
        vectors: the graph of the narrow copies made where an earlier version's database lacks it
        (:meth:`_make_narrow_graph`)."""
        if self._learned():
            return self._make_narrow_graph()
        if not semantic_dims(self.embedder.model_id):
            return False
        name, making = self.semantic_name(), f"{self.semantic_name()}_making"
        with self.conn.transaction():
            rows, lists = queries.memories_held(self.conn), self._semantic_lists()
            left = self._exists(making)
        wanted = lists is not None and ivf_lists(rows) >= 2 * lists
        if not wanted and not left:
            return False
        from psycopg import errors  # (the extra's: a projector runs only where it is installed)

        with self._made_alone(name) as alone:
            if not alone:
                return False  # (another process is making it)
            try:
                if not wanted:
                    return False
                _log.info("the inverted file of %d memories made again: %d lists, was %s", rows, ivf_lists(rows), lists)
                self.conn.execute(self._semantic_definition(making, ivf_lists(rows), "INDEX CONCURRENTLY"))
                self.conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                self.conn.execute(f"ALTER INDEX {making} RENAME TO {name}")
            except (errors.InsufficientPrivilege, errors.LockNotAvailable, errors.QueryCanceled) as exc:
                # (another role's index, or a wait cut short: searched as it is, made again by a later sync)
                _log.warning("the inverted file %s was not made again (%s): it stays", name, type(exc).__name__)
                return False
        return True

    @contextmanager
    def _made_alone(self, name: str) -> Iterator[bool]:
        """The connection in autocommit (an index made ``CONCURRENTLY`` is made outside a transaction)
        and the advisory lock of making ``name`` taken: whether this process holds it (else another one
        is making it), until the block ends; the half-made index a try that died left
        (its name and ``_making``) dropped first."""
        from psycopg import errors  # (the extra's: a projector runs only where it is installed)

        autocommit = self.conn.autocommit
        self.conn.autocommit = True
        try:
            held = self.conn.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", [_INDEX_LOCK_CLASS, name]
            ).fetchone()
            if held is None or not held[0]:
                yield False
                return
            try:
                try:
                    self.conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}_making")
                except (errors.InsufficientPrivilege, errors.LockNotAvailable, errors.QueryCanceled) as exc:
                    _log.warning("%s_making, half made, was not dropped (%s): %s stays", name, type(exc).__name__, name)
                    yield False
                    return
                yield True
            finally:
                self.conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [_INDEX_LOCK_CLASS, name])
        finally:
            self.conn.autocommit = autocommit

    def create(self, rows: int | None = None) -> None:
        """The index the embedder's searches read, unless there, made for ``rows`` memories (``None``:
        as many as the projects hold). A learned model's: an HNSW graph of the narrow copies'
        half-precision vectors (:data:`HNSW_SMALL` up to :data:`HNSW_SMALL_UP_TO`), except in a database
        whose graph of the memories' whole vectors an earlier version made (the new graph is made
        there by the next sync's start, :meth:`refresh`, without holding off readers or writers). The
        built-in embedder's: an inverted file of the narrow copies' semantic part (:func:`ivf_lists`),
        which its searches read (:data:`eventmem.projectors.postgres.queries.IVF_PROBES_PER_ROOT`).
        Neither has an index of the memories' whole vectors, which none reads and every write would pay
        for (:meth:`drop_unread`); an embedder of neither kind (an older hashing version without a
        semantic part) gets that one."""
        if rows is None:
            rows = queries.memories_held(self.conn)
        m, ef_construction = graph_settings(rows)
        dim = int(self.embedder.dim)
        if semantic_dims(self.embedder.model_id):
            self.conn.execute(self._semantic_definition(self.semantic_name(), ivf_lists(rows), "INDEX IF NOT EXISTS"))
        elif self._learned():
            if not self._exists(self.graph_name()):
                self.conn.execute(self._graph_definition(self.narrow_graph_name(), rows, "INDEX IF NOT EXISTS"))
        else:
            self.conn.execute(
                f"CREATE INDEX IF NOT EXISTS {self.graph_name()} ON eventmem_memories "
                f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                f"WITH (m = {m}, ef_construction = {ef_construction})"
            )

    def _make_narrow_graph(self) -> bool:
        """Make a learned model's graph of the narrow copies where an earlier version's database has only
        the graph of the memories' whole vectors: beside it (``CONCURRENTLY``: no reader or writer
        held off; searches meanwhile scan the narrow copies exactly), by one process at a time, then
        drop the old one; returns whether it was made."""
        name, making = self.narrow_graph_name(), f"{self.narrow_graph_name()}_making"
        with self.conn.transaction():
            wanted = not self._exists(name)
            rows = queries.memories_held(self.conn)
        if not wanted:
            return False
        from psycopg import errors  # (the extra's: a projector runs only where it is installed)

        with self._made_alone(name) as alone:
            if not alone:
                return False  # (another process is making it)
            try:
                _log.warning(
                    "making the graph of the narrow copies' vectors for %d memories, once (this database's "
                    "graph was an earlier version's): searches scan them meanwhile",
                    rows,
                )
                self.conn.execute(f"SET maintenance_work_mem = '{self.build_memory_mb()}MB'")
                try:
                    self.conn.execute(self._graph_definition(making, rows, "INDEX CONCURRENTLY"))
                finally:
                    self.conn.execute("RESET maintenance_work_mem")
                self.conn.execute(f"ALTER INDEX {making} RENAME TO {name}")
            except (errors.InsufficientPrivilege, errors.LockNotAvailable, errors.QueryCanceled) as exc:
                _log.warning("the graph %s was not made (%s): a later sync makes it", name, type(exc).__name__)
                return False
        self.drop_unread()
        return True

    def drop_unread(self) -> None:
        """A database made by an earlier version may hold an index no search reads now: of the built-in
        embedder's vectors, an HNSW index of the whole vectors or one of the semantic part, beside the
        part's inverted file; of a learned model's, the graph of the memories' whole vectors, once the
        graph of the narrow copies is there. A sync paid for them on every row, a graph's insert about
        1.6 ms (measured: ``docs/bench/postgres-limits.md``). Dropped, when no reader holds the table
        for longer than :data:`DROP_LOCK_WAIT` (dropping an index waits for the table's readers, and
        they for it); else left to the next sync, or for good if another role owns it."""
        if semantic_dims(self.embedder.model_id):
            unread, instead = [self.graph_name(), self._old_semantic_graph()], self.semantic_name()
        elif self._learned():
            unread, instead = [self.graph_name()], self.narrow_graph_name()
        else:
            return
        from psycopg import errors  # (the extra's: a projector runs only where it is installed)

        for index in unread:
            try:
                with self.conn.transaction():
                    held = self.conn.execute(
                        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL", [index, instead]
                    ).fetchone()
                    if held is not None and held[0]:
                        self.conn.execute(f"SET LOCAL lock_timeout = '{DROP_LOCK_WAIT}'")
                        self.conn.execute(f"DROP INDEX IF EXISTS {index}")
            except errors.LockNotAvailable:
                _log.info("the unread index %s is left to the next sync: its table is being read", index)
            except errors.InsufficientPrivilege:  # (another role made it: the sync goes on without dropping it)
                _log.warning("the unread index %s is not this role's to drop: it stays", index)

    def build_memory_mb(self) -> int:
        """Memory for building the HNSW index over every row: a vector and its links each (pgvector's
        graph), with room to spare, within :data:`INDEX_MEMORY_MB`."""
        row = self.conn.execute("SELECT count(*) FROM eventmem_memories").fetchone()
        rows = int(row[0]) if row is not None else 0
        needed = rows * (4 * int(self.embedder.dim) + 1024) * 3 // 2 >> 20
        low, high = INDEX_MEMORY_MB
        return max(low, min(high, needed))


def graph_settings(memories: int) -> tuple[int, int]:
    """(``m``, ``ef_construction``) of an HNSW graph made over this many memories: :data:`HNSW_SMALL` up
    to :data:`HNSW_SMALL_UP_TO`, else :data:`HNSW_M` and :data:`HNSW_EF_CONSTRUCTION`."""
    return HNSW_SMALL if memories <= HNSW_SMALL_UP_TO else (HNSW_M, HNSW_EF_CONSTRUCTION)


def ivf_lists(memories: int) -> int:
    """The lists of an inverted file of the semantic part made over this many memories: one below
    :data:`IVF_LISTS_FROM`, else the square root of their number."""
    return 1 if memories < IVF_LISTS_FROM else round(math.sqrt(memories))
