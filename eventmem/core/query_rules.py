"""What a query may ask (:class:`Filters`) and the rules that fuse an index's answers, shared by
every index backend (the in-process search and PostgreSQL's). Pure: no IO."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING

import msgspec

from eventmem.core.errors import InvalidInput
from eventmem.core.events import KINDS, SCOPES
from eventmem.core.ids import iso_to_epoch
from eventmem.core.validation import check_count, check_length, check_number, refusal, shown

if TYPE_CHECKING:  # (numpy is imported by what calls spread(): a server answers initialize before it)
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "FEW_KEYWORD_MATCHES",
    "FEW_TO_FUSE",
    "NEIGHBOUR_SHARE",
    "NEIGHBOUR_SOURCES",
    "NEIGHBOUR_STEPS",
    "RRF_K",
    "SITTING_SECONDS",
    "TIME_BOOST",
    "VECTOR_FLOOR",
    "Filters",
    "fuse",
    "fuse_few",
    "lent_to",
    "spread",
    "spreads",
    "unknown_words_floor",
    "with_neighbours",
]

RRF_K = 60
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
:func:`eventmem.core.timewords.closeness`); chosen on the hard evaluation's temporal questions (dev)."""

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


NEIGHBOUR_SHARE = 0.25
"""The share of a memory's score its neighbours get (see :func:`with_neighbours`): a quarter, so that a
neighbour rises among the answers without passing a memory that matches the question as well."""
NEIGHBOUR_SOURCES = 3
"""Only the best few of a query's candidates lend their neighbours a share (the top of a page)."""
NEIGHBOUR_STEPS = 2
"""How many memories on each side of a lender are its neighbours; the ``n``-th closest gets ``1/n`` of
the share."""
SITTING_SECONDS = 600.0
"""Two memories saved one after the other at most this far apart were saved in one sitting: each is
context for the other (a reply and its question, the cause noted after the error, the next step)."""


