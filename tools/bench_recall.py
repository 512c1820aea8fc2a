#!/usr/bin/env python
"""In-process recall p50 of this checkout beside another checkout of eventmem (the baseline), in the
same run: the same generated project (``tools/bench.py``'s corpus and population, one copy per
side), the same queries, asked in alternating rounds so that both sides see the same machine load.

Each side runs in a worker process started in its own checkout (``--baseline PATH``: the root of
the other checkout, e.g. a ``git worktree`` of the commit to compare with). A worker builds its
project, opens it (embedding everything with its own default embedder), waits for the indexes made
in the background, warms up, then answers rounds of ``--queries`` ``MemoryService.recall(limit=10)``
calls (no filter, then a type filter) when asked, in short rounds of ``--chunk`` queries. Prints one
JSON object: per size, each side's p50 and p95 over all rounds, ``ratio`` (this checkout / baseline)
and ``paired_ratio`` (the median of the rounds' ratios, robust to a load that drifts; the target is
at most 1.1).

Usage::

    python tools/bench_recall.py --baseline ../eventmem-main --sizes 10000,100000 --out recall.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_json import emit

ROOT = Path(__file__).resolve().parent.parent


def worker(size: int, tmp: Path, queries: int) -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    from bench import Corpus, Project

    from eventmem.core.query_rules import Filters

    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp / "project")], check=True)
    env = {"EVENTMEM_GLOBAL_DIR": str(tmp / "global"), "EVENTMEM_DURABILITY": "flush"}
    project = Project(tmp / "project", env)
    corpus = Corpus(seed=size)
    project.populate(size, corpus)
    started = time.perf_counter()
    service = project.open()
    service.recall("warm up")
    for store in service.stores():
        indexes = getattr(store, "derived", store)  # (the indexes moved from the Store to its Derived)
        if len(indexes.keywords) >= store.tuning.postings_from:
            indexes.keywords.ranked_in_memory(600)
        indexes.vectors.settle(600)
    opened = time.perf_counter() - started
    asked = corpus.queries(queries)
    for query in asked[:20]:
        service.recall(query)
    print(
        json.dumps(
            {"ready": True, "open_and_embed_s": round(opened, 2), "embedder": service.project.embedder.model_id}
        ),
        flush=True,
    )
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "go":
            break
        first, count = (int(words[1]), int(words[2])) if len(words) == 3 else (0, len(asked))
        chunk = [asked[(first + i) % len(asked)] for i in range(count)]
        out: dict[str, list[float]] = {"recall": [], "recall_filtered_type": []}
        for name, filters in (("recall", None), ("recall_filtered_type", Filters(kinds=("decision",)))):
            for query in chunk:
                begun = time.perf_counter()
                service.recall(query, limit=10, filters=filters)
                out[name].append((time.perf_counter() - begun) * 1000)
        print(json.dumps(out), flush=True)
    service.close()
    return 0


def side(checkout: Path, size: int, tmp: Path, queries: int) -> subprocess.Popen[str]:
    script = ROOT / "tools" / "bench_recall.py"  # (this worker on both sides, over each checkout's code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")} | {"PYTHONPATH": str(checkout)}
    command = [sys.executable, str(script), "--worker", str(size), "--tmp", str(tmp), "--queries", str(queries)]
    command += ["--checkout", str(checkout)]
    return subprocess.Popen(command, cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "n": len(ordered),
    }


def compare(baseline: Path, size: int, queries: int, rounds: int, chunk: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-recall-") as name:
        tmp = Path(name)
        sides = {"this": ROOT, "baseline": baseline}
        workers = {}
        ready = {}
        for label, checkout in sides.items():
            (tmp / label).mkdir()
            workers[label] = side(checkout, size, tmp / label, queries)
            assert workers[label].stdout is not None
            ready[label] = json.loads(workers[label].stdout.readline())
        times: dict[str, dict[str, list[float]]] = {label: {} for label in sides}
        paired: dict[str, list[float]] = {}
        # many short rounds (``chunk`` queries each, cycling through the queries), the two sides one
        # after the other: the load of a shared machine drifts over seconds, so each round's ratio
        # compares the two sides under nearly the same load, and the median of those ratios is the figure
        for round_ in range(rounds * max(1, queries // chunk)):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            medians: dict[str, dict[str, float]] = {}
            for label in order:
                process = workers[label]
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(f"go {round_ * chunk} {chunk}\n")
                process.stdin.flush()
                for name, samples in json.loads(process.stdout.readline()).items():
                    times[label].setdefault(name, []).extend(samples)
                    medians.setdefault(label, {})[name] = statistics.median(samples)
            for name, this in medians["this"].items():
                paired.setdefault(name, []).append(this / medians["baseline"][name])
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=120)
    out: dict[str, Any] = {"memories": size, "queries_per_round": queries, "rounds": rounds}
    for label in sides:
        out[label] = ready[label] | {name: summary(samples) for name, samples in times[label].items()}
    out["ratio"] = {
        name: round(out["this"][name]["p50_ms"] / out["baseline"][name]["p50_ms"], 3)
        for name in ("recall", "recall_filtered_type")
    }
    out["paired_ratio"] = {name: round(statistics.median(values), 3) for name, values in paired.items()}
    """The median over rounds of (this side's p50 in the round / the baseline's in the same round)."""
    out["chunk"] = chunk
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="the root of the checkout to compare with")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--chunk", type=int, default=10, help="queries per side in a round (short rounds)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        if args.checkout is not None:
            global ROOT
            ROOT = args.checkout.resolve()
        return worker(args.worker, args.tmp, args.queries)
    if args.baseline is None:
        parser.error("--baseline PATH is required")
    result = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "sizes": [],
    }
    for size in args.sizes.split(","):
        result["sizes"].append(compare(args.baseline.resolve(), int(size), args.queries, args.rounds, args.chunk))
        print(json.dumps(result["sizes"][-1]), file=sys.stderr, flush=True)  # (each size as it is done)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
