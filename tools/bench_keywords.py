#!/usr/bin/env python
"""Keyword search at scale: ranking from in-memory postings (``eventmem/projectors/postings.py``)
beside FTS5's own ``bm25()`` ranking, on the same index, in the same run.

Prints one JSON object on stdout; progress goes to stderr. For each size: the query time of both
rankings (p50/p95, one query at a time, the service's depth of 50), beside a vector search (the
smaller postings budget a hybrid search uses) and keyword-only, unfiltered and under a filter that
allows half the memories; whether the two answered every query identically (slots and scores, bit
for bit: they must); the time to make the postings from the rows, and their size.

``database_file``: the index stored as a snapshot stores it, then restored twice, its database in
memory and in a file of its own (as a server restores it: ``eventmem/projectors/keywords_stored.py``),
ranking from the stored postings: the same searches on both, alternated a round at a time, each round
on indexes restored afresh (FTS5 answers the words that are phrases, and an index keeps their scores
until its next change), with the p50 ratio file / memory and whether the answers were the same.

Memories and queries are ``tools/bench.py``'s synthetic coding notes (a Zipf vocabulary of coding
words and identifiers, 30-60 words each): every word is common at 100k, the hard case for BM25.

Usage::

    python tools/bench_keywords.py                   # 10k and 100k (a few minutes on 2 cores)
    python tools/bench_keywords.py --sizes 20000
    python tools/bench_keywords.py --quick           # 3000 memories (smoke test)
    python tools/bench_keywords.py --out keywords.json
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import Corpus  # noqa: E402
from bench_json import emit  # noqa: E402

from eventmem.projectors.keywords import KeywordIndex  # noqa: E402
from eventmem.projectors.postings import BackgroundPostings  # noqa: E402

DEPTH = 50


def log(message: str) -> None:
    sys.stderr.write(f"[bench_keywords] {message}\n")
    sys.stderr.flush()


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000.0
    return {"p50_ms": round(float(np.percentile(ms, 50)), 4), "p95_ms": round(float(np.percentile(ms, 95)), 4)}


def timed(search: Callable[[str], object], queries: list[str]) -> dict[str, float]:
    for query in queries[:10]:
        search(query)
    samples = []
    for query in queries:
        started = time.perf_counter()
        search(query)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def measure(size: int, count: int) -> dict[str, Any]:
    corpus = Corpus(seed=size)
    rows = [
        (slot, title, content[:120], content, " ".join(tags))
        for slot, (title, content, tags, _, _) in enumerate(corpus.memories(size))
    ]
    queries = corpus.queries(count)
    log(f"{size}: indexing {size} memories in FTS5")
    index = KeywordIndex()
    index.upsert(rows)
    half: npt.NDArray[np.bool_] = np.random.default_rng(size).random(size) < 0.5
    cases: dict[str, Callable[[str], list[tuple[int, float]]]] = {
        "beside_vectors": lambda q: index.search(q, DEPTH, beside_vectors=True),
        "keyword_only": lambda q: index.search(q, DEPTH),
        "beside_vectors_half_allowed": lambda q: index.search(q, DEPTH, half, beside_vectors=True),
    }
    fts5 = {name: timed(search, queries) for name, search in cases.items()}
    expected = {name: [search(q) for q in queries] for name, search in cases.items()}
    log(f"{size}: making the postings")
    started = time.perf_counter()
    index.rank_in_memory(lambda slots: lambda: [rows[slot] for slot in slots])  # (the texts: the fold's)
    ranking = index.ranking
    assert isinstance(ranking, BackgroundPostings) and ranking.wait() and ranking.ready() is not None
    made_s = time.perf_counter() - started
    postings = {name: timed(search, queries) for name, search in cases.items()}
    identical = all([search(q) for q in queries] == expected[name] for name, search in cases.items())
    active = ranking.ready()
    assert active is not None
    figures: dict[str, Any] = {"memories": size, "queries": count, "identical_answers": identical}
    for name in cases:
        figures[name] = {
            "fts5": fts5[name],
            "postings": postings[name],
            "ratio_p50": round(postings[name]["p50_ms"] / fts5[name]["p50_ms"], 3),
            "ratio_is": "postings p50 / FTS5 bm25() p50, same index, same queries",
        }
    figures["postings_made_s"] = round(made_s, 3)
    figures["postings_entries"] = active.entries()
    figures["postings_bytes"] = active.entries() * 12
    stored = index.serialize()
    figures["fts5_bytes"] = len(stored)
    figures["database_file"] = restored_in_file_and_in_memory(stored, queries, half)
    return figures


def restored_in_file_and_in_memory(
    stored: bytes, queries: list[str], half: npt.NDArray[np.bool_], rounds: int = 3
) -> dict[str, Any]:
    """``database_file`` (see the module's text)."""
    samples: dict[str, dict[str, list[float]]] = {}
    answers: dict[str, list[object]] = {"memory": [], "file": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(rounds):
            for side, where in (("memory", None), ("file", Path(folder))):
                restored = KeywordIndex(stored, folder=where)
                assert restored.ranking is not None and restored.ranking.wait() and restored.ranking.ready() is not None
                cases = {
                    "beside_vectors": lambda q, r=restored: r.search(q, DEPTH, beside_vectors=True),
                    "keyword_only": lambda q, r=restored: r.search(q, DEPTH),
                    "beside_vectors_half_allowed": lambda q, r=restored: r.search(q, DEPTH, half, beside_vectors=True),
                }
                for name, search in cases.items():
                    taken = samples.setdefault(name, {"memory": [], "file": []})[side]
                    for query in queries:
                        started = time.perf_counter()
                        answers[side].append(search(query))
                        taken.append(time.perf_counter() - started)
                del restored, cases
    out: dict[str, Any] = {"rounds": rounds, "identical_answers": answers["memory"] == answers["file"]}
    for name, sides in samples.items():
        memory, file = percentiles(sides["memory"]), percentiles(sides["file"])
        out[name] = {"memory": memory, "file": file, "ratio_p50": round(file["p50_ms"] / memory["p50_ms"], 3)}
    out["ratio_is"] = "p50 with the database in a file / in memory, the same stored index, the same queries"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--queries", type=int, default=300, help="queries per figure (default 300)")
    parser.add_argument("--quick", action="store_true", help="3000 memories, 60 queries (smoke test)")
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    sizes = [3000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    count = 60 if args.quick else args.queries
    result: dict[str, Any] = {
        "benchmark": "eventmem tools/bench_keywords.py",
        "machine": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "platform": platform.platform(),
        },
        "sizes": {str(size): measure(size, count) for size in sizes},
    }
    result["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
