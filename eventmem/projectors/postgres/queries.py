"""Answers from the database, in (project, memory id) keys: filters, keywords, vectors.

The filters are the in-process ones (:class:`eventmem.core.query_rules.Filters`) plus a set of projects, applied
in SQL before either search takes its top ``k``. Keywords: BM25 as the in-process index computes it, from
statistics kept in the database (:mod:`.keywords`). Vectors: scored as in-process (the inner product of
a memory's half-precision vector with the query), exact while a filter passes at most :data:`SCANNED_UP_TO`
memories or a project holds at most :data:`EXACT_UP_TO` (so answers are those of an exact scan, whatever
order the rows came in; the scan reads the narrow copy of each memory, ``eventmem_searched``), else through
the embedder's vector index on the narrow copies (a learned model's HNSW graph of their half-precision
vectors, the built-in embedder's inverted file of their semantic part) with iterative scans for filters. The fusion is
the in-process one itself, over these lists (:mod:`eventmem.service.database_search`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from psycopg.pq import TransactionStatus

from eventmem.core.events import KINDS
from eventmem.core.ids import iso_to_epoch
from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import semantic_dims
from eventmem.projectors.postgres import keywords
from eventmem.projectors.postgres.targets import GLOBAL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EXACT_UP_TO",
    "PLANNED_EACH_TIME",
    "SCANNED_UP_TO",
    "SEARCHED",
    "Scored",
    "columns",
    "cosines",
    "count",
    "counted_rows_of",
    "counted_vector_query",
    "keyword_hits",
    "learned",
    "matching",
    "memories_held",
    "narrow_graph_order",
    "reading",
    "semantic_order",
    "vector_hits",
    "visible_where",
]

Key = tuple[str, str]
"""(project, memory id)"""
Statement = tuple[str, list[object]]
"""A statement and its parameters (an empty statement: none to send)."""
EXACT_UP_TO = 2_000
"""Without a filter, a vector search among projects holding at most this many memories scans them
all (exact); above, HNSW (measured: the narrow rows' exact scan of 3,000 took twice HNSW's time). And
the statistics' query counts the memories a filter passes up to this many and one more (the fusion
asks whether there are more than a few keyword hits times 20:
:data:`eventmem.core.query_rules.FEW_KEYWORD_MATCHES`)."""
SCANNED_UP_TO = 10_000
"""A vector search among the memories a filter passes scans them all (exact) while they are at most
this many, from the narrow copy of the memories (``eventmem_searched``, schema 7, found through its
own indexes for a selective filter); above, HNSW with an iterative scan. Without a filter, the
project's size decides, up to :data:`EXACT_UP_TO`. Measured at 21,000 memories on a loaded 2-core
machine (``tools/bench_postgres.py``; docs/bench/postgres-limits.md): the narrow rows' exact scan of
1,600 and 4,800 filtered memories took a third to a fifth of the wide rows' exact scan and of the
iterative HNSW scan; of every memory (an exact scan of 21,000), about as long as or longer than HNSW
at ``ef_search`` 800, and at 3,000 memories twice as long."""
SEARCHED = "eventmem_searched"
"""The narrow copy of each memory a scan reads (its key, filtered columns and vector), kept by
triggers on ``eventmem_memories`` (schema 7)."""
SORTING_BACK = "SELECT set_config('enable_sort', 'on', true)"
"""Run after an HNSW search (see :func:`vector_query`)."""
PLANNED_EACH_TIME = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)"
"""Sent at the start of a read's own transaction (:func:`one_read`): a statement psycopg prepared
(on its fifth run) is planned for its parameters each time, never by a generic plan. A recall sends
the same statements for projects of very different sizes (its project, the global memory), and
PostgreSQL's generic plans for them cost more than planning: measured at 20,000 memories (built-in
embedder, the server backend's CPU time a recall, p50 of 60 and of 80, the two alternated in one
process): 19.3 / 19.1 -> 15.9 / 14.0 ms without a filter, 18.5 / 22.3 -> 12.0 / 12.2 ms with a tag,
22.6 / 18.0 -> 16.3 / 17.5 with a type, 15.7 / 17.1 -> 17.3 / 16.2 with the scope. One statement, the
empty global memory's vector list, took 2.9-5.2 ms by its generic plan and 0.5 ms planned for its
parameters; a tag's keyword list 6 ms and 1.9 ms."""
EF_SEARCH_MIN = 400
"""HNSW candidates kept while searching (``hnsw.ef_search``): at least this, else
:data:`EF_SEARCH_PER_HIT` per hit asked, at most :data:`EF_SEARCH_MAX`. Measured at 100,000 memories
(hashing vectors, the worst case of a graph index; ``tools/bench_scale.py``): recall@10 against exact
0.72 at 200 (22 ms), 0.81 at 400 (43 ms), 0.90 at 800 (60 ms)."""
EF_SEARCH_PER_HIT = 16
"""A hybrid search's depth of 50 candidates searches with 800: recall of its top 50 is the fusion's."""
EF_SEARCH_MAX = 1000
"""pgvector's own bound of ``hnsw.ef_search``."""
EF_SEARCH_PER_HIT_LEARNED = 8
""":data:`EF_SEARCH_PER_HIT` for a learned model's vectors (every embedder but the built-in hashing
one, :data:`HASHED`): a hybrid search's depth of 50 searches with 400 (the floor), where hashing
vectors search with 800. Measured with MiniLM at 20,000 memories (``tools/bench_scale.py``, top 10,
50 queries): recall@10 against exact 0.962 at 200, 0.992 at 400, 0.998 at 800; real embeddings
cluster, and a graph finds their neighbours with fewer candidates than near-random hashed ones."""
HASHED = "hashing"
"""The built-in embedder's ``model_id`` (its first part): near-random vectors, the hard case of HNSW."""
SEMANTIC_CANDIDATES_MIN = 400
SEMANTIC_CANDIDATES_PER_HIT = 12
"""The built-in embedder's vectors (those with a semantic part, :func:`semantic_dims`) are searched
through an index of that part alone (128 dimensions that cluster as a model's do, where the whole
vectors are near-random), then the candidates it finds are ranked by the whole vector, exactly: the
candidates kept are 12 per hit asked, at least 400 (a top 10) and at most :data:`EF_SEARCH_MAX` (a
hybrid search's depth of 50: 600). Measured at 20,000 memories (``hashing-v4-384``, 40 queries, a
loaded 2-core machine, CPU time of the server's backend), through an HNSW index of the part: the
whole vectors' HNSW at 800 took 9.2 ms for recall against exact 0.978 of the top 10 and 0.971 of the
top 50; the semantic part's at 400 took 3.3 ms for 0.983 and 0.943, at 600 4.6 ms for 0.988 and
0.969, at 800 6.3 ms for 0.990 and 0.979 (docs/bench/postgres-limits.md). The index of the part is
an inverted file now (:data:`IVF_PROBES_PER_ROOT`)."""
IVF_PROBES_PER_ROOT = 8
"""A search of the semantic part's inverted file reads this many of its lists times the square root of
their number (``ivfflat.probes``; all of them when that is more): a share that falls as the index
grows (its lists are the square root of the memories it was made for: 95 of 141 at 20,000 memories,
143 of 317 at 100,000, 253 of 1,000 at a million), because more, smaller lists cluster the part's
vectors more finely. The lists' vectors are compared with the query's part exactly, in the index's
pages, and the nearest of them ranked by the whole vector. The part's vectors cluster loosely: a
search must read a large share of them, which an inverted file does at a fraction of a graph's cost a
vector and is built and written far faster. Measured on this machine (``docs/bench/postgres-limits.md``,
"An inverted file for the built-in embedder's semantic part"; recall@10 against the exact ranking of
every whole vector): at 20,000 memories reading half the lists found 0.982 in 3.2 ms (HNSW at
``ef_search`` 600: 0.985 in 4.4 ms); at 100,000, a third 0.963 in 6.7 ms and half 0.997 in 12.3 ms
(HNSW 0.985 in 17.0 ms); at a million (``tools/bench_scale.py``'s sweep), a fifth 0.962 in 45 ms and
0.954 under a tag held by 8% in 75 ms, three tenths 0.986 in 83 ms and 0.976 in 104 ms, half 0.996
in 170 ms (HNSW, the best it was built: 0.84 in 63 ms)."""
IVF_PROBES_PER_ROOT_FILTERED = 12
""":data:`IVF_PROBES_PER_ROOT` of a search a narrow filter narrows (380 of 1,000 lists at a million
memories): the memories passing it are fewer in each list read, and the nearest of them are as likely
to lie in a list not read. A filter passing a larger share of the memories reads fewer, down to the
unfiltered number (:func:`_probes_per_root`). Measured at a million memories under a tag held by 8%
(``tools/bench_scale.py``, two builds of the index): reading 253 lists found 0.9505 of the top 10;
300 found 0.976 in both builds (78 and 104 ms), 400 0.986 and 0.98 (104 and 165 ms)."""
LISTS_OPTION = "substring(o FROM '^lists=([0-9]+)$')::int"
"""An inverted file's lists, from one of its index's options ``o`` (``NULL`` for any other option)."""
SEMANTIC_LISTS = (
    f"(SELECT coalesce(max({LISTS_OPTION}), 1) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid CROSS JOIN unnest(c.reloptions) AS o "
    f"WHERE i.indrelid = '{SEARCHED}'::regclass)"
)
"""The lists of the semantic part's inverted file, as its index was made (the catalog's options of
the narrow copies' indexes; 1 when there is none)."""


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


