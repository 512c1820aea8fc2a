"""Answers from the database, in (project, memory id) keys: filters, keywords, vectors, hybrid.

The filters are the in-process ones (:class:`eventmem.core.query_rules.Filters`) plus a set of projects, applied
in SQL before either search takes its top ``k``. Keywords: a ``tsvector`` with a GIN index, ranked by
``ts_rank`` weighted by each word's rarity. Vectors: cosine over pgvector, exact while the filtered set holds at most
:data:`EXACT_UP_TO` memories (so answers are those of an exact scan, whatever order the rows came
in), else through the HNSW index (``vector_cosine_ops``) with iterative scans for filters. The fusion
is :func:`eventmem.service.search.hybrid_search`'s: linear (or reciprocal rank), the same floors for vector-only
hits, the same boost of few exact keyword matches, importance and recency nudges, ties by id.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.pq import TransactionStatus

from eventmem.core.events import KINDS
from eventmem.core.ids import iso_to_epoch
from eventmem.core.query_rules import (
    FEW_KEYWORD_MATCHES,
    RRF_K,
    TIME_BOOST,
    VECTOR_FLOOR,
    Filters,
    spread,
    spreads,
    unknown_words_floor,
)
from eventmem.core.timewords import closeness
from eventmem.core.words import STOPWORDS
from eventmem.embedders.embedder import Embedder
from eventmem.journal.config import Config, fusion_weights
from eventmem.projectors.postgres.targets import GLOBAL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EXACT_UP_TO", "Scored", "hybrid", "keyword_hits", "matching", "reading", "vector_hits", "visible_where"]

Key = tuple[str, str]
"""(project, memory id)"""
EXACT_UP_TO = 20_000
"""A vector search among at most this many memories scans them all (exact); above, HNSW."""
EF_SEARCH_MIN = 400
"""HNSW candidates kept while searching (``hnsw.ef_search``): at least this, else
:data:`EF_SEARCH_PER_HIT` per hit asked, at most :data:`EF_SEARCH_MAX`. Measured at 100,000 memories
(hashing vectors, the worst case of a graph index; ``tools/bench_scale.py``): recall@10 against exact
0.72 at 200 (22 ms), 0.81 at 400 (43 ms), 0.90 at 800 (60 ms)."""
EF_SEARCH_PER_HIT = 16
"""A hybrid search's depth of 50 candidates searches with 800: recall of its top 50 is the fusion's."""
EF_SEARCH_MAX = 1000
"""pgvector's own bound of ``hnsw.ef_search``."""
MAX_QUERY_WORDS = 16
DF_COUNTED_UP_TO = 10_000
"""A query word's memories are counted (for its rarity) up to this many: the count stays cheap, and a
word this common weighs little either way."""
RANK_NORMALIZATION = 33
"""``ts_rank``'s normalization: by 1 + log of the memory's length (1) and to rank / (rank + 1) (32);
chosen with ``tools/eval_postgres.py`` as the closest to the in-process BM25 ranking."""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Scored:
    project: str
    id: str
    score: float
    vector_score: float
    keyword_score: float


def reading(conn: Any) -> AbstractContextManager[Any]:
    """A transaction for a read, unless one is open already (one hybrid search is one transaction)."""
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return nullcontext()
    return conn.transaction()  # type: ignore[no-any-return]


