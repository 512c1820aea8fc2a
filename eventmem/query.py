"""The read side: hybrid recall over a store's vector and keyword indexes.

Filters become a boolean mask over slots *before* either index is asked for its top ``k``, so a
filtered query returns the true best matches of the filtered set. The two ranked lists are fused
linearly (``vector_weight * cosine + keyword_weight * normalised BM25``, the weights of the
embedder's row in ``eventmem.config.FUSION_WEIGHTS`` unless the config sets its own; a model's
cosines scaled to the query's best) or by reciprocal rank, then nudged by importance and recency.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.config import Config, fusion_weights
from eventmem.embedder import STOPWORDS
from eventmem.errors import InvalidInput
from eventmem.events import KINDS, SCOPES
from eventmem.ids import iso_to_epoch
from eventmem.runner.readview import ReadView
from eventmem.timewords import closeness
from eventmem.validation import check_count, check_length, check_number, refusal, shown

__all__ = ["Filters", "ScoredSlot", "build_mask", "hybrid_search"]

RRF_K = 60
PARALLEL_FROM = 5_000
"""From this many vectors on, the keyword search runs in a worker thread beside the vector scan
(measured: 10-20% faster at 10k memories, no gain at 1k where the thread hand-off costs what it saves)."""
_WORD = re.compile(r"\w+")
"""A word as the keyword index splits them."""
FEW_KEYWORD_MATCHES = 3
"""When the keyword index matches at most this many memories (and they are at most a twentieth of
those searched), its evidence weighs like the vectors'."""

VECTOR_FLOOR = 0.24
"""The cosine a memory that holds none of the query's words needs to be a result at all (in every
mode: a vector search asks the keyword index which memories hold them), when the query has a word
the searched memories hold. Measured on the evaluation set (``tools/eval.py``, 345 memories, 160
queries): the relevant memories found by their vector alone, among the top 10, are at 0.262 and
above with the built-in embedder and 0.242 with MiniLM. Below it a result is noise that only the
importance and recency nudges ranked."""

UNKNOWN_WORDS_FLOOR = {"hashing": math.inf}
"""The cosine needed when no memory searched holds any of the query's words (a made-up word, a
random string, an off-topic question), by embedder family; :data:`MODEL_UNKNOWN_WORDS_FLOOR` for
the others. The vector is then the only evidence, and it is not enough with the built-in embedder:
its word pieces put made-up words and random letters (365 tried) at up to 0.48 with one of the
evaluation's 345 memories and 0.59 among 3,000 more, above every relevant memory it ranks in a top
10 by vector alone (0.30-0.42). Nor does the query's own background, on ``tools/eval.py
--no-match``'s 50 queries: the margin over its mean cosine with all memories (relevant 0.23-0.30,
no-match up to 0.32), a z-score against that mean (2.4-3.0 against up to 4.3), or the cosine once
the memories' centroid is taken out of both (0.22-0.31 against up to 0.37)."""
MODEL_UNKNOWN_WORDS_FLOOR = 0.4
"""MiniLM puts made-up words at up to 0.30 among 345 memories and 0.33 among 3,345, and the relevant
memories it ranks in a top 10 by vector alone at 0.24-0.46: a query that shares no word with the
project gets only its clear matches."""


def unknown_words_floor(model_id: str) -> float:
    """The cosine a memory needs when none of the query's words occurs in the memories searched."""
    return UNKNOWN_WORDS_FLOOR.get(model_id.split("-", 1)[0], MODEL_UNKNOWN_WORDS_FLOOR)


TIME_BOOST = 0.3
"""Added to a result saved inside a time the question names (less the farther outside it is, see
:func:`eventmem.timewords.closeness`); chosen on the hard evaluation's temporal questions (dev)."""

RAW_COSINES: frozenset[str] = frozenset({"hashing"})
"""Embedders (``model_id`` or its first part) whose cosines are fused as they are; every other one's
are divided by the query's best first (:func:`spread`), as BM25 is by the best keyword match.
Measured with MiniLM on the hard evaluation's dev split (recall@5 / MRR): raw 0.9/0.1 0.675 / 0.642,
scaled 0.9/0.1 0.700 / 0.633, scaled 0.8/0.2 0.679 / 0.638, stretched min-max 0.694 / 0.618; on
the shipped benchmark's dev half raw 0.969 / 0.923, scaled 0.8/0.2 0.969 / 0.929. The built-in
embedder's figures with it were mixed (recall@5 up, MRR down), so its default path is unchanged."""


def spreads(model_id: str) -> bool:
    """Whether ``model_id``'s cosines are scaled to the query's best before the linear fusion."""
    return model_id not in RAW_COSINES and model_id.split("-", 1)[0] not in RAW_COSINES


def spread(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``scores`` divided by the best of this query's candidates (the best at 1): a model whose
    cosines crowd in a narrow band weighs like the keyword side's normalised BM25."""
    best = float(scores.max(initial=0.0))
    return scores / best if best > 0 else scores


def holds_a_query_word(view: ReadView, text: str, matched: Collection[int]) -> bool:
    """Whether the memories hold one of the query's words (stop words aside): one the keyword search
    matched among those searched (``matched``), or one it did not ask (too common: the index is
    asked, exactly, so that a rebuild gives the same answer)."""
    words = {w.lower() for w in _WORD.findall(text)} - STOPWORDS
    return bool(words) and (bool(matched) or any(view.keyword_holds(w) for w in sorted(words)))


@functools.cache
def _keyword_worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="eventmem-keywords")