class OneRead:
    """What :func:`one_read` yields: :meth:`commit` sends the transaction's ``COMMIT`` in the pipeline,
    with what was sent before it (read the answers after the block)."""

    def __init__(self, conn: Any, own: bool) -> None:
        self.conn = conn
        self.open = own
        """The transaction is this read's own, and its ``COMMIT`` not sent yet."""

    def commit(self) -> None:
        if self.open:
            self.conn.execute("COMMIT")
            self.open = False


@contextmanager
def one_read(conn: Any) -> Iterator[OneRead]:
    """A read transaction in a pipeline whose ``BEGIN`` goes with the block's first statements and
    whose ``COMMIT`` with its last (:meth:`OneRead.commit`, else at the end of the block): psycopg
    waits for the answer to a ``BEGIN`` of its own and to each ``COMMIT``, a round trip each. Its
    statements are planned for their parameters (:data:`PLANNED_EACH_TIME`). Inside a transaction
    already, only the pipeline."""
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        with conn.pipeline():
            yield OneRead(conn, False)
        return
    conn.autocommit = True  # (the statements below are the transaction's own)
    read = OneRead(conn, True)
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            conn.execute(PLANNED_EACH_TIME)
            yield read
            read.commit()
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except Exception:  # (a broken connection: its caller closes it)
                pass
        raise
    finally:
        if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
            conn.autocommit = False


