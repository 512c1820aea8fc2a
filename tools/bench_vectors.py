#!/usr/bin/env python
"""Vector search at scale: the approximate path (``eventmem/projectors/ann.py``) beside the exact scan.

Prints one JSON object on stdout; progress goes to stderr. For each dataset, in the same run and on
the same index: the exact scan's and the approximate path's query time (p50/p95, one query at a
time, k = 10, one FAISS thread as the server runs), the approximate path's recall@10 against the
exact answer, the same under filters that allow a shrinking share of the memories (the cross-over:
the share below which the exact scan over the allowed slots is faster; the index takes the exact
path below two fifths of ``ann_from``), recall@50 unfiltered (the depth of the service's fusion), and the
re-rank's exact scoring of that many candidates against numpy's conversion of the same float16 codes,
and with float32 scores first (``re_rank``).

Datasets (hashing embedder, the default, 384 dimensions):

- ``retrieval``: the shipped evaluations' memories (``tests/eval`` and ``tests/eval/hard``) among
  ``tools/bench.py``'s synthetic coding notes up to the size, queried with the evaluations' questions;
- ``random``: random unit vectors queried with random unit vectors (no neighbour is much nearer than
  the rest: the hardest case for any approximate index);
- ``random-near``: the same vectors queried with stored vectors plus noise (cosine about 0.93 to the
  vector it was made from: a question near its answer).

Usage::

    python tools/bench_vectors.py                    # 100k (a few minutes on 2 cores)
    python tools/bench_vectors.py --size 20000 --queries 50
    python tools/bench_vectors.py --quick            # 3000 memories (smoke test)
    python tools/bench_vectors.py --out vectors.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import Corpus  # noqa: E402

from eventmem.core.records import MemoryRecord  # noqa: E402
from eventmem.embedders.embedder import HashingEmbedder  # noqa: E402
from eventmem.projectors.ann import candidate_count  # noqa: E402
from eventmem.projectors.float16_rows import StoredRows  # noqa: E402
from eventmem.projectors.vectors import VectorIndex, embed_text  # noqa: E402

faiss.omp_set_num_threads(1)  # as eventmem's server does

EVAL = HERE.parent / "tests" / "eval"
DIM = 384
K = 10
DEPTH = 50
FRACTIONS = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005)
Vectors = npt.NDArray[np.float32]


def log(message: str) -> None:
    print(f"[bench_vectors] {message}", file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def embed(texts: list[str]) -> Vectors:
    embedder = HashingEmbedder(DIM)
    return np.vstack([embedder.embed(texts[i : i + 2000]) for i in range(0, len(texts), 2000)]).astype(np.float32)


def retrieval(size: int) -> tuple[Vectors, Vectors]:
    memories = [m for folder in (EVAL, EVAL / "hard") for m in read_jsonl(folder / "memories.jsonl")]
    queries = [q["query"] for folder in (EVAL, EVAL / "hard") for q in read_jsonl(folder / "queries.jsonl")]
    texts = [
        embed_text(MemoryRecord(id=m["id"], title=m["title"], content=m["content"], tags=tuple(m["tags"])))
        for m in memories
    ]
    for title, content, tags, _, _ in Corpus(seed=size).memories(max(0, size - len(texts))):
        texts.append(embed_text(MemoryRecord(id="x", title=title, content=content, tags=tags)))
    return embed(texts), embed(queries)


def unit(rows: npt.NDArray[np.float64]) -> Vectors:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def timed(fn: Callable[[Vectors], tuple[Any, Any]], queries: Vectors) -> tuple[list[Any], dict[str, float]]:
    out, samples = [], []
    for query in queries:
        started = time.perf_counter()
        out.append(fn(query)[0])
        samples.append(time.perf_counter() - started)
    ms = np.asarray(samples) * 1000
    return out, {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def recall(found: list[Any], truth: list[Any]) -> float:
    hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(found, truth, strict=True))
    return round(hits / max(1, sum(len(b) for b in truth)), 4)


def measure(name: str, vectors: Vectors, queries: Vectors) -> dict[str, Any]:
    count = len(vectors)
    index = VectorIndex(DIM, ann_from=1)
    started = time.perf_counter()
    index.upsert(np.arange(count, dtype=np.int64), vectors)
    upsert_s = time.perf_counter() - started
    index.settle()
    build_s = time.perf_counter() - started
    assert index.approximate
    rng = np.random.default_rng(3)
    rows: list[dict[str, Any]] = []
    for fraction in FRACTIONS:
        allowed = None if fraction == 1.0 else rng.random(count) < fraction
        exact, exact_t = timed(lambda q, a=allowed: index.search(q, K, a, how="exact"), queries)
        approx, approx_t = timed(lambda q, a=allowed: index.search(q, K, a, how="approximate"), queries)
        rows.append(
            {
                "allowed_share": fraction,
                "allowed": count if allowed is None else int(allowed.sum()),
                "exact": exact_t,
                "approximate": approx_t,
                "recall_at_10": recall(approx, exact),
                "speed_up": round(exact_t["p50_ms"] / max(approx_t["p50_ms"], 1e-6), 2),
            }
        )
        got = rows[-1]["recall_at_10"]
        log(f"{name} {fraction}: exact {exact_t['p50_ms']} ms, approximate {approx_t['p50_ms']} ms, recall {got}")
    # the service asks for its top 50 vector ranks (fusion depth) whatever the limit
    exact, exact_t = timed(lambda q: index.search(q, DEPTH, how="exact"), queries)
    approx, approx_t = timed(lambda q: index.search(q, DEPTH, how="approximate"), queries)
    depth = {"k": DEPTH, "candidates": candidate_count(DEPTH), "exact": exact_t, "approximate": approx_t}
    depth["recall"] = recall(approx, exact)
    log(f"{name} top {DEPTH}: exact {exact_t['p50_ms']} ms, approximate {approx_t['p50_ms']} ms, {depth['recall']}")
    faster = [row["allowed_share"] for row in rows if row["speed_up"] > 1.0]
    return {
        "vectors": count,
        "queries": len(queries),
        "candidates": candidate_count(K),
        "add_s": round(upsert_s, 3),
        "approximate_ready_s": round(build_s, 3),
        "by_filter": rows,
        "top_50": depth,
        "re_rank": re_rank(vectors, queries),
        "approximate_faster_down_to_share": min(faster) if faster else None,
    }


def re_rank(vectors: Vectors, queries: Vectors) -> dict[str, Any]:
    """The re-rank's exact scores of as many slots as the service's top 50 takes as candidates (random
    ones): read by their bits (``StoredRows.scores``) against numpy's float16 -> float64 conversion of
    the same codes (``StoredRows.vectors``), call by call, and whether the two are the same bit for bit;
    then the re-rank as it runs, the candidates scored in float32 first and only those in reach of the
    top 50 exactly (``StoredRows.contenders``): its time, how many it scores exactly, and whether its
    top 50 is the one of scoring all exactly."""
    index: Any = faiss.IndexIDMap2(
        faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    )
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64))
    rows = StoredRows(index, DIM)
    largest_norm = float(np.linalg.norm(vectors.astype(np.float16).astype(np.float64), axis=1).max())
    rng = np.random.default_rng(5)
    count = min(candidate_count(DEPTH), len(vectors))
    converted, by_bits, first, scored, identical, same_top = [], [], [], [], True, True
    for query in queries:
        wide = query.astype(np.float64)
        slots = rng.choice(len(vectors), count, replace=False).astype(np.int64)
        started = time.perf_counter()
        plain = rows.vectors(slots) @ wide
        middle = time.perf_counter()
        fast = rows.scores(slots, wide)
        by_bits.append(time.perf_counter() - middle)
        converted.append(middle - started)
        identical = identical and plain.tobytes() == fast.tobytes()
        started = time.perf_counter()
        kept = rows.contenders(slots, query, DEPTH, largest_norm)
        kept_scores = rows.scores(kept, wide).astype(np.float32)
        first.append(time.perf_counter() - started)
        scored.append(len(kept))
        top = kept[np.lexsort((kept, -kept_scores))[:DEPTH]]
        same_top = same_top and top.tolist() == slots[np.lexsort((slots, -fast.astype(np.float32)))[:DEPTH]].tolist()
    converted_ms = float(np.percentile(np.asarray(converted) * 1000, 50))
    by_bits_ms = float(np.percentile(np.asarray(by_bits) * 1000, 50))
    return {
        "candidates": count,
        "converted_p50_ms": round(converted_ms, 3),
        "by_bits_p50_ms": round(by_bits_ms, 3),
        "speed_up": round(converted_ms / max(by_bits_ms, 1e-6), 2),
        "identical": identical,
        "float32_first_p50_ms": round(float(np.percentile(np.asarray(first) * 1000, 50)), 3),
        "float32_first_scored_exactly_p50": int(np.percentile(scored, 50)),
        "float32_first_same_top": same_top,
    }


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "faiss": faiss.__version__,
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="random queries per figure (default 200)")
    parser.add_argument("--quick", action="store_true", help="3000 memories, 30 queries (smoke test)")
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.queries = 3000, 30
    result: dict[str, Any] = {"machine": machine(), "k": K, "size": args.size}
    log(f"embedding {args.size} memories")
    vectors, questions = retrieval(args.size)
    result["retrieval"] = measure("retrieval", vectors, questions)  # (every question of both evaluations)
    rng = np.random.default_rng(11)
    vectors = unit(rng.standard_normal((args.size, DIM)))
    result["random"] = measure("random", vectors, unit(rng.standard_normal((args.queries, DIM))))
    near = vectors[rng.integers(0, args.size, args.queries)] + 0.02 * rng.standard_normal((args.queries, DIM))
    result["random-near"] = measure("random-near", vectors, unit(near))
    result["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
