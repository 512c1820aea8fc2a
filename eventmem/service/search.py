"""The read side: hybrid recall over a store's vector and keyword indexes.

Filters become a boolean mask over slots *before* either index is asked for its top ``k``, so a
filtered query returns the true best matches of the filtered set. The two ranked lists are fused
linearly (``vector_weight * cosine + keyword_weight * normalised BM25``, the weights of the
embedder's row in ``eventmem.journal.config.FUSION_WEIGHTS`` unless the config sets its own; a model's
cosines scaled to the query's best) or by reciprocal rank, then nudged by importance and recency.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from eventmem.core.ids import iso_to_epoch
from eventmem.core.query_rules import (
    FEW_KEYWORD_MATCHES,
    FEW_TO_FUSE,
    NEIGHBOUR_SOURCES,
    NEIGHBOUR_STEPS,
    SITTING_SECONDS,
    TIME_BOOST,
    VECTOR_FLOOR,
    Filters,
    fuse,
    fuse_few,
    lent_to,
    spreads,
    unknown_words_floor,
)
from eventmem.core.timewords import NAMED_DAYS_CHARS, closeness, days_named
from eventmem.core.words import STOPWORDS
from eventmem.journal.config import Config, fusion_weights
from eventmem.runner.readview import ReadView

__all__ = ["ScoredSlot", "SearchView", "build_mask", "hybrid_search"]

PARALLEL_FROM = 5_000
"""From this many vectors on, the keyword search runs in a worker thread beside the vector scan
(measured: 10-20% faster at 10k memories, no gain at 1k where the thread hand-off costs what it saves)."""
_WORD = re.compile(r"\w+")
"""A word as the keyword index splits them."""


class SearchView(Protocol):
    """What :func:`hybrid_search` asks of the indexes: a store's :class:`ReadView`, or PostgreSQL's
    (:class:`eventmem.service.database_search.DatabaseView`), which answers the same questions from the
    database so that both are fused by this one function."""

    @property
    def embedder_id(self) -> str: ...

    def vector_count(self) -> int: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...

    def vector_search(
        self, vector: npt.NDArray[np.float32], limit: int, among: npt.NDArray[np.bool_] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...

    def vector_similarities(self, positions: list[int], vector: npt.NDArray[np.float32]) -> dict[int, float]: ...

    def keyword_search(
        self, text: str, limit: int, among: npt.NDArray[np.bool_] | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]: ...

    def keyword_holds(self, word: str) -> bool: ...

    def importance_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]: ...

    def created_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]: ...

    def updated_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]: ...

    def id_at(self, position: int) -> str: ...

    def saved_beside(
        self, positions: list[int], among: npt.NDArray[np.bool_], steps: int, seconds: float
    ) -> list[tuple[int, int, int]]: ...

    def contents_at(self, positions: list[int], chars: int) -> list[str]: ...


def holds_a_query_word(view: SearchView, text: str, matched: Collection[int]) -> bool:
    """Whether the memories hold one of the query's words (stop words aside): one the keyword search
    matched among those searched (``matched``), or one it did not ask (too common: the index is
    asked, exactly, so that a rebuild gives the same answer)."""
    words = {w.lower() for w in _WORD.findall(text)} - STOPWORDS
    return bool(words) and (bool(matched) or any(view.keyword_holds(w) for w in sorted(words)))


@functools.cache
def _keyword_worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="eventmem-keywords")


@dataclass(frozen=True, slots=True)
class ScoredSlot:
    slot: int
    score: float
    vector_score: float
    keyword_score: float


def sitting_neighbours(
    view: SearchView, lenders: list[int], mask: npt.NDArray[np.bool_], steps: int = NEIGHBOUR_STEPS
) -> list[tuple[int, int, int]]:
    """``(neighbour, lender, step)`` of positions: for each of ``lenders``, the ``steps`` memories
    ``mask`` allows that were saved just before it and the ``steps`` just after it (``step`` 1 the
    closest), at most :data:`SITTING_SECONDS` apart. The order is the journal's own (creation time,
    then id), never the positions': a rebuild, another process folding the journal, or a database
    finds the same neighbours."""
    return view.saved_beside(lenders, mask, steps, SITTING_SECONDS)


def best_of(view: SearchView, candidates: list[int], values: list[float], count: int) -> list[int]:
    """The indices of the ``count`` best scored of ``candidates`` (``values``: their scores; a tie by
    id, as the answers are ordered), best first; in Python: a few scores, where numpy's calls cost
    more than the work."""
    if count <= 0:
        return []
    top: list[int] = list(range(len(values)))
    if len(values) > count:
        cut = sorted(values)[-count]
        top = [i for i, value in enumerate(values) if value >= cut]
    top.sort(key=lambda i: (-values[i], view.id_at(candidates[i])))
    return top[:count]


def closeness_of_days_named(view: SearchView, text: str, candidates: list[int], now: float) -> npt.NDArray[np.float64]:
    """For each of ``candidates``, how close the days its text names (see
    :func:`eventmem.core.timewords.days_named`) come to the time the question ``text`` names, the
    best of them (0 for a text that names none): a dated entry counts as of its date, whenever it
    was saved."""
    named = [days_named(content) for content in view.contents_at(candidates, NAMED_DAYS_CHARS)]
    best = np.zeros(len(candidates), dtype=np.float64)
    counts = [len(days) for days in named]
    if any(counts):
        days = np.fromiter((day for each in named for day in each), np.float64, sum(counts))
        near = closeness(text, days, now)
        if near is not None:
            np.maximum.at(best, np.repeat(np.arange(len(candidates)), counts), near)
    return best


def build_mask(view: ReadView, filters: Filters, now: float | None = None) -> npt.NDArray[np.bool_]:
    """Positions that may be returned: live, not expired, not superseded, and passing the filters."""

    def epoch(value: str | None) -> float | None:
        return None if value is None else iso_to_epoch(value)

    return view.mask(
        now=now,
        include_superseded=filters.include_superseded,
        kinds=filters.kinds,
        scope=filters.scope,
        tags=filters.tags,
        min_importance=filters.min_importance,
        max_importance=filters.max_importance,
        created_after=epoch(filters.created_after),
        created_before=epoch(filters.created_before),
        updated_after=epoch(filters.updated_after),
        updated_before=epoch(filters.updated_before),
    )


def hybrid_search(
    view: SearchView,
    text: str,
    limit: int,
    mask: npt.NDArray[np.bool_],
    config: Config,
    *,
    use_vectors: bool = True,
    use_keywords: bool = True,
    now: float | None = None,
) -> list[ScoredSlot]:
    """Fuse vector and keyword candidates among ``mask``; best first, at most ``limit``."""
    if not mask.any():
        return []
    depth = max(limit * 4, 50)
    vector_hits: dict[int, float] = {}
    query_vector = None
    keywords: Future[list[tuple[int, float]]] | None = None
    if use_vectors and view.vector_count():
        # the question is embedded before the keyword side starts: both are mostly Python, and run
        # side by side they only take the GIL from each other (the embedding took 2-4 times as long)
        query_vector = view.embed_query(text)
    if use_keywords and query_vector is not None and view.vector_count() >= PARALLEL_FROM:
        # the vector scan runs in C with the GIL released: on a second core, the keyword side is free
        keywords = _keyword_worker().submit(view.keyword_search, text, depth, mask, beside_vectors=True)
    if query_vector is not None:
        found, similarity = view.vector_search(query_vector, depth, mask)
        vector_hits = dict(zip(found.tolist(), similarity.tolist(), strict=True))
    keyword_hits: dict[int, float] = {}
    if keywords is not None:
        keyword_hits = dict(keywords.result())
    elif use_keywords:
        keyword_hits = dict(view.keyword_search(text, depth, mask, beside_vectors=query_vector is not None))
    # a memory the query's words do not occur in needs a cosine unrelated texts rarely reach, and a
    # query none of whose words the memories hold needs more (see UNKNOWN_WORDS_FLOOR)
    matched: set[int] | dict[int, float] = keyword_hits
    strict = unknown_words_floor(view.embedder_id)
    if not use_keywords and any(c < strict for c in vector_hits.values()):
        matched = {s for s, _ in view.keyword_search(text, depth, mask, beside_vectors=True)}
    floor = VECTOR_FLOOR
    if any(c < strict for c in vector_hits.values()) and not holds_a_query_word(view, text, matched):
        floor = strict
    noise = {s for s, c in vector_hits.items() if c < floor and s not in matched}
    candidates = list((vector_hits.keys() | keyword_hits.keys()) - noise)  # (the ranks below still count them)
    if not candidates:
        return []
    now = time.time() if now is None else now
    slots = np.asarray(candidates, dtype=np.int64)
    others: dict[int, float] = {}  # the cosine of candidates the vector search did not reach
    if query_vector is not None and config.fusion != "rrf":
        others = view.vector_similarities([s for s in candidates if s not in vector_hits], query_vector)
    weights, spread_cosines = fusion_weights(config, view.embedder_id), spreads(view.embedder_id)
    searched = int(mask.sum()) if 0 < len(keyword_hits) <= FEW_KEYWORD_MATCHES else 0  # (counted when it tells)

    def fused(these: list[int]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        return fuse(
            these,
            vector_hits,
            keyword_hits,
            fusion=config.fusion,
            weights=weights,
            spread_cosines=spread_cosines,
            searched=searched,
            cosines=others,
            use_vectors=use_vectors,
            use_keywords=use_keywords,
        )

    scores, vector_scores, keyword_scores = fused(candidates)
    if config.fusion == "linear" and use_vectors and use_keywords:
        # (a hybrid answer only: a vector or keyword search lists what matches; reciprocal ranks are
        # too close together to add a share of one)
        values = scores.tolist()
        lenders = best_of(view, candidates, values, NEIGHBOUR_SOURCES)
        pairs = sitting_neighbours(view, [candidates[i] for i in lenders], mask, NEIGHBOUR_STEPS)
        if pairs:
            index = dict(zip(candidates, range(len(candidates)), strict=True))
            new = sorted({n for n, _, _ in pairs}.difference(index))
            if new:
                index.update(zip(new, range(len(candidates), len(candidates) + len(new)), strict=True))
                if query_vector is not None:
                    others.update(view.vector_similarities(new, query_vector))
                if spread_cosines or len(new) > FEW_TO_FUSE:  # (scaled to the best of them all)
                    scores, vector_scores, keyword_scores = fused(candidates + new)
                    values = scores.tolist()
                else:  # (raw cosines: a new candidate's score does not depend on the others')
                    more, vector_more, keyword_more = fuse_few(
                        new,
                        vector_hits,
                        others,
                        keyword_hits,
                        max(keyword_hits.values(), default=0.0),
                        weights,
                        searched,
                        use_vectors,
                        use_keywords,
                    )
                    values += more
                    vector_scores = np.concatenate([vector_scores, vector_more])
                    keyword_scores = np.concatenate([keyword_scores, keyword_more])
                candidates = candidates + new
                slots = np.asarray(candidates, dtype=np.int64)
            scores = np.array(lent_to(values, [(index[n], index[s], step) for n, s, step in pairs]), np.float64)
    boosts = config.importance_boost * (view.importance_at(slots) - 0.5)
    if config.recency_boost:
        age_days = np.maximum(now - view.updated_at(slots), 0.0) / 86400.0
        boosts = boosts + config.recency_boost * np.power(0.5, age_days / config.recency_half_life_days)
    near = closeness(text, view.created_at(slots), now)
    if near is not None:  # (a dated note counts as of its date)
        near = np.maximum(near, closeness_of_days_named(view, text, candidates, now))
    if near is not None:
        # the question names a time ("in May", "last week", "2026-03-14"): notes of then rise
        boosts = boosts + TIME_BOOST * near
    totals = scores + boosts
    if len(candidates) > limit:
        # only candidates scoring at least the limit-th best can be in the answer (ties included)
        cut = np.partition(totals, len(totals) - limit)[len(totals) - limit]
        kept = np.flatnonzero(totals >= cut).tolist()
    else:
        kept = list(range(len(candidates)))
    final = totals.tolist()
    id_at = view.id_at
    order = sorted(kept, key=lambda i: (-final[i], id_at(candidates[i])))[:limit]
    v_list, k_list = vector_scores.tolist(), keyword_scores.tolist()
    return [ScoredSlot(candidates[i], final[i], v_list[i], k_list[i]) for i in order]