def visible_where(
    projects: Sequence[str], filters: Filters, now: float | None, project: str | None = None
) -> tuple[str, list[object]]:
    """The SQL condition (on alias ``m``) for visible memories of ``projects`` passing ``filters``;
    ``project``: only that project's own memories and the global ones saved from it (as in-process)."""
    clauses = ["m.project = ANY(%s)", "m.expires_at > %s"]
    params: list[object] = [list(projects), time.time() if now is None else now]
    if project is not None:
        wanted = project.strip().lower()
        clauses.append(
            "((m.project <> %s AND lower(m.project) = %s) OR (m.project = %s AND lower(m.origin_project) = %s))"
        )
        params.extend([GLOBAL, wanted, GLOBAL, wanted])
    if not filters.include_superseded:
        clauses.append("NOT m.superseded")
    if filters.kinds:
        clauses.append("m.kind = ANY(%s)")
        params.append([k for k in filters.kinds if k in KINDS])
    if filters.scope in ("project", "global"):
        clauses.append("m.scope = %s")
        params.append(filters.scope)
    for number, clause in (
        (filters.min_importance, "m.importance >= %s"),
        (filters.max_importance, "m.importance <= %s"),
    ):
        if number is not None:
            clauses.append(clause)
            params.append(float(number))
    for value, clause in (
        (filters.created_after, "m.created_at >= %s"),
        (filters.created_before, "m.created_at < %s"),
        (filters.updated_after, "m.updated_at >= %s"),
        (filters.updated_before, "m.updated_at < %s"),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(iso_to_epoch(value))
    if filters.tags:
        clauses.append("m.tags @> %s::text[]")
        params.append(list(filters.tags))
    return " AND ".join(clauses), params


def matching(
    conn: Any, projects: Sequence[str], filters: Filters, now: float | None = None, *, project: str | None = None
) -> list[Key]:
    """Every visible memory passing ``filters``, by project and id."""
    where, params = visible_where(projects, filters, now, project)
    with reading(conn):
        rows = conn.execute(f"SELECT m.project, m.id FROM eventmem_memories m WHERE {where} ORDER BY 1, 2", params)
        return [(str(p), str(i)) for p, i in rows.fetchall()]


def count(
    conn: Any, projects: Sequence[str], filters: Filters, now: float | None = None, *, project: str | None = None
) -> int:
    where, params = visible_where(projects, filters, now, project)
    with reading(conn):
        row = conn.execute(f"SELECT count(*) FROM eventmem_memories m WHERE {where}", params).fetchone()
    return int(row[0]) if row is not None else 0


def query_words(text: str) -> list[str]:
    """The words a keyword search asks for: no stop words (unless there is nothing else), at most 16."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return ([w for w in words if w not in STOPWORDS] or words)[:MAX_QUERY_WORDS]


def _tsquery(words: Sequence[str]) -> tuple[str, list[object]]:
    return " || ".join(["plainto_tsquery('english', %s)"] * len(words)), list(words)


def keyword_hits(
    conn: Any,
    projects: Sequence[str],
    text: str,
    k: int,
    filters: Filters,
    now: float | None = None,
    *,
    project: str | None = None,
) -> list[tuple[Key, float]]:
    """The ``k`` best (key, rank) among the filtered memories holding a query word, best first: per
    word, ``ts_rank`` weighted by the word's rarity (BM25's idf, as the in-process index ranks), summed.

    The memories ranked are those holding one of the rarest query words, taken rarest first while
    together they are held by fewer than :data:`DF_COUNTED_UP_TO` memories (every word still adds its
    share to their rank); when even the rarest word is that common, those holding every word. Below
    that count every memory holding a query word is ranked, so small stores rank exactly as before;
    above it a search no longer ranks a hundred thousand rows for frequent words (seconds at 1M)."""
    words = query_words(text)
    if not words or k <= 0:
        return []
    where, params = visible_where(projects, filters, now, project)
    counted = ", ".join(
        [
            "(SELECT count(*) FROM (SELECT 1 FROM eventmem_memories m WHERE m.project = ANY(%s) "
            f"AND m.keywords @@ plainto_tsquery('english', %s) LIMIT {DF_COUNTED_UP_TO}) c)"
        ]
        * len(words)
    )
    with reading(conn):
        row = conn.execute(
            f"SELECT (SELECT count(*) FROM eventmem_memories m WHERE m.project = ANY(%s)), {counted}",
            [list(projects), *[value for word in words for value in (list(projects), word)]],
        ).fetchone()
        total = float(row[0])
        found = [float(n) for n in row[1:]]
        rare: list[str] = []  # the rarest words, while the memories holding them stay few
        held_by = 0.0
        for n, word in sorted(zip(found, words, strict=True)):
            if n >= DF_COUNTED_UP_TO or (rare and held_by + n > DF_COUNTED_UP_TO):
                break
            rare.append(word)
            held_by += n
        score = " + ".join(
            [
                "CASE WHEN m.keywords @@ plainto_tsquery('english', %s) "
                f"THEN %s * ts_rank(m.keywords, plainto_tsquery('english', %s), {RANK_NORMALIZATION}) ELSE 0 END"
            ]
            * len(words)
        )
        values: list[object] = []
        for word, n in zip(words, found, strict=True):
            values += [word, math.log(1 + (total - n + 0.5) / (n + 0.5)), word]
        if rare:  # any rarer word, each through the GIN index
            held = " || ".join(["plainto_tsquery('english', %s)"] * len(rare))
            held_params: list[object] = list(rare)
        else:  # every (common) word
            held, held_params = "plainto_tsquery('english', %s)", [" ".join(words)]
        sql = (
            f"SELECT m.project, m.id, {score} AS r FROM eventmem_memories m "
            f"WHERE m.keywords @@ ({held}) AND {where} ORDER BY r DESC, m.project, m.id LIMIT %s"
        )
        rows = conn.execute(sql, [*values, *held_params, *params, k]).fetchall()
    return [((str(p), str(i)), float(r)) for p, i, r in rows]


def holds_a_word(conn: Any, projects: Sequence[str], text: str) -> bool:
    """Whether a memory of ``projects`` holds one of the query's words (stop words aside)."""
    words = [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(text)) if w not in STOPWORDS]
    if not words:
        return False
    query, query_params = _tsquery(words)
    sql = f"SELECT EXISTS (SELECT 1 FROM eventmem_memories m WHERE m.project = ANY(%s) AND m.keywords @@ ({query}))"
    with reading(conn):
        row = conn.execute(sql, [list(projects), *query_params]).fetchone()
    return bool(row is not None and row[0])