def fuse(
    candidates: Sequence[int],
    vector_hits: Mapping[int, float],
    keyword_hits: Mapping[int, float],
    *,
    fusion: str,
    weights: tuple[float, float],
    spread_cosines: bool,
    searched: int,
    cosines: Mapping[int, float] | None = None,
    use_vectors: bool = True,
    use_keywords: bool = True,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The fused score of each of ``candidates`` (and its vector and keyword parts), from the vector
    search's hits (``vector_hits``: slot -> cosine, best first or not) and the keyword search's
    (``keyword_hits``: slot -> BM25, higher better), before the importance, recency and time nudges.

    ``fusion``: ``linear`` (``weights`` = (vector, keyword) times the cosine, scaled to the query's
    best when ``spread_cosines``, and BM25 scaled to the query's best) or ``rrf`` (reciprocal rank).
    ``cosines``: the cosine of candidates the vector search did not reach (keyword hits);
    ``searched``: how many memories the query was asked among. Pure: the in-process search and a
    database's use the same rules."""
    import numpy as np  # (here: a server answers initialize before numpy is imported)

    vector_weight, keyword_weight = weights
    count = len(candidates)
    if fusion == "rrf":
        vector_rank = {s: r for r, s in enumerate(sorted(vector_hits, key=lambda s: -vector_hits[s]))}
        keyword_rank = {s: r for r, s in enumerate(sorted(keyword_hits, key=lambda s: -keyword_hits[s]))}
        absent = math.inf  # 1 / inf = 0: a list that does not hold the slot adds nothing
        by_vector = np.array([RRF_K + vector_rank.get(s, absent) + 1 for s in candidates], dtype=np.float64)
        by_keyword = np.array([RRF_K + keyword_rank.get(s, absent) + 1 for s in candidates], dtype=np.float64)
        scores = (vector_weight / by_vector + keyword_weight / by_keyword) * (RRF_K + 1)
        vector_scores = np.array([vector_hits.get(s, 0.0) for s in candidates], dtype=np.float64)
        keyword_scores = np.array([keyword_hits.get(s, 0.0) for s in candidates], dtype=np.float64)
        return scores, vector_scores, keyword_scores
    top_keyword = max(keyword_hits.values(), default=0.0)
    if count <= FEW_TO_FUSE and not spread_cosines:
        parts = fuse_few(
            candidates,
            vector_hits,
            cosines or {},
            keyword_hits,
            top_keyword,
            weights,
            searched,
            use_vectors,
            use_keywords,
        )
        return np.array(parts[0], np.float64), np.array(parts[1], np.float64), np.array(parts[2], np.float64)
    cosine_of = {**(cosines or {}), **vector_hits}
    found = np.fromiter(map(cosine_of.get, candidates, repeat(0.0)), np.float64, count)
    vector_scores = np.maximum(found, 0.0)
    keyword_scores = np.fromiter(map(keyword_hits.get, candidates, repeat(0.0)), np.float64, count)
    if top_keyword > 0:
        keyword_scores = keyword_scores / top_keyword
    else:
        keyword_scores = np.zeros(count, dtype=np.float64)
    matches = len(keyword_hits)
    if use_vectors and 0 < matches <= FEW_KEYWORD_MATCHES and matches * 20 <= searched:
        # the query's words occur in only these few of many memories (an identifier, an error
        # code, a ticket number): exact evidence that a vector of a made-up word cannot give
        keyword_weight = max(keyword_weight, vector_weight)
    total = (vector_weight if use_vectors else 0.0) + (keyword_weight if use_keywords else 0.0)
    fused = spread(vector_scores) if spread_cosines else vector_scores
    scores = (vector_weight * fused * use_vectors + keyword_weight * keyword_scores * use_keywords) / (total or 1.0)
    return scores, vector_scores, keyword_scores


FEW_TO_FUSE = 16
"""Up to this many candidates (the new neighbours of a sitting) are fused in Python: numpy's calls
would cost more than the arithmetic, which is the same, operation for operation, in float64."""


def fuse_few(
    candidates: Sequence[int],
    vector_hits: Mapping[int, float],
    cosines: Mapping[int, float],
    keyword_hits: Mapping[int, float],
    top_keyword: float,
    weights: tuple[float, float],
    searched: int,
    use_vectors: bool,
    use_keywords: bool,
) -> tuple[list[float], list[float], list[float]]:
    """:func:`fuse`'s linear fusion of raw cosines in Python floats, each value as numpy computes it
    (``np.maximum(c, 0.0)`` is ``0.0`` for ``-0.0`` and keeps a NaN: so does the test here), for a
    few candidates (at most :data:`FEW_TO_FUSE`: the new neighbours of a sitting); ``top_keyword``:
    the best of ``keyword_hits``' values (0 without any). Pure."""
    vector_weight, keyword_weight = weights
    found = [vector_hits[s] if s in vector_hits else cosines.get(s, 0.0) for s in candidates]
    vector_part = [0.0 if c <= 0.0 else c for c in found]
    keyword_part = [keyword_hits.get(s, 0.0) / top_keyword if top_keyword > 0 else 0.0 for s in candidates]
    matches = len(keyword_hits)
    if use_vectors and 0 < matches <= FEW_KEYWORD_MATCHES and matches * 20 <= searched:
        keyword_weight = max(keyword_weight, vector_weight)
    total = ((vector_weight if use_vectors else 0.0) + (keyword_weight if use_keywords else 0.0)) or 1.0
    scores = [
        (vector_weight * v * use_vectors + keyword_weight * k * use_keywords) / total
        for v, k in zip(vector_part, keyword_part, strict=True)
    ]
    return scores, vector_part, keyword_part


def with_neighbours(
    scores: npt.NDArray[np.float64],
    pairs: npt.NDArray[np.int64] | Sequence[tuple[int, int, int]],
    share: float = NEIGHBOUR_SHARE,
) -> npt.NDArray[np.float64]:
    """``scores`` plus, for each candidate, the best share lent to it by its neighbours among the
    query's best (the memories saved just before and after it in one sitting): ``share`` of the
    lender's score, divided by the step between them, but never up to the lender's own score (a
    neighbour stays just below it: the memory that matches keeps its rank, and MRR with it).
    ``pairs``: rows ``(i, j, step)``, candidate ``j`` lending to candidate ``i``, ``step`` memories
    away (1: saved right before or after it). Pure; :func:`lent_to` over Python floats."""
    if not len(pairs) or share == 0:
        return scores
    import numpy as np

    rows = pairs.tolist() if not isinstance(pairs, Sequence) else pairs
    return np.array(lent_to(scores.tolist(), rows, share), np.float64)


def lent_to(values: list[float], pairs: Sequence[Sequence[int]], share: float = NEIGHBOUR_SHARE) -> list[float]:
    """:func:`with_neighbours` over a list of scores (a new list; ``values`` itself unchanged), each
    value as numpy adds it."""
    if not pairs or share == 0:
        return values
    context: dict[int, float] = {}
    for borrower, lender, step in pairs:
        lent = share * max(values[lender], 0.0) / step
        if values[borrower] < values[lender]:  # (a neighbour scored above its lender already may rise further)
            lent = min(lent, math.nextafter(values[lender], -math.inf) - values[borrower])
        context[borrower] = max(context.get(borrower, 0.0), lent, 0.0)
    out = list(values)
    for borrower, lent in context.items():
        out[borrower] += lent
    return out


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