def _kind_and_scope(filters: Filters, prefix: str, clauses: list[str], params: list[object]) -> None:
    """Add the conditions of ``filters``' types and scope, on the columns ``kind`` and ``scope`` named
    with ``prefix``: the rows' own (:func:`visible_where`) or their counts' (:func:`lasting_count`),
    which must pass the same memories."""
    if filters.kinds:
        clauses.append(f"{prefix}kind = ANY(%s)")
        params.append([k for k in filters.kinds if k in KINDS])
    if filters.scope in ("project", "global"):
        clauses.append(f"{prefix}scope = %s")
        params.append(filters.scope)


_GLOBAL_ROW = "(m.project = %s OR m.project ^@ %s)"
"""Whether a row (alias ``m``) is of a global journal (:func:`~eventmem.projectors.postgres.targets.is_global`;
its parameters ``GLOBAL`` and ``GLOBAL + "-"``)."""


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
            f"((NOT {_GLOBAL_ROW} AND lower(m.project) = %s) OR ({_GLOBAL_ROW} AND lower(m.origin_project) = %s))"
        )
        params.extend([GLOBAL, GLOBAL + "-", wanted, GLOBAL, GLOBAL + "-", wanted])
    if not filters.include_superseded:
        clauses.append("NOT m.superseded")
    _kind_and_scope(filters, "m.", clauses, params)
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
    conn: Any,
    projects: Sequence[str],
    filters: Filters,
    now: float | None = None,
    *,
    project: str | None = None,
    up_to: int | None = None,
) -> int:
    """The visible memories passing ``filters`` (``up_to``: counted up to that many at most)."""
    where, params = visible_where(projects, filters, now, project)
    sql = f"SELECT 1 FROM {SEARCHED} m WHERE {where}"
    if up_to is not None:
        sql += " LIMIT %s"
        params.append(up_to)
    with reading(conn):
        row = conn.execute(f"SELECT count(*) FROM ({sql}) c", params).fetchone()
    return int(row[0]) if row is not None else 0