def _vector(vector: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(map(repr, vector.astype("float64").tolist())) + "]"


def ef_search(k: int) -> int:
    """``hnsw.ef_search`` for a search of the ``k`` nearest."""
    return min(max(EF_SEARCH_MIN, EF_SEARCH_PER_HIT * k), EF_SEARCH_MAX)


def vector_hits(
    conn: Any,
    projects: Sequence[str],
    vector: npt.NDArray[np.float32],
    k: int,
    filters: Filters,
    now: float | None = None,
    *,
    exact: bool | None = None,
    project: str | None = None,
) -> list[tuple[Key, float]]:
    """The ``k`` nearest (key, cosine) among the filtered memories, best first (ties by key)."""
    if k <= 0:
        return []
    dim = int(vector.shape[0])
    where, params = visible_where(projects, filters, now, project)
    if exact is None:
        exact = count(conn, projects, filters, now, project=project) <= EXACT_UP_TO
    literal = _vector(vector)
    # the HNSW index is on embedding::vector(dim): ordering by the bare column scans every row
    column = "m.embedding" if exact else f"(m.embedding::vector({dim}))"
    sql = (
        f"SELECT m.project, m.id, 1 - ({column} <=> %s::vector({dim})) AS c FROM eventmem_memories m "
        f"WHERE m.embedding IS NOT NULL AND {where} "
        f"ORDER BY {column} <=> %s::vector({dim}) LIMIT %s"
    )
    with reading(conn):
        if not exact:
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search(k))])
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        rows = conn.execute(sql, [literal, *params, literal, k]).fetchall()
    hits = [((str(p), str(i)), float(c)) for p, i, c in rows]
    hits.sort(key=lambda hit: (-hit[1], hit[0]))
    return hits


def cosines(conn: Any, keys: Sequence[Key], vector: npt.NDArray[np.float32]) -> dict[Key, float]:
    """The cosine of each of these memories with ``vector``."""
    if not keys:
        return {}
    dim = int(vector.shape[0])
    sql = (
        f"SELECT m.project, m.id, 1 - (m.embedding <=> %s::vector({dim})) FROM eventmem_memories m "
        "JOIN unnest(%s::text[], %s::text[]) AS k(project, id) ON m.project = k.project AND m.id = k.id "
        f"WHERE m.embedding IS NOT NULL"
    )
    with reading(conn):
        rows = conn.execute(sql, [_vector(vector), [p for p, _ in keys], [i for _, i in keys]]).fetchall()
    return {(str(p), str(i)): float(c) for p, i, c in rows}


def _columns(conn: Any, keys: Sequence[Key]) -> dict[Key, tuple[float, float, float]]:
    """(importance, updated_at, created_at) of each memory."""
    sql = (
        "SELECT m.project, m.id, m.importance, m.updated_at, m.created_at FROM eventmem_memories m "
        "JOIN unnest(%s::text[], %s::text[]) AS k(project, id) ON m.project = k.project AND m.id = k.id"
    )
    with reading(conn):
        rows = conn.execute(sql, [[p for p, _ in keys], [i for _, i in keys]]).fetchall()
    return {(str(p), str(i)): (float(imp), float(upd), float(made)) for p, i, imp, upd, made in rows}


def _closeness(text: str, created: list[float], now: float) -> list[float] | None:
    import numpy as np

    near = closeness(text, np.asarray(created, np.float64), now)
    return None if near is None else [float(x) for x in near.tolist()]


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
    """Fuse vector and keyword candidates among the filtered memories; best first, at most ``limit``."""
    with reading(conn):
        return _hybrid(
            conn, projects, embedder, text, limit, filters, config or Config(), use_vectors, use_keywords, now, project
        )