class Filters(msgspec.Struct, kw_only=True, frozen=True):
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    """A memory must carry every one of these tags."""
    scope: str | None = None
    min_importance: float | None = None
    created_after: str | None = None
    created_before: str | None = None
    include_superseded: bool = False
    max_importance: float | None = None
    updated_after: str | None = None
    updated_before: str | None = None

    def validate(self) -> None:
        check_count(self.kinds, "types", "type")
        check_count(self.tags, "tags")
        for name in ("min_importance", "max_importance"):
            if getattr(self, name) is not None:
                check_number(getattr(self, name), "importance", name)
        for name in ("created_after", "created_before", "updated_after", "updated_before"):
            if getattr(self, name) is not None:
                check_length(getattr(self, name), "time", name)
        bad = [k for k in self.kinds if k not in KINDS]
        if bad:
            raise InvalidInput(f"unknown type(s) {', '.join(map(shown, bad))}; choose from {', '.join(KINDS)}")
        if self.scope is not None and self.scope not in (*SCOPES, "all"):
            raise refusal("scope", "'project', 'global' or 'all'", self.scope)
        for name in ("created_after", "created_before", "updated_after", "updated_before"):
            value = getattr(self, name)
            if value is not None:
                try:
                    iso_to_epoch(value)
                except (ValueError, OverflowError):
                    raise refusal(name, "an ISO-8601 date or time", value) from None


@dataclass(frozen=True, slots=True)
class ScoredSlot:
    slot: int
    score: float
    vector_score: float
    keyword_score: float


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
    view: ReadView,
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
    if use_keywords and use_vectors and view.vector_count() >= PARALLEL_FROM:
        # both indexes scan in C with the GIL released: on a second core, the keyword side is free
        keywords = _keyword_worker().submit(view.keyword_search, text, depth, mask, beside_vectors=True)
    if use_vectors and view.vector_count():
        query_vector = view.embed_query(text)
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
    vector_weight, keyword_weight = fusion_weights(config, view.embedder_id)
    if config.fusion == "rrf":
        vector_rank = {s: r for r, s in enumerate(sorted(vector_hits, key=lambda s: -vector_hits[s]))}
        keyword_rank = {s: r for r, s in enumerate(sorted(keyword_hits, key=lambda s: -keyword_hits[s]))}
        absent = math.inf  # 1 / inf = 0: a list that does not hold the slot adds nothing
        by_vector = np.array([RRF_K + vector_rank.get(s, absent) + 1 for s in candidates], dtype=np.float64)
        by_keyword = np.array([RRF_K + keyword_rank.get(s, absent) + 1 for s in candidates], dtype=np.float64)
        scores = (vector_weight / by_vector + keyword_weight / by_keyword) * (RRF_K + 1)
        vector_scores = np.array([vector_hits.get(s, 0.0) for s in candidates], dtype=np.float64)
        keyword_scores = np.array([keyword_hits.get(s, 0.0) for s in candidates], dtype=np.float64)
    else:
        top_keyword = max(keyword_hits.values(), default=0.0)
        others: dict[int, float] = {}  # the cosine of keyword hits the vector search did not reach
        if query_vector is not None:
            others = view.vector_similarities([s for s in keyword_hits if s not in vector_hits], query_vector)
        cosine_of = others | vector_hits  # (disjoint: others holds only slots the scan did not reach)
        cosines = np.fromiter(map(cosine_of.get, candidates, repeat(0.0)), np.float64, len(candidates))
        vector_scores = np.maximum(cosines, 0.0)
        keyword_scores = np.fromiter(map(keyword_hits.get, candidates, repeat(0.0)), np.float64, len(candidates))
        if top_keyword > 0:
            keyword_scores = keyword_scores / top_keyword
        else:
            keyword_scores = np.zeros(len(candidates), dtype=np.float64)
        matches = len(keyword_hits)
        if use_vectors and 0 < matches <= FEW_KEYWORD_MATCHES and matches * 20 <= int(mask.sum()):
            # the query's words occur in only these few of many memories (an identifier, an error
            # code, a ticket number): exact evidence that a vector of a made-up word cannot give
            keyword_weight = max(keyword_weight, vector_weight)
        weights = (vector_weight if use_vectors else 0.0) + (keyword_weight if use_keywords else 0.0)
        fused = spread(vector_scores) if spreads(view.embedder_id) else vector_scores
        scores = (vector_weight * fused * use_vectors + keyword_weight * keyword_scores * use_keywords) / (
            weights or 1.0
        )
    boosts = config.importance_boost * (view.importance_at(slots) - 0.5)
    if config.recency_boost:
        age_days = np.maximum(now - view.updated_at(slots), 0.0) / 86400.0
        boosts = boosts + config.recency_boost * np.power(0.5, age_days / config.recency_half_life_days)
    near = closeness(text, view.created_at(slots), now)
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