def memories_held(conn: Any) -> int:
    """The memories every project holds, by the sync's own counts (no scan; in the caller's transaction)."""
    row = conn.execute("SELECT coalesce(sum(memories), 0)::bigint FROM eventmem_projects").fetchone()
    return int(row[0]) if row is not None else 0


def keyword_hits(
    conn: Any,
    projects: Sequence[str],
    text: str,
    k: int,
    filters: Filters,
    now: float | None = None,
    *,
    project: str | None = None,
    beside_vectors: bool = False,
) -> list[tuple[Key, float]]:
    """The ``k`` best (key, BM25 score) among the filtered memories, best first: each project's
    memories ranked as its in-process keyword index ranks them (:mod:`.keywords`), with its own
    statistics (several projects: their lists merged by score, ties by key)."""
    if k <= 0:
        return []
    found: list[tuple[Key, float]] = []
    with reading(conn):
        for one in projects:
            where, params = visible_where([one], filters, now, project)
            found += [
                ((one, row[0]), row[1])
                for row in keywords.ranked(conn, one, text, k, where, params, beside_vectors=beside_vectors)
            ]
    if len(projects) > 1:
        found.sort(key=lambda hit: (-hit[1], hit[0]))
    return found[:k]


def holds_a_word(conn: Any, projects: Sequence[str], text: str) -> bool:
    """Whether a memory of ``projects`` holds one of the query's words (stop words aside)."""
    with reading(conn):
        return any(keywords.holds_a_word(conn, one, text) for one in projects)


def vector_literal(vector: npt.NDArray[np.float32]) -> str:
    return _vector(vector)


def _vector(vector: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(map(repr, vector.astype("float64").tolist())) + "]"


def learned(model: str) -> bool:
    """Whether the embedder ``model`` (its ``model_id``) is a learned model, not the built-in hashing one."""
    return model.split("-", 1)[0] != HASHED


def ef_search(k: int, model: str | None = None) -> int:
    """``hnsw.ef_search`` for a search of the ``k`` nearest among vectors of the embedder ``model``
    (its ``model_id``; ``None``: not known, searched as hashing vectors are, the wider search)."""
    if model is not None and semantic_dims(model):
        return min(max(SEMANTIC_CANDIDATES_MIN, SEMANTIC_CANDIDATES_PER_HIT * k), EF_SEARCH_MAX)
    per_hit = EF_SEARCH_PER_HIT_LEARNED if model is not None and learned(model) else EF_SEARCH_PER_HIT
    return min(max(EF_SEARCH_MIN, per_hit * k), EF_SEARCH_MAX)


Row = tuple[Key, float, float, float, float]
"""(key, cosine or score, importance, updated_at, created_at): a hit with the columns the fusion reads."""


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
    model: str | None = None,
) -> list[tuple[Key, float]]:
    """The ``k`` nearest (key, cosine) among the filtered memories, best first (ties by key);
    ``model``: the embedder's ``model_id`` (:func:`ef_search`)."""
    rows = vector_rows(conn, projects, vector, k, filters, now, exact=exact, project=project, model=model)
    return [(row[0], row[1]) for row in rows]


def vector_rows(
    conn: Any,
    projects: Sequence[str],
    vector: npt.NDArray[np.float32],
    k: int,
    filters: Filters,
    now: float | None = None,
    *,
    exact: bool | None = None,
    project: str | None = None,
    model: str | None = None,
) -> list[Row]:
    """:func:`vector_hits` with each memory's importance, update and creation times."""
    if k <= 0:
        return []
    if exact is None:
        bound = SCANNED_UP_TO if narrows(filters, project) else EXACT_UP_TO
        exact = count(conn, projects, filters, now, project=project, up_to=bound + 1) <= bound
    setting, sql, values = vector_query(projects, vector, k, filters, now, exact=exact, project=project, model=model)
    with reading(conn):
        if setting[0]:
            conn.execute(*setting)
        found = conn.execute(sql, values).fetchall()
        if setting[0]:
            conn.execute(SORTING_BACK)
        return vector_rows_of(found)


