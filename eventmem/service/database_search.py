"""Hybrid recall from PostgreSQL, fused by the in-process function itself.

Each project of the database is searched on its own, as an in-process store searches its journal:
the database gives bounded candidate lists (the vector top ``k`` of the filtered memories, exact or
through HNSW; the keyword top ``k`` by the in-process BM25, :mod:`eventmem.projectors.postgres.keywords`)
and :func:`eventmem.service.search.hybrid_search` fuses them through :class:`DatabaseView`, which
answers its questions from the database: the same floors, weights, boosts and ties as in-process,
whatever that fusion becomes. The projects' answers are merged by score, then id, as the in-process
answers of a project and the global memory are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt

from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import Embedder
from eventmem.journal.config import Config
from eventmem.projectors.postgres import keywords, queries, sittings
from eventmem.projectors.postgres.queries import Key, Scored
from eventmem.service.search import hybrid_search

__all__ = ["DatabaseView", "EmptyProjects", "hybrid"]


class DatabaseView:
    """One project's filtered memories in the database, asked as :func:`hybrid_search` asks a store's
    read view. A position is a memory's place in the order it was first named here; ``among`` is not
    read (the filters are applied in SQL). The lists :func:`hybrid_search` asks for are fetched before
    it runs (every project's in one pipeline: on a busy machine a round trip costs more than the
    queries), with the columns the fusion reads and the keyword hits' cosines: the keyword lists
    (:meth:`ask_keywords`) while a model embeds the query, then the vector lists (:meth:`ask_vectors`)
    and the keyword hits' cosines (:meth:`ask_cosines`); with the built-in embedder (a vector in well
    under a millisecond) the vector lists, then the keyword lists with their hits' cosines. A list
    asked otherwise is fetched when asked."""

    def __init__(
        self,
        conn: Any,
        project: str,
        embedder: Embedder,
        filters: Filters,
        now: float,
        narrowed: str | None,
        stats: keywords.Statistics | None,
        vector: npt.NDArray[np.float32] | None,
    ) -> None:
        self.conn = conn
        self.project = project
        self.embedder = embedder
        self.filters = filters
        self.now = now
        self.narrowed = narrowed
        self.stats = stats
        """The project's keyword statistics, if read before the lists (without a vector: the lists'
        statements then need none)."""
        self.vector = vector
        """The query's vector, once made (:meth:`ask_vectors`; the keyword list is sent before it)."""
        self.literal = None if vector is None else queries.vector_literal(vector)
        """The vector as a pgvector literal, made once for the statements that send it."""
        self.searched = stats.searched if stats is not None else BOUND
        """The memories passing the filters, counted up to a bound: by the statistics' query without a
        vector, else by the vector list's (:meth:`collect`)."""
        self._keys: list[Key] = []
        self._positions: dict[Key, int] = {}
        self._lock = threading.Lock()  # (the keyword search may run in hybrid_search's worker thread)
        self._columns: dict[Key, tuple[float, float, float]] = {}
        self._cosines: dict[Key, float] = {}
        self._asked: dict[tuple[object, ...], Any] = {}
        """Queries sent by :meth:`ask`, by what they answer, until :meth:`collect`."""
        self._answers: dict[tuple[object, ...], Any] = {}

    # -- the lists, fetched ahead ----------------------------------------------------------------------

    def _where(self) -> tuple[str, list[object]]:
        return queries.visible_where([self.project], self.filters, self.now, self.narrowed)

    def _exact(self) -> bool:
        # (as the vector list decides; counted by the statistics' query up to BOUND only)
        scanned = self.stats is None and queries.narrows(self.filters, self.narrowed)
        return self.searched <= (queries.SCANNED_UP_TO if scanned else queries.EXACT_UP_TO)

    def ask_keywords(self, text: str, depth: int, *, beside_vectors: bool) -> None:
        """Send the keyword list :func:`hybrid_search` asks for ``text`` at ``depth`` (in a pipeline:
        its answer is read by :meth:`ask_cosines` or :meth:`collect`). Beside a model's vectors it is
        sent before the query is embedded, without the hits' cosines (:meth:`ask_cosines` asks them);
        beside the built-in embedder's, after :meth:`ask_vectors`, with them."""
        query = None
        if self.stats is None:  # (the words chosen in SQL: no statistics read before)
            where, params = self._where()
            query = keywords.ranking_at_once(
                self.project, text, depth, where, params, beside_vectors=beside_vectors, vector=self.literal
            )
        if query is None:
            query = self._keyword_query(text, depth, beside_vectors)
        if query is not None:
            self._asked[("keywords", text, depth, beside_vectors)] = self.conn.execute(*query)
        else:
            self._answers[("keywords", text, depth, beside_vectors)] = []

    def ask_vectors(self, vector: npt.NDArray[np.float32], depth: int) -> None:
        """Send the vector list of the query's ``vector`` at ``depth`` (read by :meth:`collect`)."""
        self.vector = vector
        self.literal = queries.vector_literal(vector)
        setting, sql, values = queries.counted_vector_query(
            [self.project],
            vector,
            depth,
            self.filters,
            self.now,
            project=self.narrowed,
            literal=self.literal,
            model=self.embedder.model_id,
        )
        self.conn.execute(*setting)
        self._asked[("vectors", depth)] = self.conn.execute(sql, values)
        self.conn.execute(queries.SORTING_BACK)

    def ask_cosines(self) -> None:
        """Read the keyword list sent before the query's vector was known, and send the cosines of its
        hits with that vector (:meth:`ask_vectors` first): the statement the keyword list's own
        subquery computed them by, on the same rows, so the same values (read by :meth:`collect`)."""
        assert self.literal is not None
        for key in [key for key in self._asked if key[0] == "keywords"]:
            self._answers[key] = found = self._asked.pop(key).fetchall()
            keys = [(self.project, str(row[0])) for row in found if (self.project, str(row[0])) not in self._cosines]
            if keys:
                self._asked[("cosines", key)] = self.conn.execute(*queries.cosines_query(keys, self.literal))

    def collect(self) -> None:
        for key, cursor in self._asked.items():
            found = cursor.fetchall()
            if key[0] == "vectors":
                rows, self.searched = queries.counted_rows_of(found)
                self._answers[key] = rows
            elif key[0] == "cosines":
                self._cosines.update(queries.cosines_of(found))
            else:
                self._answers[key] = found
        self._asked = {}

    def _keyword_query(self, text: str, limit: int, beside: bool) -> tuple[str, list[object]] | None:
        where, params = self._where()
        if self.literal is None and self.vector is not None:
            self.literal = queries.vector_literal(self.vector)
        literal = self.literal
        return keywords.ranking(
            self.conn, self.project, text, limit, where, params, beside_vectors=beside, known=self.stats, vector=literal
        )

    def _place(self, rows: Sequence[queries.Row], cosines: Sequence[float | None]) -> list[int]:
        with self._lock:
            out = []
            for (key, _, importance, updated, created), cosine in zip(rows, cosines, strict=True):
                position = self._positions.get(key)
                if position is None:
                    position = self._positions[key] = len(self._keys)
                    self._keys.append(key)
                self._columns[key] = (importance, updated, created)
                if cosine is not None:
                    self._cosines[key] = cosine
                out.append(position)
            return out

    # -- what hybrid_search asks -----------------------------------------------------------------------

    @property
    def embedder_id(self) -> str:
        return self.embedder.model_id

    def vector_count(self) -> int:
        return self.stats.memories if self.stats is not None else self.searched

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        if self.vector is None:
            self.vector = self.embedder.embed([text])[0]
        return self.vector

    def vector_search(
        self, vector: npt.NDArray[np.float32], limit: int, among: npt.NDArray[np.bool_] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        found = self._answers.get(("vectors", limit)) if vector is self.vector else None
        if found is not None:
            rows = found
        else:
            rows = queries.vector_rows(
                self.conn,
                [self.project],
                vector,
                limit,
                self.filters,
                self.now,
                exact=self._exact(),
                project=self.narrowed,
                model=self.embedder.model_id,
            )
        positions = self._place(rows, [row[1] for row in rows])
        return np.asarray(positions, np.int64), np.asarray([row[1] for row in rows], np.float32)

    def vector_similarities(self, positions: list[int], vector: npt.NDArray[np.float32]) -> dict[int, float]:
        keys = [self._keys[p] for p in positions]
        missing = [k for k in keys if k not in self._cosines]
        if missing:
            self._cosines.update(queries.cosines(self.conn, missing, vector))
        return {p: self._cosines[k] for p, k in zip(positions, keys, strict=True) if k in self._cosines}

    def keyword_search(
        self, text: str, limit: int, among: npt.NDArray[np.bool_] | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]:
        found = self._answers.get(("keywords", text, limit, beside_vectors))
        if found is None:
            query = self._keyword_query(text, limit, beside_vectors)
            found = [] if query is None else self.conn.execute(*query).fetchall()
        hits = keywords.rows_of(found, limit)
        rows: list[queries.Row] = [((self.project, i), score, a, u, c) for i, score, a, u, c, _ in hits]
        positions = self._place(rows, [row[5] for row in hits])
        return list(zip(positions, [row[1] for row in rows], strict=True))

    def keyword_holds(self, word: str) -> bool:
        return keywords.holds(self.conn, self.project, word)

    def saved_beside(
        self, positions: list[int], among: npt.NDArray[np.bool_], steps: int, seconds: float
    ) -> list[tuple[int, int, int]]:
        """As :meth:`eventmem.runner.readview.ReadView.saved_beside`, from the database in one query
        (:func:`eventmem.projectors.postgres.sittings.neighbours`; ``among`` is not read: the filters
        are applied in SQL); the neighbours come with the columns and cosines the fusion reads."""
        if not positions:
            return []
        where, params = self._where()
        if self.vector is not None and self.literal is None:
            self.literal = queries.vector_literal(self.vector)
        found = sittings.neighbours(
            self.conn,
            self.project,
            [self._keys[p][1] for p in positions],
            steps,
            seconds,
            where,
            params,
            vector=self.literal if self.vector is not None else None,
            dim=0 if self.vector is None else int(self.vector.shape[0]),
        )
        rows: list[queries.Row] = [((self.project, i), 0.0, a, u, c) for _, _, i, a, u, c, _ in found]
        placed = self._place(rows, [row[6] for row in found])
        return [(at, positions[row[0]], abs(row[1])) for at, row in zip(placed, found, strict=True)]

    def contents_at(self, positions: list[int], chars: int) -> list[str]:
        """As :meth:`eventmem.runner.readview.ReadView.contents_at`, in one query
        (:func:`eventmem.projectors.postgres.sittings.contents`)."""
        found = sittings.contents(self.conn, self.project, [self._keys[p][1] for p in positions], chars)
        return [found.get(self._keys[p][1], "") for p in positions]

    def _of(self, positions: npt.NDArray[np.int64], column: int) -> npt.NDArray[np.float64]:
        keys = [self._keys[p] for p in positions.tolist()]
        missing = [k for k in keys if k not in self._columns]
        if missing:
            self._columns.update(queries.columns(self.conn, missing))
        return np.asarray([self._columns.get(k, (0.5, self.now, self.now))[column] for k in keys], np.float64)

    def importance_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._of(positions, 0)

    def updated_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._of(positions, 1)

    def created_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._of(positions, 2)

    def id_at(self, position: int) -> str:
        return self._keys[position][1]


BOUND = queries.EXACT_UP_TO + 1
"""The filtered memories are counted up to this many (the fusion asks whether there are more than 20
times a few keyword hits)."""
DEPTH = 50
"""The depth hybrid_search asks of each list for a limit of up to 12 (``max(limit * 4, 50)``): the lists
fetched ahead (another depth is fetched when asked)."""


class EmptyProjects:
    """The projects that held no memory when a connection's last search looked: a search sends none of
    their lists, only whether each still holds none, in the same pipeline as the others' lists, and asks
    their lists after, one round trip more, if one now does (so the answers are the same; measured at
    20,000 memories, recalls alternated with and without it: an empty global memory's lists cost about
    1.5 ms of the server's work a recall and 0.8 ms of the client's, a tenth of a recall without a
    filter). A project is asked whether it holds a memory the first time it is searched and while it
    holds none; one seen holding memories is searched in full from then on (should it hold none later,
    its lists cost little and answer nothing). Shared by the threads of one service."""

    def __init__(self) -> None:
        self._empty: set[str] = set()
        self._holding: set[str] = set()
        self._lock = threading.Lock()

    def among(self, projects: Sequence[str]) -> list[str]:
        """Those of ``projects`` that held nothing when last looked at."""
        with self._lock:
            return [p for p in projects if p in self._empty]

    def to_ask(self, projects: Sequence[str]) -> list[str]:
        """Those of ``projects`` to ask whether they hold a memory: never looked at, or holding none."""
        with self._lock:
            return [p for p in projects if p not in self._holding]

    def saw(self, holding: dict[str, bool]) -> None:
        """What a search found: whether each project it asked holds a memory. The last answer decides,
        and a project is never both skipped and left unasked (two searches' answers may arrive in
        either order: one read before a sync committed, one after)."""
        with self._lock:
            for project, held in holding.items():
                if held:
                    self._empty.discard(project)
                    self._holding.add(project)
                else:
                    self._holding.discard(project)
                    self._empty.add(project)


HOLDING = (
    "SELECT k.project, coalesce((SELECT p.memories > 0 FROM eventmem_projects p WHERE p.project = k.project), false) "
    "FROM unnest(%s::text[]) AS k(project)"
)
"""Whether each project holds a memory, by its row's count (kept with its memories' rows, as the vector
list reads it; a probe of the narrow copies for a project of none was planned as a scan of them all)."""


def hybrid(
    conn: Any,
    projects: Sequence[str],
    embedder: Embedder,
    text: str,
    limit: int,
    filters: Filters,
    *,
    config: Config | None = None,
    use_vectors: bool = True,
    use_keywords: bool = True,
    now: float | None = None,
    project: str | None = None,
    embed_query: Callable[[str], npt.NDArray[np.float32]] | None = None,
    empty: EmptyProjects | None = None,
) -> list[Scored]:
    """The best ``limit`` of the filtered memories of ``projects`` for ``text``, each project searched
    as its own store, merged by score then id (in one transaction: the caller's, if it opened one).
    ``embed_query``: the query's vector (e.g. from a cache of the last questions' vectors), else
    ``embedder`` embeds it. ``empty``: the projects that held nothing at the last search, kept up to
    date here (their lists are asked only if they hold something now)."""
    now = time.time() if now is None else now
    if limit <= 0:
        return []
    depth = max(limit * 4, DEPTH)
    found: list[Scored] = []
    with queries.reading(conn):
        # with a vector, no statement before the lists: the vector list's counts the memories a filter
        # passes (it reads them anyway) and the keyword list's chooses its words in SQL; without, the
        # statistics are read first, with the count
        held = None
        skipped = empty.among(projects) if empty is not None and use_vectors else []
        if use_vectors:
            views = [
                DatabaseView(conn, one, embedder, filters, now, project, None, None)
                for one in projects
                if one not in skipped
            ]
        else:
            bounds = [(one, (*queries.visible_where([one], filters, now, project), BOUND)) for one in projects]
            stats = keywords.statistics_of(conn, bounds, text)
            views = [
                DatabaseView(conn, one, embedder, filters, now, project, stats[one], None)
                for one in projects
                if stats[one].searched
            ]
        embed = embed_query or (lambda asked: embedder.embed([asked])[0])
        # (in the caller's pipeline if it opened one: a pipeline opened inside another sends a sync)
        with nullcontext() if conn.pgconn.pipeline_status else conn.pipeline():
            asked = empty.to_ask(projects) if empty is not None and use_vectors else []
            if asked:
                held = conn.execute(HOLDING, [asked])
            vector = _ask(views, text, depth, embedder, embed, use_vectors=use_vectors)
        for view in views:
            view.collect()
        if held is not None and empty is not None:
            holding = {str(one): bool(holds) for one, holds in held.fetchall()}
            empty.saw(holding)
            grown = [one for one in skipped if holding.get(one)]
            if grown:  # (a project that held nothing gained memories since: its lists, one trip more)
                more = [DatabaseView(conn, one, embedder, filters, now, project, None, None) for one in grown]
                made = vector
                assert made is not None  # (made by the first _ask: the vectors are used)
                with nullcontext() if conn.pgconn.pipeline_status else conn.pipeline():
                    _ask(more, text, depth, embedder, lambda _: made, use_vectors=use_vectors)
                for view in more:
                    view.collect()
                views += more
        for view in views:
            # hybrid_search reads a mask of the searched memories only for whether it holds any and how
            # many (counted up to a bound): the filters are applied in SQL
            mask = np.ones(view.searched, bool)
            scored = hybrid_search(
                view,
                text,
                limit,
                mask,
                config or Config(),
                use_vectors=use_vectors,
                use_keywords=use_keywords,
                now=now,
            )
            found += [
                Scored(view.project, view.id_at(s.slot), s.score, s.vector_score, s.keyword_score) for s in scored
            ]
    found.sort(key=lambda s: (-s.score, s.id, s.project))
    return found[:limit]


def _ask(
    views: Sequence[DatabaseView],
    text: str,
    depth: int,
    embedder: Embedder,
    embed: Callable[[str], npt.NDArray[np.float32]],
    *,
    use_vectors: bool,
) -> npt.NDArray[np.float32] | None:
    """Send each view's lists (read by :meth:`DatabaseView.collect`); the query's vector, if made.

    A model's vector takes milliseconds: the keyword lists run in the server while the query is
    embedded, and their hits' cosines are asked once it is known; the built-in embedder's takes less
    than a round trip: it is made first, and the keyword lists bring the cosines themselves."""
    overlapped = use_vectors and queries.learned(embedder.model_id)
    vector = None
    if use_vectors and not overlapped:
        vector = embed(text)
        for view in views:
            view.ask_vectors(vector, depth)
    for view in views:
        view.ask_keywords(text, depth, beside_vectors=use_vectors)
    if overlapped:
        vector = embed(text)
        for view in views:
            view.ask_vectors(vector, depth)
        for view in views:
            view.ask_cosines()
    return vector
