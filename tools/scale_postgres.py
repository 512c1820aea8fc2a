"""PostgreSQL at scale for ``tools/bench_scale.py``: a tier of N memories loaded by ``COPY`` into the
schema the projector creates, its HNSW index built as the projector defines it, then recall and
latency through ``eventmem/projectors/postgres/queries.py`` and the size on disk per memory.

The rows are those a sync writes, made by the projector's own code (``PostgresProjector.append_new``:
the row, its keyword postings and statistics, the narrow copy): the benchmark corpus
(``tools/bench.py``) saved, folded by the real fold, embedded in batches by the built-in
``HashingEmbedder`` or the embedder a spec names (``--embedder onnx:minilm``: realistic vectors). Only
the path differs: a chunk a transaction instead of the projector's ``load`` (which holds every row of
a journal in memory at once), and the HNSW index and the postings' key (dropped first) built once at
the end as a load builds them, under a ``maintenance_work_mem`` set high enough to hold the graph.
(Before, the tool wrote the rows itself and no keyword postings, so its hybrid searches at 100,000
and 1,000,000 found no keyword hits, and it built the HNSW index an empty database's projector had
defined: ``m`` 16 at every size, where a sync's load of more than 50,000 memories uses 32.)
"""

from __future__ import annotations

import math
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if "eventmem" not in sys.modules:  # (a caller measuring another revision imported its eventmem first)
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench import saved_event  # noqa: E402
from scale_journal import chunks  # noqa: E402

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.ids import to_iso  # noqa: E402
from eventmem.core.query_rules import Filters  # noqa: E402
from eventmem.core.state import State  # noqa: E402
from eventmem.embedders.embedder import Embedder, semantic_dims  # noqa: E402
from eventmem.projectors.base import Batch  # noqa: E402
from eventmem.projectors.postgres import queries  # noqa: E402
from eventmem.projectors.postgres.bulk import drop_indexes, secondary_indexes  # noqa: E402
from eventmem.projectors.postgres.connection import connect  # noqa: E402
from eventmem.projectors.postgres.projector import PostgresProjector  # noqa: E402
from eventmem.projectors.postgres.sync import batch_of  # noqa: E402
from eventmem.projectors.vectors import embed_text  # noqa: E402
from eventmem.service import database_search  # noqa: E402

PROJECT = "bench"
FILTER_TAG = "database"
"""The filtered searches ask for memories carrying this tag (about 8% of the corpus)."""
FILTER = Filters(tags=(FILTER_TAG,))
Log = Callable[[str], None]


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def literal(vector: np.ndarray[Any, Any]) -> str:
    return "[" + ",".join(map(repr, vector.tolist())) + "]"