def vector_query(
    projects: Sequence[str],
    vector: npt.NDArray[np.float32],
    k: int,
    filters: Filters,
    now: float | None,
    *,
    exact: bool,
    project: str | None = None,
    literal: str | None = None,
    model: str | None = None,
) -> tuple[Statement, str, list[object]]:
    """What :func:`vector_rows` runs: the settings of the index searched, for its transaction (none
    when exact), and the query with its parameters."""
    dim = int(vector.shape[0])
    where, params = visible_where(projects, filters, now, project)
    literal = _vector(vector) if literal is None else literal
    # an HNSW index is on an expression of the vector (narrow_graph_order): ordering by the bare column
    # scans every row (an exact scan reads the narrow rows of eventmem_searched). The
    # score is the in-process index's: the inner product of the half-precision vector (its float16
    # code) with the query (the vectors are of unit length: their cosine), so an exact scan and HNSW
    # give one memory the same score
    part = 0 if exact or model is None else semantic_dims(model)
    if part:
        # the candidates nearest by the semantic part (its inverted file on the narrow rows), ranked
        # by the whole vector: the exact scan's score and order among them
        whole = f"s.embedding <#> %s::halfvec({dim})"
        sql = (
            f"SELECT s.project, s.id, -({whole}) AS c, s.importance, s.updated_at, s.created_at FROM ("
            f"SELECT m.project, m.id, m.embedding, m.importance, m.updated_at, m.created_at FROM {SEARCHED} m "
            f"WHERE m.embedding IS NOT NULL AND {where} ORDER BY {semantic_order(dim, part)} <#> "
            f"subvector(%s::halfvec({dim}), {dim - part + 1}, {part}) LIMIT %s) s ORDER BY {whole} LIMIT %s"
        )
        candidates = ef_search(k, model)
        setting = _semantic_setting(k, model, _probes_per_root(projects, filters, project))
        return setting, sql, [literal, *params, literal, candidates, literal, k]
    if exact:
        table, order = SEARCHED, f"m.embedding <#> %s::halfvec({dim})"
    elif model is not None and learned(model):
        # a learned model's graph of the narrow copies' half-precision vectors, by inner product (the
        # vectors are of unit length: the cosine's order), as the score is computed
        table, order = SEARCHED, f"{narrow_graph_order(dim)} <#> %s::halfvec({dim})"
    else:  # (an embedder of neither kind, or not named: the graph of the memories' whole vectors)
        table, order = "eventmem_memories", f"(m.embedding::vector({dim})) <=> %s::vector({dim})"
    sql = (
        f"SELECT m.project, m.id, -(m.embedding::halfvec({dim}) <#> %s::halfvec({dim})) AS c, m.importance, "
        f"m.updated_at, m.created_at FROM {table} m WHERE m.embedding IS NOT NULL AND {where} "
        f"ORDER BY {order} LIMIT %s"
    )
    # (one statement: it may be prepared, and sent in a pipeline). Sorting is off for the query: the
    # planner otherwise sorts every row a filter passes (measured at 20,000 memories: 243 ms, the
    # HNSW index unused); :data:`SORTING_BACK` turns it on again for the rest of the transaction.
    return ("", []) if exact else (_hnsw_setting(k, model), []), sql, [literal, *params, literal, k]


