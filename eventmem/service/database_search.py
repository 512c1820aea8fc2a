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
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import Embedder
from eventmem.journal.config import Config
from eventmem.projectors.postgres import keywords, queries
from eventmem.projectors.postgres.queries import Key, Scored
from eventmem.service.search import hybrid_search

__all__ = ["DatabaseView", "hybrid"]


class DatabaseView:
    """One project's filtered memories in the database, asked as :func:`hybrid_search` asks a store's
    read view. A position is a memory's place in the order it was first named here; ``among`` is not
    read (the filters are applied in SQL)."""

    def __init__(
        self,
        conn: Any,
        project: str,
        embedder: Embedder,
        filters: Filters,
        now: float,
        narrowed: str | None,
        *,
        searched: int,
        memories: int,
    ) -> None:
        self.conn = conn
        self.project = project
        self.embedder = embedder
        self.filters = filters
        self.now = now
        self.narrowed = narrowed
        self.searched = searched
        """The filtered memories (counted up to just above :data:`queries.EXACT_UP_TO`)."""
        self.memories = memories
        self._keys: list[Key] = []
        self._positions: dict[Key, int] = {}
        self._lock = threading.Lock()  # (the keyword search may run in hybrid_search's worker thread)
        self._columns: dict[Key, tuple[float, float, float]] = {}

    def _place(self, keys: Sequence[Key]) -> list[int]:
        with self._lock:
            out = []
            for key in keys:
                position = self._positions.get(key)
                if position is None:
                    position = self._positions[key] = len(self._keys)
                    self._keys.append(key)
                out.append(position)
            return out

    @property
    def embedder_id(self) -> str:
        return self.embedder.model_id

    def vector_count(self) -> int:
        return self.memories

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.embedder.embed([text])[0]
        return vector

    def vector_search(
        self, vector: npt.NDArray[np.float32], limit: int, among: npt.NDArray[np.bool_] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        hits = queries.vector_hits(
            self.conn,
            [self.project],
            vector,
            limit,
            self.filters,
            self.now,
            exact=self.searched <= queries.EXACT_UP_TO,
            project=self.narrowed,
        )
        positions = self._place([key for key, _ in hits])
        return np.asarray(positions, np.int64), np.asarray([c for _, c in hits], np.float32)

    def vector_similarities(self, positions: list[int], vector: npt.NDArray[np.float32]) -> dict[int, float]:
        keys = [self._keys[p] for p in positions]
        found = queries.cosines(self.conn, keys, vector)
        return {p: found[k] for p, k in zip(positions, keys, strict=True) if k in found}

    def keyword_search(
        self, text: str, limit: int, among: npt.NDArray[np.bool_] | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]:
        hits = queries.keyword_hits(
            self.conn,
            [self.project],
            text,
            limit,
            self.filters,
            self.now,
            project=self.narrowed,
            beside_vectors=beside_vectors,
        )
        positions = self._place([key for key, _ in hits])
        return list(zip(positions, [score for _, score in hits], strict=True))

    def keyword_holds(self, word: str) -> bool:
        return keywords.holds(self.conn, self.project, word)

    def _of(self, positions: npt.NDArray[np.int64], column: int) -> npt.NDArray[np.float64]:
        keys = [self._keys[p] for p in positions.tolist()]
        missing = [k for k in keys if k not in self._columns]
        if missing:  # (every candidate's columns at once: importance, updated, created)
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
) -> list[Scored]:
    """The best ``limit`` of the filtered memories of ``projects`` for ``text``, each project searched
    as its own store (one transaction), merged by score then id."""
    now = time.time() if now is None else now
    found: list[Scored] = []
    for one in projects:
        with conn.transaction():
            searched = queries.count(conn, [one], filters, now, project=project, up_to=queries.EXACT_UP_TO + 1)
            if not searched or limit <= 0:
                continue
            memories = keywords.statistics(conn, one)[0]
            view = DatabaseView(conn, one, embedder, filters, now, project, searched=searched, memories=memories)
            # hybrid_search reads a mask of the searched memories only for whether it holds any and how
            # many: the filters are applied in SQL
            mask = np.ones(searched, bool)
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
        found += [Scored(one, view.id_at(s.slot), s.score, s.vector_score, s.keyword_score) for s in scored]
    found.sort(key=lambda s: (-s.score, s.id, s.project))
    return found[:limit]