class Tier:
    """One database holding ``count`` memories of one project, with what the measures need kept in
    memory: the stored vectors (for the exact answers) and which memories carry the filter's tag."""

    def __init__(self, uri: str, count: int, embedder: Embedder, log: Log) -> None:
        self.uri = uri
        self.count = count
        self.embedder = embedder
        self.log = log
        self.ids: list[str] = []
        self.vectors = np.zeros((count, embedder.dim), np.float32)
        self.tagged = np.zeros(count, bool)
        self.timings: dict[str, float] = {}
        self.index_definition = ""
        self.model = embedder.model_id

    def load(self, chunk: int = 20_000, maintenance_work_mem: str = "4GB") -> None:
        """The memories written by the projector's own rows (``PostgresProjector.append_new``: the
        row, its vector in binary form, its keyword postings and statistics, the narrow copy its
        triggers make), a chunk a transaction, with the HNSW index and the postings' key dropped
        first and built once at the end: the key from its definition, the HNSW index as a sync's load
        makes it for this many memories (``m`` and ``ef_construction`` by size)."""
        conn = connect(self.uri)
        projector = PostgresProjector(conn, PROJECT, self.embedder, root="bench", branch="main")  # (migrations)
        projector.apply(Batch((), (), (), (), {}))  # (the project's row)
        definition = self._vector_index_definition(conn)  # (dropped here, made again by size at the end)
        with conn.transaction(), conn.cursor() as cursor:
            postings_key = secondary_indexes(cursor, ("eventmem_postings",))
            drop_indexes(cursor, postings_key)
            conn.execute(f"DROP INDEX {definition[0]}")
        rng = random.Random(7)
        now = time.time()
        started = time.perf_counter()
        embed_s = 0.0
        position = 0
        for memories in chunks(self.count, chunk):
            events = [
                saved_event(m, to_iso(datetime.fromtimestamp(now - rng.random() * 86400 * 30, UTC)), "bench")
                for m in memories
            ]
            state = State()
            state.fold(events)
            batch = batch_of(state, (), events, {}, everything=True)
            t0 = time.perf_counter()
            vectors = self.embedder.embed([embed_text(p.record) for p in batch.upserts])
            embed_s += time.perf_counter() - t0
            end = position + len(batch.upserts)
            self.vectors[position:end] = vectors
            self.tagged[position:end] = [FILTER_TAG in p.record.tags for p in batch.upserts]
            self.ids.extend(p.record.id for p in batch.upserts)
            with conn.transaction(), conn.cursor() as cursor:
                projector.append_new(batch.upserts, indexed=False, vectors=vectors)
                with cursor.copy("COPY eventmem_events (project, id, type, ts, line) FROM STDIN") as copy:
                    for event in events:
                        copy.write_row((PROJECT, event.id, "saved", event.ts, encode_event(event)))
            position = end
            self.log(f"{self.count}: {position} rows copied ({time.perf_counter() - started:.0f}s)")
        self.timings["copy_seconds"] = time.perf_counter() - started - embed_s
        self.timings["embed_seconds"] = embed_s
        conn.commit()
        conn.autocommit = True
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        workers = conn.execute("SHOW max_parallel_maintenance_workers").fetchone()
        self.timings["max_parallel_maintenance_workers"] = float(str(workers[0])) if workers else 0.0
        self.log(f"{self.count}: building the postings' key")
        t0 = time.perf_counter()
        for _, statement in postings_key:
            conn.execute(statement)
        self.timings["postings_key_build_seconds"] = time.perf_counter() - t0
        self.log(f"{self.count}: building the vector index")
        t0 = time.perf_counter()
        with conn.transaction():  # (as a sync's load makes it for this many: its parameters by size)
            projector.vector_index.create(self.count)
        self.timings["vector_index_build_seconds"] = time.perf_counter() - t0
        self.index_definition = self._vector_index_definition(conn)[1]
        t0 = time.perf_counter()
        conn.execute("VACUUM ANALYZE eventmem_memories")
        conn.execute("VACUUM ANALYZE eventmem_searched")
        conn.execute("VACUUM ANALYZE eventmem_postings")
        self.timings["analyze_seconds"] = time.perf_counter() - t0
        self.log(f"{self.count}: index built in {self.timings['vector_index_build_seconds']:.0f}s")
        conn.close()

    @staticmethod
    def _vector_index_definition(conn: Any) -> tuple[str, str]:
        """(name, CREATE INDEX statement) of the vector index the projector created (a learned model's
        HNSW graph, the built-in embedder's inverted file)."""
        row = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('eventmem_memories', 'eventmem_searched') "
            "AND (indexdef ILIKE '%USING hnsw%' OR indexdef ILIKE '%USING ivfflat%')"
        ).fetchone()
        if row is None:
            raise RuntimeError("the projector created no vector index")
        return str(row[0]), str(row[1])

    def exact_top(self, query: np.ndarray[Any, Any], filtered: bool, k: int = 10) -> set[str]:
        """The ``k`` nearest by cosine among the stored vectors (all unit length, or zero)."""
        scores = self.vectors @ query.astype(np.float32)
        if filtered:
            scores = np.where(self.tagged, scores, -np.inf)
        top = np.argpartition(-scores, k)[:k]
        return {self.ids[i] for i in top}

    def measure(
        self, texts: list[str], exact_queries: int, hybrid_queries: int, lists_factors: Sequence[float] = ()
    ) -> dict[str, Any]:
        """Recall@10 of HNSW against the exact answer and p50 latencies, without and with a filter
        (the exact scan and the hybrid search timed on the first queries only: they are slow)."""
        out: dict[str, Any] = {"memories": self.count, "queries": len(texts), "filter": f"tags={FILTER_TAG}"}
        out["filter_selectivity"] = round(float(self.tagged.mean()), 4)
        with connect(self.uri) as conn:
            warm = self.embedder.embed(texts[:5])
            for v in warm:  # (the first queries read the index from disk)
                queries.vector_hits(conn, (PROJECT,), v, 10, Filters(), exact=False, model=self.model)
            for label, filters in (("", Filters()), ("filtered_", FILTER)):
                hnsw, hybrid, exact, recalls = [], [], [], []
                for number, text in enumerate(texts):
                    vector = self.embedder.embed([text])[0]
                    truth = self.exact_top(vector, bool(filters.tags))
                    t0 = time.perf_counter()
                    approx = queries.vector_hits(conn, (PROJECT,), vector, 10, filters, exact=False, model=self.model)
                    hnsw.append(time.perf_counter() - t0)
                    recalls.append(len(truth & {key[1] for key, _ in approx}) / len(truth))
                    if number < hybrid_queries:
                        t0 = time.perf_counter()
                        database_search.hybrid(conn, (PROJECT,), self.embedder, text, 10, filters)
                        hybrid.append(time.perf_counter() - t0)
                    if number < exact_queries:
                        t0 = time.perf_counter()
                        queries.vector_hits(conn, (PROJECT,), vector, 10, filters, exact=True)
                        exact.append(time.perf_counter() - t0)
                out[f"{label}hnsw_recall_at_10"] = round(statistics.mean(recalls), 4)
                out[f"{label}hnsw_recall_at_10_min"] = round(min(recalls), 2)
                out[f"{label}vector_hnsw_p50_ms"] = p50_ms(hnsw)
                out[f"{label}hybrid_p50_ms"] = p50_ms(hybrid)
                out[f"{label}hybrid_queries"] = len(hybrid)
                out[f"{label}vector_exact_p50_ms"] = p50_ms(exact)
                out[f"{label}vector_exact_queries"] = len(exact)
                self.log(f"{self.count}: {label or 'unfiltered '}recall {out[f'{label}hnsw_recall_at_10']}")
            out["index_sweep"] = self.sweep(conn, texts[:50])
            if lists_factors and semantic_dims(self.model):
                out["index_sweep_by_lists"] = self.sweep_lists_made(conn, texts[:50], lists_factors)
            row = conn.execute(
                "SELECT count(*) FROM eventmem_postings e JOIN eventmem_projects p ON p.no = e.project "
                "WHERE p.project = %s",
                [PROJECT],
            ).fetchone()
            out["keyword_postings_per_memory"] = round(int(row[0]) / max(self.count, 1), 1) if row else 0.0
        out["hnsw_index"] = self.index_definition
        out["hybrid_uses"] = "exact" if self.count <= queries.EXACT_UP_TO else "hnsw"
        out["vector_index"] = "ivfflat" if "USING ivfflat" in self.index_definition else "hnsw"
        if semantic_dims(self.model):  # (the inverted file's lists read, and the candidates a top 10 keeps)
            out["ivf_probes_per_root"] = queries.IVF_PROBES_PER_ROOT
        out["hnsw_ef_search"] = queries.ef_search(10, self.model)
        out["hybrid_hnsw_ef_search"] = queries.ef_search(max(10 * 4, 50), self.model)
        out.update({key: round(value, 4) for key, value in self.timings.items()})
        out["disk"] = sizes(self.uri, self.count)
        return out

    def sweep(self, conn: Any, texts: list[str]) -> dict[str, dict[str, float]]:
        """Recall@10 and p50 at other settings than the ones ``queries.vector_hits`` makes (raw SQL,
        the same ORDER BY as it), to show what recall costs: a learned model's HNSW graph of the narrow
        copies at other ``hnsw.ef_search`` values (unfiltered); the built-in embedder's inverted file
        reading other shares of its lists (``ivfflat.probes``), without and with the filter, its
        candidates as many as a top 10's."""
        dim = int(self.embedder.dim)
        part = semantic_dims(self.model)
        if part:
            return self._sweep_lists(conn, texts, dim, part)
        out: dict[str, dict[str, float]] = {}
        if queries.learned(self.model):  # (its graph of the narrow copies' half-precision vectors)
            order = f"{queries.narrow_graph_order(dim)} <#> %s::halfvec({dim})"
            sql = f"SELECT m.id FROM eventmem_searched m ORDER BY {order} LIMIT 10"
        else:
            sql = f"SELECT id FROM eventmem_memories ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT 10"
        asked = self._questions(texts, filtered=False)
        for ef in (40, 100, 200, 400, 800, 1000):
            recalls, times = [], []
            for vector, truth in asked:
                with conn.transaction():
                    conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    conn.execute("SET LOCAL enable_sort = off")  # (as queries.vector_query: through the index)
                    t0 = time.perf_counter()
                    found = {str(row[0]) for row in conn.execute(sql, [vector]).fetchall()}
                    times.append(time.perf_counter() - t0)
                recalls.append(len(truth & found) / len(truth))
            out[str(ef)] = {"recall_at_10": round(statistics.mean(recalls), 4), "p50_ms": p50_ms(times)}
            self.log(f"{self.count}: ef_search {ef}: {out[str(ef)]}")
        return out

    def sweep_lists_made(self, conn: Any, texts: list[str], factors: Sequence[float]) -> dict[str, dict[str, Any]]:
        """The built-in embedder's inverted file made with other numbers of lists (each ``factor`` times
        the number a load makes, the square root of the memories), each timed as it is built and swept
        as :meth:`sweep` sweeps the one made (the shares of its lists read, without and with the
        filter), then the index made again as it was: whether more, smaller lists read fewer vectors
        for the same recall, and what they cost to build."""
        dim, part = int(self.embedder.dim), semantic_dims(self.model)
        name, definition = self._vector_index_definition(conn)
        made = int(conn.execute(f"SELECT {queries.SEMANTIC_LISTS}").fetchone()[0])
        out: dict[str, dict[str, Any]] = {}
        conn.commit()  # (an index is dropped and made outside a transaction block)
        conn.autocommit = True
        try:
            for factor in factors:
                lists = max(1, round(factor * made))
                conn.execute(f"DROP INDEX {name}")
                conn.execute("SET maintenance_work_mem = '1GB'")
                t0 = time.perf_counter()
                conn.execute(re.sub(r"lists\s*=\s*'?\d+'?", f"lists='{lists}'", definition))
                built = time.perf_counter() - t0
                conn.execute("ANALYZE eventmem_searched")
                self.log(f"{self.count}: an inverted file of {lists} lists built in {built:.1f}s")
                swept = self._sweep_lists(conn, texts, dim, part)
                out[f"factor_{factor}"] = {"build_seconds": round(built, 2), **swept}
            conn.execute(f"DROP INDEX {name}")
            conn.execute(definition)
            conn.execute("ANALYZE eventmem_searched")
        finally:
            conn.autocommit = False
        return out

    def _questions(self, texts: list[str], *, filtered: bool) -> list[tuple[str, set[str]]]:
        """Each text's vector (as the literal a statement takes) and its exact top 10, made once for
        every setting a sweep tries."""
        return [(literal(vector), self.exact_top(vector, filtered)) for vector in self.embedder.embed(texts)]

    def _sweep_lists(self, conn: Any, texts: list[str], dim: int, part: int) -> dict[str, dict[str, float]]:
        candidates = queries.ef_search(10, self.model)
        lists = int(conn.execute(f"SELECT {queries.SEMANTIC_LISTS}").fetchone()[0])  # type: ignore[index]
        out: dict[str, dict[str, float]] = {"lists": {"lists": lists, "candidates": candidates}}
        for label, tag in (("", None), ("filtered_", FILTER_TAG)):
            where = "WHERE %s = ANY(m.tags) " if tag else ""
            sql = (
                f"SELECT s.id FROM (SELECT m.id, m.embedding FROM eventmem_searched m {where}"
                f"ORDER BY {queries.semantic_order(dim, part)} <#> "
                f"subvector(%s::halfvec({dim}), {dim - part + 1}, {part}) "
                f"LIMIT %s) s ORDER BY s.embedding <#> %s::halfvec({dim}) LIMIT 10"
            )
            questions = self._questions(texts, filtered=tag is not None)
            for share in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0):
                probes = max(1, math.ceil(share * lists))
                recalls, times = [], []
                for vector, truth in questions:
                    with conn.transaction():
                        conn.execute(f"SET LOCAL ivfflat.probes = {probes}")
                        conn.execute("SET LOCAL ivfflat.iterative_scan = relaxed_order")
                        conn.execute("SET LOCAL enable_sort = off")  # (as queries.vector_query: through the index)
                        asked = [vector, candidates, vector]
                        t0 = time.perf_counter()
                        found = {str(row[0]) for row in conn.execute(sql, [tag, *asked] if tag else asked).fetchall()}
                        times.append(time.perf_counter() - t0)
                    recalls.append(len(truth & found) / len(truth))
                key = f"{label}share_{share}"
                out[key] = {
                    "probes": probes,
                    "recall_at_10": round(statistics.mean(recalls), 4),
                    "p50_ms": p50_ms(times),
                }
                self.log(f"{self.count}: {key}: {out[key]}")
        return out