def _probes_per_root(projects: Sequence[str], filters: Filters, project: str | None) -> Statement:
    """The lists a search of the semantic part's inverted file reads, per square root of their number
    (an SQL expression and its parameters): :data:`IVF_PROBES_PER_ROOT` without a filter;
    :data:`IVF_PROBES_PER_ROOT_FILTERED` with one, or, when the lasting memories it passes are
    counted (:func:`lasting_count`), the unfiltered number divided by the square root of the share of
    the projects' memories they are, up to the filtered one: a filter's candidates lie as deep among
    every memory's as it is narrow, so a filter passing most memories reads about the lists no filter
    reads (a scope or the common types; measured at 20,000 and 100,000 memories in
    ``docs/bench/postgres-limits.md``), and one passing a small share the filtered number."""
    if not narrows(filters, project):
        return str(IVF_PROBES_PER_ROOT), []
    lasting = lasting_count(projects, filters, project)
    if lasting is None:
        return str(IVF_PROBES_PER_ROOT_FILTERED), []
    held = "(SELECT coalesce(sum(p.memories), 0) FROM eventmem_projects p WHERE p.project = ANY(%s))"
    share = f"least(1.0, ({lasting[0]})::float8 / greatest({held}, 1))"
    return (
        f"least({IVF_PROBES_PER_ROOT_FILTERED}, {IVF_PROBES_PER_ROOT} / sqrt(greatest({share}, 1e-6)))",
        [*lasting[1], list(projects)],
    )


def _semantic_setting(k: int, model: str | None, per_root: Statement) -> Statement:
    """The settings of a search of the semantic part's inverted file: ``per_root`` times the square
    root of its lists (:func:`_probes_per_root`), read on (an iterative scan) while a filter leaves
    fewer candidates than asked for; and HNSW's, for a database whose graph of the part, made by an
    earlier version, is not dropped yet."""
    return (
        "SELECT set_config('ivfflat.probes', "
        f"(SELECT least(l, ceil({per_root[0]} * sqrt(l)))::int FROM {SEMANTIC_LISTS} AS s(l))::text, true), "
        "set_config('ivfflat.iterative_scan', 'relaxed_order', true), "
        + _hnsw_setting(k, model).removeprefix("SELECT "),
        per_root[1],
    )


def _hnsw_setting(k: int, model: str | None) -> str:
    return (
        f"SELECT set_config('hnsw.ef_search', '{int(ef_search(k, model))}', true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('enable_sort', 'off', true)"
    )


def narrow_graph_order(dim: int, alias: str = "m") -> str:
    """A narrow row's vector as a learned model's HNSW graph holds it (the index's expression, without
    ``alias``): the narrow copy's half precision, of its dimensions."""
    prefix = f"{alias}." if alias else ""
    return f"({prefix}embedding::halfvec({dim}))"


def semantic_order(dim: int, part: int, alias: str = "m") -> str:
    """The semantic part of a narrow row's vector (its last ``part`` of ``dim`` dimensions:
    :func:`semantic_dims`), as its HNSW index holds it (the index's expression, without ``alias``)."""
    prefix = f"{alias}." if alias else ""
    return f"(subvector({prefix}embedding, {dim - part + 1}, {part})::halfvec({part}))"


def narrows(filters: Filters, project: str | None = None) -> bool:
    """Whether ``filters`` (or ``project``) pass fewer memories than every visible one."""
    return bool(
        project is not None
        or filters.kinds
        or filters.tags
        or filters.scope in ("project", "global")
        or any(
            value is not None
            for value in (
                filters.min_importance,
                filters.max_importance,
                filters.created_after,
                filters.created_before,
                filters.updated_after,
                filters.updated_before,
            )
        )
    )