def _hybrid(
    conn: Any,
    projects: Sequence[str],
    embedder: Embedder,
    text: str,
    limit: int,
    filters: Filters,
    config: Config,
    use_vectors: bool,
    use_keywords: bool,
    now: float | None,
    project: str | None,
) -> list[Scored]:
    now = time.time() if now is None else now
    searched = count(conn, projects, filters, now, project=project)
    if not searched or limit <= 0:
        return []
    depth = max(limit * 4, 50)
    query_vector = embedder.embed([text])[0] if use_vectors else None
    vector_hits_: dict[Key, float] = {}
    if query_vector is not None:
        vector_hits_ = dict(
            vector_hits(
                conn, projects, query_vector, depth, filters, now, project=project, exact=searched <= EXACT_UP_TO
            )
        )
    keyword_hits_: dict[Key, float] = {}
    if use_keywords:
        keyword_hits_ = dict(keyword_hits(conn, projects, text, depth, filters, now, project=project))
    matched: set[Key] | dict[Key, float] = keyword_hits_
    strict = unknown_words_floor(embedder.model_id)
    if not use_keywords and any(c < strict for c in vector_hits_.values()):
        matched = {key for key, _ in keyword_hits(conn, projects, text, depth, filters, now, project=project)}
    floor = VECTOR_FLOOR
    if any(c < strict for c in vector_hits_.values()) and not (matched or holds_a_word(conn, projects, text)):
        floor = strict
    noise = {key for key, c in vector_hits_.items() if c < floor and key not in matched}
    candidates = sorted((vector_hits_.keys() | keyword_hits_.keys()) - noise)
    if not candidates:
        return []
    vector_weight, keyword_weight = fusion_weights(config, embedder.model_id)
    if config.fusion == "rrf":
        vector_rank = {key: r for r, key in enumerate(sorted(vector_hits_, key=lambda s: -vector_hits_[s]))}
        keyword_rank = {key: r for r, key in enumerate(sorted(keyword_hits_, key=lambda s: -keyword_hits_[s]))}
        scores = {
            key: (
                vector_weight / (RRF_K + vector_rank.get(key, math.inf) + 1)
                + keyword_weight / (RRF_K + keyword_rank.get(key, math.inf) + 1)
            )
            * (RRF_K + 1)
            for key in candidates
        }
        vector_scores = {key: vector_hits_.get(key, 0.0) for key in candidates}
        keyword_scores = {key: keyword_hits_.get(key, 0.0) for key in candidates}
    else:
        top_keyword = max(keyword_hits_.values(), default=0.0)
        others: dict[Key, float] = {}
        if query_vector is not None:
            others = cosines(conn, [key for key in keyword_hits_ if key not in vector_hits_], query_vector)
        cosine_of = others | vector_hits_
        vector_scores = {key: max(cosine_of.get(key, 0.0), 0.0) for key in candidates}
        keyword_scores = {
            key: (keyword_hits_.get(key, 0.0) / top_keyword if top_keyword > 0 else 0.0) for key in candidates
        }
        matches = len(keyword_hits_)
        if use_vectors and 0 < matches <= FEW_KEYWORD_MATCHES and matches * 20 <= searched:
            keyword_weight = max(keyword_weight, vector_weight)
        weights = (vector_weight if use_vectors else 0.0) + (keyword_weight if use_keywords else 0.0)
        fused = dict(vector_scores)
        if spreads(embedder.model_id):  # (a model's cosines scaled to the query's best, as in-process)
            import numpy as np

            scaled = spread(np.fromiter((vector_scores[key] for key in candidates), np.float64, len(candidates)))
            fused = dict(zip(candidates, scaled.tolist(), strict=True))
        scores = {
            key: (vector_weight * fused[key] * use_vectors + keyword_weight * keyword_scores[key] * use_keywords)
            / (weights or 1.0)
            for key in candidates
        }
    columns = _columns(conn, candidates)
    near = _closeness(text, [columns.get(key, (0.5, now, now))[2] for key in candidates], now)
    totals: dict[Key, float] = {}
    for n, key in enumerate(candidates):
        importance, updated, _ = columns.get(key, (0.5, now, now))
        boost = config.importance_boost * (importance - 0.5)
        if config.recency_boost:
            age_days = max(now - updated, 0.0) / 86400.0
            boost += config.recency_boost * 0.5 ** (age_days / config.recency_half_life_days)
        if near is not None:  # the question names a time: notes of then rise (as in-process)
            boost += TIME_BOOST * near[n]
        totals[key] = scores[key] + boost
    order = sorted(candidates, key=lambda key: (-totals[key], key[1], key[0]))[:limit]
    return [Scored(key[0], key[1], totals[key], vector_scores[key], keyword_scores[key]) for key in order]
