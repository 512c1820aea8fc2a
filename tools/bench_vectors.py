#!/usr/bin/env python
"""Vector search at scale: the approximate path (``eventmem/projectors/ann.py``) beside the exact scan.

Prints one JSON object on stdout; progress goes to stderr. For each dataset, in the same run and on
the same index: the exact scan's and the approximate path's query time (p50/p95, one query at a
time, k = 10, one FAISS thread as the server runs), the approximate path's recall@10 against the
exact answer, the same under filters that allow a shrinking share of the memories (the cross-over:
the share below which the exact scan over the allowed slots is faster; the index takes the exact
path below two fifths of ``ann_from``), recall@50 unfiltered (the depth of the service's fusion), and the
re-rank's exact scoring of that many candidates against numpy's conversion of the same float16 codes,
and with float32 scores first (``re_rank``); the approximate top 50 with the caches warm and cold
(``top_50.cold_caches``: the queries one after the other, then each after reading 64 MB).

Datasets (hashing embedder, the default, 384 dimensions):

- ``retrieval``: the shipped evaluations' memories (``tests/eval`` and ``tests/eval/hard``) among
  ``tools/bench.py``'s synthetic coding notes up to the size, queried with the evaluations' questions;
- ``random``: random unit vectors queried with random unit vectors (no neighbour is much nearer than
  the rest: the hardest case for any approximate index);
- ``random-near``: the same vectors queried with stored vectors plus noise (cosine about 0.93 to the
  vector it was made from: a question near its answer).

``real_text``, for each embedder of ``--embedders`` (``hashing``, ``onnx:minilm``): the shipped
evaluations (``tests/eval``: ``tools/eval.py``; ``tests/eval/hard``: ``tools/eval_hard.py``) and,
with ``--locomo PATH``, every turn and question of a LoCoMo file (read where it lies, as
``tools/eval.py --locomo`` reads it; nothing of it is written but figures), each set ``alone``, then
all of them ``padded`` with synthetic notes to ``--size`` (the built-in embedder) or ``--model-size``
(a model: it embeds tens of texts a second here; ``--vector-cache DIR`` keeps its vectors between
runs). The approximate path is built whatever the size (``ann_from`` 1) and forced; each set's
questions and random unit queries are asked at k = 10 and 50 (the service's fusion depth), without a
filter and under filters a user would pass (the most common type, a type passing about a tenth, a
tag passing about a fifth; LoCoMo turns are tagged with their speaker), with the default number of
candidates and with each ``--factors`` of it: recall against the exact scan (``recall_ties`` also
counts a memory tied with the exact k-th, a duplicate), p50 time interleaved query by query and
its ratio to the default; ``recall_first_10`` is the first ten of the top 50 against the exact top
10 (what the service shows). ``same_answers_from_a_second_build``: a second index of the same
vectors answers every query identically.

Usage::

    python tools/bench_vectors.py                    # 100k (a few minutes on 2 cores)
    python tools/bench_vectors.py --size 20000 --queries 50
    python tools/bench_vectors.py --quick            # 3000 memories (smoke test)
    python tools/bench_vectors.py --out vectors.json
    python tools/bench_vectors.py --locomo PATH --embedders hashing,onnx:minilm --model-size 20000 \
        --vector-cache CACHE                         # real text, both embedders
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import Corpus  # noqa: E402
from bench_json import emit  # noqa: E402
from eval_locomo import load as load_locomo  # noqa: E402
from eval_locomo import questions as locomo_questions  # noqa: E402
from eval_locomo import turns as locomo_turns  # noqa: E402

from eventmem.core.records import MemoryRecord  # noqa: E402
from eventmem.embedders.embedder import HashingEmbedder  # noqa: E402
from eventmem.embedders.providers import make_embedder_from_spec  # noqa: E402
from eventmem.projectors.ann import candidate_count  # noqa: E402
from eventmem.projectors.float16_rows import StoredRows  # noqa: E402
from eventmem.projectors.vectors import VectorIndex, embed_text  # noqa: E402

faiss.omp_set_num_threads(1)  # as eventmem's server does

EVAL = HERE.parent / "tests" / "eval"
DIM = 384
K = 10
DEPTH = 50
FRACTIONS = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005)
COLD_BYTES = 64 << 20
"""Read between queries to leave the caches cold (twice this machine's 32 MB of L3), as a server's are
after its client's and other processes' turns between two calls."""
Vectors = npt.NDArray[np.float32]


def log(message: str) -> None:
    print(f"[bench_vectors] {message}", file=sys.stderr, flush=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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


def measure(name: str, vectors: Vectors, queries: Vectors, factors: list[float]) -> dict[str, Any]:
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
    depth["by_candidates"] = against_exact(index, queries, DEPTH, widths_for(DEPTH, factors))["by_candidates"]
    depth["cold_caches"] = cold_and_warm(index, queries)
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


def cold_and_warm(index: VectorIndex, queries: Vectors) -> dict[str, Any]:
    """The approximate top 50 (the codes' scan and the exact re-rank): the queries one after the other
    (warm: the codes stay in the caches) and each after reading :data:`COLD_BYTES` (cold), p50 of each:
    what the caches' state costs the path."""
    flush = np.ones(COLD_BYTES // 8)
    warm, cold = [], []
    for query in queries:
        started = time.perf_counter()
        index.search(query, DEPTH, how="approximate")
        warm.append(time.perf_counter() - started)
    for query in queries:
        flush.sum()
        started = time.perf_counter()
        index.search(query, DEPTH, how="approximate")
        cold.append(time.perf_counter() - started)
    warm_ms, cold_ms = float(np.median(warm)) * 1000, float(np.median(cold)) * 1000
    log(f"top {DEPTH} approximate: warm {warm_ms:.3f} ms, cold {cold_ms:.3f} ms")
    return {
        "warm_p50_ms": round(warm_ms, 3),
        "cold_p50_ms": round(cold_ms, 3),
        "cold_over_warm": round(cold_ms / max(warm_ms, 1e-9), 2),
        "read_between_bytes": COLD_BYTES,
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


# -- real text: the shipped evaluations and a conversational set, for each embedder -----------------


@dataclass(frozen=True)
class TextSet:
    """Memories' texts as the vector index embeds them (``embed_text``), their kinds and tags (for the
    filters), and the questions asked of them."""

    name: str
    texts: list[str]
    kinds: list[str]
    tags: list[tuple[str, ...]]
    questions: list[str]


def shipped_sets() -> list[TextSet]:
    """``tests/eval`` (``tools/eval.py``) and ``tests/eval/hard`` (``tools/eval_hard.py``)."""
    out = []
    for name, folder in (("eval", EVAL), ("hard", EVAL / "hard")):
        memories = read_jsonl(folder / "memories.jsonl")
        out.append(
            TextSet(
                name,
                [
                    embed_text(MemoryRecord(id=m["id"], title=m["title"], content=m["content"], tags=tuple(m["tags"])))
                    for m in memories
                ],
                [m["kind"] for m in memories],
                [tuple(m["tags"]) for m in memories],
                [q["query"] for q in read_jsonl(folder / "queries.jsonl")],
            )
        )
    return out


def locomo_set(path: Path) -> TextSet:
    """Every turn of a LoCoMo file as ``tools/eval.py --locomo`` saves it (``save_context``: the text is
    the content, no title, kind ``general``), tagged here with its conversation and speaker (``c1-speaker_a``)
    so a tag filter has a share to pass; the questions of categories 1-4. Read from ``path`` at run
    time, nothing of it kept."""
    texts, tags, asked = [], [], []
    for number, sample in enumerate(load_locomo(path), 1):
        first = sample["conversation"].get("speaker_a", "")
        for _, text in locomo_turns(sample):
            texts.append(text)
            speaker = text.split("] ", 1)[-1].split(":", 1)[0]
            tags.append((f"c{number}-speaker_{'a' if speaker == first else 'b'}",))  # (no name of the set)
        asked += [q["question"] for q in locomo_questions(sample)]
    return TextSet("locomo", texts, ["general"] * len(texts), tags, asked)


def padding(count: int) -> TextSet:
    """``count`` of ``tools/bench.py``'s synthetic coding notes, made 1,000 at a time from fixed seeds
    (the first ``n`` are the same whatever the count, so a model's vectors of them can be kept)."""
    texts, kinds, tags = [], [], []
    for chunk in range(math.ceil(count / 1000)):
        for title, content, tagged, kind, _ in Corpus(seed=10_000 + chunk).memories(min(1000, count - chunk * 1000)):
            texts.append(embed_text(MemoryRecord(id="x", title=title, content=content, tags=tagged)))
            kinds.append(kind)
            tags.append(tagged)
    return TextSet("synthetic", texts, kinds, tags, [])


class Embedding:
    """An embedder by its config spec; with ``cache``, the vectors of each 1,000 texts are kept there
    (a model embeds 20-200 texts a second here) under a hash of the model and the texts."""

    def __init__(self, spec: str, cache: Path | None) -> None:
        self.spec = spec
        self.embedder = make_embedder_from_spec(spec)
        self.cache = cache

    def __call__(self, texts: list[str]) -> Vectors:
        out = []
        started, done = time.perf_counter(), 0
        for first in range(0, len(texts), 1000):
            chunk = texts[first : first + 1000]
            key = hashlib.sha256("\0".join([self.embedder.model_id, *chunk]).encode()).hexdigest()[:32]
            kept = self.cache / f"{key}.npy" if self.cache else None
            if kept is not None and kept.is_file():
                out.append(np.load(kept))
                continue
            vectors = np.vstack([self.embedder.embed(chunk[i : i + 250]) for i in range(0, len(chunk), 250)])
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            if kept is not None:
                np.save(kept, vectors)
            out.append(vectors)
            done += len(chunk)
            if done >= 2000 or len(texts) > 2000:
                log(f"{self.spec}: {first + len(chunk)}/{len(texts)} ({done / (time.perf_counter() - started):.0f}/s)")
        return np.vstack(out) if out else np.zeros((0, DIM), np.float32)


def share_filters(sets: list[TextSet]) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """Filters a user would pass over these memories (in order): the most common kind, the kind whose
    share is nearest a tenth, the tag whose share is nearest a fifth (those allowing under 1% or all
    left out)."""
    kinds = np.asarray([kind for s in sets for kind in s.kinds])
    tags = [tagged for s in sets for tagged in s.tags]
    count = len(kinds)
    out: list[tuple[str, npt.NDArray[np.bool_]]] = []
    names, counts = np.unique(kinds, return_counts=True)
    shares = counts / count
    usable = [(str(n), float(sh)) for n, sh in zip(names, shares, strict=True) if 0.01 <= sh < 1.0]
    chosen: list[tuple[str, float]] = []
    if usable:
        chosen.append(max(usable, key=lambda x: (x[1], x[0])))
        chosen.append(min(usable, key=lambda x: (abs(x[1] - 0.1), x[0])))
    for name, _ in dict.fromkeys(chosen):
        out.append((f"kind={name}", kinds == name))
    by_tag: dict[str, int] = {}
    for tagged in tags:
        for tag in tagged:
            by_tag[tag] = by_tag.get(tag, 0) + 1
    usable_tags = [(t, n / count) for t, n in by_tag.items() if 0.01 <= n / count < 1.0]
    if usable_tags:
        tag = min(usable_tags, key=lambda x: (abs(x[1] - 0.2), x[0]))[0]
        out.append((f"tag={tag}", np.asarray([tag in tagged for tagged in tags])))
    return out


def against_exact(
    index: VectorIndex,
    queries: Vectors,
    k: int,
    widths: list[int],
    allowed: npt.NDArray[np.bool_] | None = None,
) -> dict[str, Any]:
    """Recall@``k`` of the approximate path (forced) against the exact answer with each number of
    candidates, and p50 times: the exact scan first, then the widths interleaved query by query in a
    shuffled order (each follows the others equally often: the scan of 77 MB would leave the caches
    cold for whichever came after it)."""
    sides: list[int | None] = [None, *widths]  # (None: exact)
    found: dict[int | None, list[Any]] = {side: [] for side in sides}
    scored: dict[int | None, list[Any]] = {side: [] for side in sides}
    times: dict[int | None, list[float]] = {side: [] for side in sides}
    rng = np.random.default_rng(23)
    rounds = [[None] for _ in queries] + [[widths[i] for i in rng.permutation(len(widths))] for _ in queries]
    for number, order in enumerate(rounds):
        query = queries[number % len(queries)]
        for side in order:
            started = time.perf_counter()
            if side is None:
                slots, scores = index.search(query, k, allowed, how="exact")
            else:
                slots, scores = index.search(query, k, allowed, how="approximate", candidates=side)
            times[side].append(time.perf_counter() - started)
            found[side].append(slots)
            scored[side].append(scores)
    exact_ms = float(np.percentile(np.asarray(times[None]) * 1000, 50))
    default_ms = float(np.percentile(np.asarray(times[widths[0]]) * 1000, 50))
    rows = []
    for width in widths:
        ms = float(np.percentile(np.asarray(times[width]) * 1000, 50))
        row = {
            "candidates": width,
            "recall": recall(found[width], found[None]),
            "recall_ties": recall_ties(found[width], scored[width], found[None], scored[None]),
        }
        if k > K:  # (the service asks for its top 50 and shows the first ones)
            row["recall_first_10"] = recall([f[:K] for f in found[width]], [f[:K] for f in found[None]])
        rows.append(
            row
            | {
                "p50_ms": round(ms, 3),
                "time_to_default": round(ms / max(default_ms, 1e-6), 3),
                "time_to_exact": round(ms / max(exact_ms, 1e-6), 3),
            }
        )
    return {
        "k": k,
        "allowed": len(index) if allowed is None else int(np.count_nonzero(allowed)),
        "exact_p50_ms": round(exact_ms, 3),
        "by_candidates": rows,
    }


def recall_ties(found: list[Any], scores: list[Any], truth: list[Any], truth_scores: list[Any]) -> float:
    """:func:`recall`, a memory found outside the exact top ``k`` counting when it ties with its last
    (a duplicate memory: the exact scan keeps one of equal scores, the re-rank the lower slot)."""
    hits = 0
    for slots, scored, exact, exact_scores in zip(found, scores, truth, truth_scores, strict=True):
        inside = set(exact.tolist())
        last = float(exact_scores[-1]) if len(exact_scores) else math.inf
        pairs = zip(slots.tolist(), scored.tolist(), strict=True)
        tied = sum(1 for slot, score in pairs if slot not in inside and score >= last - 1e-6)
        hits += min(len(exact), len(inside & set(slots.tolist())) + tied)
    return round(hits / max(1, sum(len(b) for b in truth)), 4)


def widths_for(k: int, factors: list[float]) -> list[int]:
    """The default number of candidates for a top ``k`` first, then each other factor of it."""
    default = candidate_count(k)
    return [default, *(round(default * f) for f in factors if f != 1.0)]


def measure_text(
    name: str,
    sets: list[TextSet],
    queries: dict[str, Vectors],
    vectors: Vectors,
    factors: list[float],
    random_queries: int,
) -> dict[str, Any]:
    """The approximate path (built whatever the size) against the exact scan on these memories: each
    set's questions, then random unit queries, at k = 10 and 50, unfiltered and under each filter."""
    count = len(vectors)
    index = VectorIndex(DIM, ann_from=1)
    started = time.perf_counter()
    index.upsert(np.arange(count, dtype=np.int64), vectors)
    index.settle()
    ready_s = time.perf_counter() - started
    assert index.approximate
    rng = np.random.default_rng(17)
    asked = dict(queries)
    asked["random"] = unit(rng.standard_normal((random_queries, DIM)))
    filters = share_filters(sets)
    out: dict[str, Any] = {
        "vectors": count,
        "approximate_ready_s": round(ready_s, 3),
        "filters": {label: round(float(mask.mean()), 4) for label, mask in filters},
        "questions": {},
    }
    for asker, q in asked.items():
        if not len(q):
            continue
        figures: dict[str, Any] = {"queries": len(q)}
        for k in (K, DEPTH):
            figures[f"top_{k}"] = against_exact(index, q, k, widths_for(k, factors))
            for label, mask in filters:
                figures[f"top_{k}"][label] = against_exact(index, q, k, widths_for(k, factors), mask)
        out["questions"][asker] = figures
        tens = figures[f"top_{K}"]["by_candidates"][0]["recall"]
        fifties = figures[f"top_{DEPTH}"]["by_candidates"][0]["recall"]
        log(f"{name} / {asker}: recall@10 {tens}, recall@50 {fifties}")
    # a second index of the same vectors gives the same answers (codebooks trained the same way)
    again = VectorIndex(DIM, ann_from=1)
    again.upsert(np.arange(count, dtype=np.int64), vectors)
    again.settle()
    same = True
    for q in asked.values():
        for query in q:
            a = index.search(query, DEPTH, how="approximate")
            b = again.search(query, DEPTH, how="approximate")
            same = same and a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes()
    out["same_answers_from_a_second_build"] = same
    return out


def real_text(
    spec: str,
    locomo: Path | None,
    size: int,
    factors: list[float],
    random_queries: int,
    cache: Path | None,
) -> dict[str, Any]:
    """For one embedder: each real set alone, then all of them inside synthetic notes up to ``size``."""
    embedding = Embedding(spec, cache)
    sets = shipped_sets() + ([locomo_set(locomo)] if locomo else [])
    out: dict[str, Any] = {"embedder": embedding.embedder.model_id, "alone": {}}
    vectors = {s.name: embedding(s.texts) for s in sets}
    questions = {s.name: embedding(s.questions) for s in sets}
    for s in sets:
        out["alone"][s.name] = measure_text(s.name, [s], {s.name: questions[s.name]}, vectors[s.name], factors, 0)
    real = sum(len(s.texts) for s in sets)
    if size > real:
        log(f"{spec}: embedding {size - real} synthetic notes")
        pad = padding(size - real)
        every = np.vstack([*(vectors[s.name] for s in sets), embedding(pad.texts)])
        out["padded"] = measure_text(f"padded {size}", [*sets, pad], questions, every, factors, random_queries)
        out["padded"]["real_memories"] = real
    return out


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
    parser.add_argument("--locomo", type=Path, help="a LoCoMo file: its turns and questions join the real text")
    parser.add_argument(
        "--embedders", default="hashing", help="comma-separated embedder specs for the real text (default hashing)"
    )
    parser.add_argument(
        "--model-size", type=int, default=20_000, help="memories of the padded real text for a model embedder"
    )
    parser.add_argument(
        "--factors", default="1,1.5,2,3", help="numbers of candidates compared, as factors of the default (1,1.5,2,3)"
    )
    parser.add_argument("--vector-cache", type=Path, help="keep a model's vectors here between runs")
    parser.add_argument("--real-text-only", action="store_true", help="skip the retrieval and random datasets")
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.queries, args.model_size, args.factors = 3000, 30, 3000, "1,2"
    factors = [float(f) for f in args.factors.split(",")]
    if args.vector_cache:
        args.vector_cache.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": machine(), "k": K, "size": args.size}
    if not args.real_text_only:
        log(f"embedding {args.size} memories")
        vectors, questions = retrieval(args.size)
        result["retrieval"] = measure("retrieval", vectors, questions, factors)  # (every question of both evaluations)
        rng = np.random.default_rng(11)
        vectors = unit(rng.standard_normal((args.size, DIM)))
        result["random"] = measure("random", vectors, unit(rng.standard_normal((args.queries, DIM))), factors)
        near = vectors[rng.integers(0, args.size, args.queries)] + 0.02 * rng.standard_normal((args.queries, DIM))
        result["random-near"] = measure("random-near", vectors, unit(near), factors)
    result["real_text"] = {}
    for spec in args.embedders.split(","):
        size = args.size if spec in ("", "hashing") else args.model_size
        log(f"real text, {spec}, padded to {size}")
        result["real_text"][spec] = real_text(spec, args.locomo, size, factors, args.queries, args.vector_cache)
        result["real_text"][spec]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