def counted_vector_query(
    projects: Sequence[str],
    vector: npt.NDArray[np.float32],
    k: int,
    filters: Filters,
    now: float | None,
    *,
    project: str | None = None,
    literal: str | None = None,
    model: str | None = None,
) -> tuple[Statement, str, list[object]]:
    """What :func:`vector_query` runs, deciding between the exact scan and HNSW itself, with the
    memories passing the filters counted beside each row: one statement, and none read before it.
    When nothing but visibility narrows the search: exact if the projects hold at most
    :data:`EXACT_UP_TO` memories (the count taken over the rows scanned), else HNSW (no count: the
    rows carry the memories held instead). Otherwise, for a filter whose lasting memories the triggers
    count (:func:`lasting_count`), that count decides first (more than :data:`SCANNED_UP_TO`: HNSW,
    no row read), else the filtered rows are read once with their distances (up to
    :data:`SCANNED_UP_TO` + 1) and counted from what was read; for any other filter, the rows are
    counted first (up to :data:`SCANNED_UP_TO` + 1, without distances), then scanned with their
    distances if they are few enough, else searched through HNSW. The exact scans read the narrow
    rows of ``eventmem_searched`` (:data:`SEARCHED`). Rows: (project, id, cosine, importance,
    updated_at, created_at, count or NULL, memories held or NULL); a row of no vector (cosine NULL)
    only counts. ``literal``: ``vector`` as :func:`vector_literal` makes it, if made."""
    dim = int(vector.shape[0])
    where, params = visible_where(projects, filters, now, project)
    literal = _vector(vector) if literal is None else literal
    distance = f"m.embedding <#> %s::halfvec({dim})"
    columns = "m.importance, m.updated_at, m.created_at"
    setting, hnsw, values = vector_query(
        projects, vector, k, filters, now, exact=False, project=project, literal=literal, model=model
    )
    keep = f"SELECT m.project, m.id, {distance} AS d, {columns} FROM {SEARCHED} m WHERE {where}"
    # (the distances computed in the scan and kept without the vectors: counted over the kept rows, a
    # window or a sort would hold each row's vector, spilling to disk at 20,000 memories)
    scanned = "SELECT f.project, f.id, -f.d, f.importance, f.updated_at, f.created_at"
    if not narrows(filters, project):
        held = "(SELECT held FROM h)"
        sql = (
            "WITH h AS (SELECT coalesce(sum(p.memories), 0) AS held FROM eventmem_projects p "
            f"WHERE p.project = ANY(%s)), f AS MATERIALIZED ({keep} AND {held} <= {EXACT_UP_TO}), "
            "n AS (SELECT count(*) AS n FROM f) "
            f"({scanned}, (SELECT n FROM n), {held} FROM f ORDER BY f.d LIMIT %s) "
            f"UNION ALL (SELECT x.*, NULL::bigint, {held} FROM ({hnsw}) x WHERE {held} > {EXACT_UP_TO})"
        )
        return setting, sql, [list(projects), literal, *params, k, *values]
    n = "(SELECT n FROM n)"
    lasting = lasting_count(projects, filters, project)
    if lasting is not None:
        # the lasting memories the filter passes (counted by triggers) decide first: more than
        # SCANNED_UP_TO, HNSW, and no row is read before it; else the filtered rows are read once, with
        # their distances, up to one more than SCANNED_UP_TO, and counted from what was read (a filter
        # passing more than that, most of them with a time to live, costs as many distances before HNSW)
        few = f"(SELECT l FROM l) <= {SCANNED_UP_TO}"
        sql = (
            f"WITH l AS (SELECT ({lasting[0]}) AS l), "
            f"f AS MATERIALIZED ({keep} AND {few} LIMIT {SCANNED_UP_TO + 1}), "
            f"n AS (SELECT CASE WHEN {few} THEN (SELECT count(*) FROM f) ELSE {SCANNED_UP_TO + 1} END AS n) "
            f"({scanned}, {n}, NULL::bigint FROM f WHERE {n} <= {SCANNED_UP_TO} ORDER BY f.d LIMIT %s) "
            f"UNION ALL (SELECT x.*, {n}, NULL::bigint FROM ({hnsw}) x WHERE {n} > {SCANNED_UP_TO})"
        )
        return setting, sql, [*lasting[1], literal, *params, k, *values]
    # the filtered rows counted first, without their distances (a filter passing most memories then
    # costs a read of SCANNED_UP_TO narrow rows before HNSW, not as many distances)
    counted = f"SELECT count(*) FROM (SELECT FROM {SEARCHED} m WHERE {where} LIMIT {SCANNED_UP_TO + 1}) c"
    sql = (
        f"WITH n AS (SELECT ({counted}) AS n), "
        f"f AS MATERIALIZED ({keep} AND {n} <= {SCANNED_UP_TO}) "
        f"({scanned}, {n}, NULL::bigint FROM f ORDER BY f.d LIMIT %s) "
        f"UNION ALL (SELECT x.*, {n}, NULL::bigint FROM ({hnsw}) x WHERE {n} > {SCANNED_UP_TO})"
    )
    return setting, sql, [*params, literal, *params, k, *values]