def sizes(uri: str, count: int) -> dict[str, Any]:
    """Bytes per memory of each table (its indexes and TOAST included) and of each index."""
    with connect(uri) as conn:
        tables = conn.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relkind = 'r' AND relname LIKE 'eventmem%%'"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
            "WHERE relname IN ('eventmem_memories', 'eventmem_searched')"
        ).fetchall()
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    total = sum(int(size) for _, size in tables)
    return {
        "total_bytes_per_memory": round(total / max(count, 1), 1),
        "database_bytes": int(database[0]) if database else 0,
        "table_bytes_per_memory": {str(n): round(int(s) / max(count, 1), 1) for n, s in sorted(tables)},
        "memories_index_bytes_per_memory": {str(n): round(int(s) / max(count, 1), 1) for n, s in sorted(indexes)},
    }


def server_memory(uri: str) -> dict[str, Any]:
    """The server's memory: the sum of its processes' proportional set sizes (shared buffers counted
    once), read from ``/proc``; the settings that bound it."""
    with connect(uri) as conn:
        settings = {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("shared_buffers", "work_mem", "maintenance_work_mem")
        }
        row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()
    data_directory = Path(str(row[0])) if row else None
    out: dict[str, Any] = {"settings": settings}
    try:
        postmaster = int((data_directory / "postmaster.pid").read_text().split()[0])  # type: ignore[operator]
        pids = [postmaster, *_children(postmaster)]
        out["processes"] = len(pids)
        out["pss_bytes"] = sum(_pss(pid) for pid in pids)
    except (OSError, ValueError, TypeError) as exc:
        out["unmeasured"] = f"{type(exc).__name__}: {exc}"
    return out


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _pss(pid: int) -> int:
    """The process's proportional set size; 0 for one that ended meanwhile (a backend of a query): its
    ``/proc`` entry is gone (``FileNotFoundError``) or goes while it is read (``ProcessLookupError``)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8")
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0