def lasting_count(
    projects: Sequence[str], filters: Filters, project: str | None = None
) -> tuple[str, list[object]] | None:
    """A statement counting the lasting memories (not superseded, no time to live) of ``projects`` that
    ``filters`` pass, from the counts the triggers keep (schema 10) instead of their rows: a lower
    bound of the memories the filters pass at any time. ``None`` when the filters read more than
    types and a scope, or one tag alone (or ``project`` narrows them to its own memories)."""
    kept = msgspec.structs.replace(filters, kinds=(), tags=(), scope=None, include_superseded=False)
    if project is not None or kept != Filters():
        return None
    if filters.tags:
        if len(set(filters.tags)) > 1 or filters.kinds or filters.scope in ("project", "global"):
            return None
        return (
            "SELECT coalesce(sum(memories), 0) FROM eventmem_lasting_tags WHERE project = ANY(%s) AND tag = %s",
            [list(projects), filters.tags[0]],
        )
    clauses: list[str] = ["project = ANY(%s)"]
    params: list[object] = [list(projects)]
    _kind_and_scope(filters, "", clauses, params)
    return f"SELECT coalesce(sum(memories), 0) FROM eventmem_lasting_kinds WHERE {' AND '.join(clauses)}", params


def counted_rows_of(found: Sequence[Sequence[Any]]) -> tuple[list[Row], int]:
    """:func:`counted_vector_query`'s rows as :func:`vector_rows_of`'s, and the memories counted (the
    memories held when not counted; when no row came, :data:`EXACT_UP_TO` + 1: the keyword list
    then tells whether any passes)."""
    if not found:
        searched = EXACT_UP_TO + 1
    else:
        searched = int(found[0][6]) if found[0][6] is not None else int(found[0][7])
    return vector_rows_of([row[:6] for row in found if row[2] is not None]), searched


def vector_rows_of(found: Sequence[Sequence[Any]]) -> list[Row]:
    """:func:`vector_rows`' answer from the rows of :func:`vector_query`'s query, best first (ties by key)."""
    hits: list[Row] = [((str(p), str(i)), float(c), float(a), float(u), float(m)) for p, i, c, a, u, m in found]
    hits.sort(key=lambda hit: (-hit[1], hit[0]))
    return hits


def cosines(conn: Any, keys: Sequence[Key], vector: npt.NDArray[np.float32]) -> dict[Key, float]:
    """The cosine of each of these memories with ``vector``."""
    if not keys:
        return {}
    with reading(conn):
        return cosines_of(conn.execute(*cosines_query(keys, _vector(vector))).fetchall())


def cosines_query(keys: Sequence[Key], literal: str) -> tuple[str, list[object]]:
    """What :func:`cosines` runs for the vector ``literal`` (:func:`vector_literal`): the score of the
    vector lists and of the keyword list's subquery (the inner product of the narrow row's
    half-precision vector with the query)."""
    sql = (
        f"SELECT m.project, m.id, -(m.embedding <#> %s::halfvec) FROM {SEARCHED} m "
        "JOIN unnest(%s::text[], %s::text[]) AS k(project, id) ON m.project = k.project AND m.id = k.id "
        f"WHERE m.embedding IS NOT NULL"
    )
    return sql, [literal, [p for p, _ in keys], [i for _, i in keys]]


def cosines_of(found: Sequence[Sequence[Any]]) -> dict[Key, float]:
    """:func:`cosines`' answer from the rows of :func:`cosines_query`'s query."""
    return {(str(p), str(i)): float(c) for p, i, c in found}


def columns(conn: Any, keys: Sequence[Key]) -> dict[Key, tuple[float, float, float]]:
    """(importance, updated_at, created_at) of each memory."""
    sql = (
        "SELECT m.project, m.id, m.importance, m.updated_at, m.created_at FROM eventmem_memories m "
        "JOIN unnest(%s::text[], %s::text[]) AS k(project, id) ON m.project = k.project AND m.id = k.id"
    )
    with reading(conn):
        rows = conn.execute(sql, [[p for p, _ in keys], [i for _, i in keys]]).fetchall()
    return {(str(p), str(i)): (float(imp), float(upd), float(made)) for p, i, imp, upd, made in rows}
