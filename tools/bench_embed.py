#!/usr/bin/env python
"""Embedding benchmarks: throughput per provider, cold start per provider, and rebuilds.

Prints one JSON object on stdout (progress on stderr). Texts are the benchmark's memories
(``tests/eval/memories.jsonl``, 40-60 words each) made unique with a numbered suffix.

- ``throughput``: texts embedded per second (wall and per CPU-second of this process) for each
  provider: the built-in ``hashing`` (v4, and v3, v2 and v1 for reference; v4 also with every text
  made of words it has not seen, ``cold words``), ``onnx:minilm`` with 1 and 2
  intra-op threads, and the HTTP providers (Ollama, OpenAI-compatible) against local stand-in servers
  that answer with the MiniLM vectors, so their figure is MiniLM plus the HTTP round trips.
- ``cold_start``: ``python -m eventmem serve`` spawned by a stdio MCP client on a project of
  ``--cold-memories`` memories whose embedding cache and snapshot are warm (a restart): seconds to
  ``initialize`` answered, to the first ``retrieve_context`` answered, and until that answer is no
  longer keyword-only (the model is loaded). Also the same for a first start with an empty cache.
- ``recall``: the built-in embedder's v4 (the default) beside v3 (the default before it) on every
  shipped evaluation, in the same run: ``tools/eval.py``'s benchmark and hard evaluation (the hybrid
  rows, recall@5, recall@10, MRR), and the LoCoMo dev set through the MCP tools when ``--locomo
  PATH`` names it.
- ``rebuild``: ``Store.rebuild()`` of ``--rebuild-memories`` memories (100k by default) with the
  default embedder, with an empty and with a full embedding cache. With a full cache nothing is
  embedded, so that figure holds for any 384-dimensional provider; for ONNX the empty-cache rebuild
  is measured on ``--onnx-rebuild-memories`` and extrapolated from its rate.

The machine's cores are shared: run it on a quiet machine, and quote CPU-second figures if not.

Usage::

    python tools/bench_embed.py                        # everything (about 10-15 minutes)
    python tools/bench_embed.py --quick                # small sizes, for a smoke test
    python tools/bench_embed.py --out bench-embed.json
    python tools/bench_embed.py --skip throughput,recall,cold_start,rebuild --baseline main  # v4 against main's code

- ``versus_baseline`` (with ``--baseline REF``): the default embedder against its own code at git REF, alternated
  in one process, cold table (every word new, as in a fresh clone) and warm, on the benchmark's memories,
  on them with new words, on the repository's docs and code split in paragraphs, on long notes and
  (``--locomo PATH``) on conversational turns: texts per CPU-second, ratios, and whether every vector is
  bit for bit the baseline's (a change of version 4's vectors would need a new version). A cold table is a
  fresh process's: the embedder's per-process caches (words, n-grams, word pieces) are emptied first. Then one
  text alone (a question with a new word, a question and a memory of words met before), microseconds per CPU;
  ``--single-baseline REF`` measures one text alone against another ref too (the code before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from bench_json import emit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.events import MemorySaved  # noqa: E402
from eventmem.core.ids import new_id, to_iso  # noqa: E402
from eventmem.embedders.embedder import Embedder, HashingEmbedder  # noqa: E402
from eventmem.embedders.providers import OllamaEmbedder, OnnxEmbedder, OpenAIEmbedder, onnx_available  # noqa: E402
from eventmem.journal.config import Config  # noqa: E402
from eventmem.journal.project import ProjectPaths  # noqa: E402
from eventmem.runner.runner import Store  # noqa: E402

SEGMENT_EVENTS = 25_000
QUERY = "how are invoice numbers allocated"


def log(message: str) -> None:
    print(f"[bench_embed {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def texts(count: int, seed: int = 0) -> list[str]:
    base = [json.loads(line) for line in (ROOT / "tests/eval/memories.jsonl").read_text().splitlines() if line]
    rng = random.Random(seed)
    out = []
    for i in range(count):
        memory = base[i % len(base)]
        out.append(f"{memory['title']}. {memory['content']} (note {i}, case {rng.randrange(10**6)})")
    return out


def long_repetitive_texts(count: int) -> list[str]:
    """Notes of about 8 KB that repeat words of their own (a log pasted in, a generated listing): each
    word new to the embedder's table, and met many times in its text."""
    return [f"Note {i}: " + " ".join(f"step{i}x{j % 40} value{i}y{j % 25}" for j in range(500)) for i in range(count)]


def measure(embedder: Embedder, sample: list[str], batch: int = 64, *, fresh_words: bool = False) -> dict[str, Any]:
    """Texts per second; ``fresh_words``: every text gets words no text before it had (a cold table)."""
    if fresh_words:
        sample = [f"{text} zq{i}x zr{i}y" for i, text in enumerate(sample)]
    embedder.embed(sample[:2] if not fresh_words else ["warm up"])  # load the model, warm caches
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(sample), batch):
        embedder.embed(sample[start : start + batch])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "texts": len(sample),
        "texts_per_s": round(len(sample) / wall, 1),
        "texts_per_cpu_s": round(len(sample) / cpu, 1) if cpu > 0 else None,
        "seconds": round(wall, 2),
    }


def throughput(count: int, onnx_count: int, *, onnx: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sample = texts(count)
    builtin = (
        ("hashing (v4, default)", HashingEmbedder()),
        ("hashing:v3", HashingEmbedder(version=3)),
        ("hashing:v2", HashingEmbedder(version=2)),
        ("hashing:v1", HashingEmbedder(version=1)),
    )
    for label, embedder in builtin:
        log(f"throughput {label}")
        out[label] = measure(embedder, sample)
    log("throughput hashing v4 on words it has not seen")
    out["hashing (v4, default), cold words"] = measure(HashingEmbedder(), texts(count, seed=3), fresh_words=True)
    log("throughput hashing v4 on long notes that repeat words it has not seen")
    out["hashing (v4, default), long notes of repeated new words"] = measure(
        HashingEmbedder(), long_repetitive_texts(max(1, count // 50)), batch=8
    )
    if not onnx:
        return out
    if not onnx_available():
        out["onnx:minilm"] = "not installed (pip install 'eventmem[onnx]')"
        return out
    small = texts(onnx_count, seed=1)
    for threads in (1, 2):
        log(f"throughput onnx threads={threads}")
        out[f"onnx:minilm?threads={threads}"] = measure(OnnxEmbedder("minilm", threads=threads), small)
    from embedding_standins import StandIn, serve

    standin = StandIn(embedder=OnnxEmbedder("minilm"), models=("all-minilm", "minilm"))
    with serve(standin) as running:
        for label, http in (
            ("ollama (stand-in serving MiniLM)", OllamaEmbedder("all-minilm", url=running.url, dim=384)),
            ("openai (stand-in serving MiniLM)", OpenAIEmbedder("minilm", url=running.url + "/v1", dim=384)),
        ):
            log(f"throughput {label}")
            result = measure(http, small)
            result["note"] = "includes the stand-in's own MiniLM time in this process's CPU time"
            out[label] = result
    return out


def populate(root: Path, count: int) -> None:
    paths = ProjectPaths(root)
    paths.ensure()
    now = datetime.now(UTC)
    body = texts(count, seed=2)
    for first in range(0, count, SEGMENT_EVENTS):
        lines = []
        for i, text in enumerate(body[first : first + SEGMENT_EVENTS], start=first):
            title, _, content = text.partition(". ")
            event = MemorySaved(
                id=new_id(),
                ts=to_iso(now - timedelta(minutes=count - i)),
                by="bench",
                memory=new_id(),
                title=title,
                content=content,
                summary=content[:200],
                tags=("bench",),
            )
            lines.append(encode_event(event))
        (paths.journal_dir / f"bench{first // SEGMENT_EVENTS:03d}.main.jsonl").write_bytes(b"".join(lines))


def git_init(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)


def rebuild(tmp: Path, count: int, embedder: Embedder, *, label: str) -> dict[str, Any]:
    root = tmp / f"rebuild-{label.replace(':', '-')}-{count}"
    git_init(root)
    populate(root, count)
    paths = ProjectPaths(root)
    config = Config(durability="flush")
    out: dict[str, Any] = {"memories": count, "embedder": embedder.model_id}
    for state in ("empty_cache", "full_cache"):
        if state == "empty_cache":
            shutil.rmtree(paths.cache_dir / "embeddings", ignore_errors=True)
        store = Store(paths, config, embedder)
        log(f"rebuild {label} {count} with {state}")
        wall, cpu = time.perf_counter(), time.process_time()
        store.rebuild()
        out[f"{state}_s"] = round(time.perf_counter() - wall, 2)
        out[f"{state}_cpu_s"] = round(time.process_time() - cpu, 2)
        store.close()
    return out


async def serve_timing(root: Path, env: dict[str, str], query: str, *, wait_ready: bool) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "eventmem", "serve", "--root", str(root)], env=env, cwd=str(root)
    )
    started = time.perf_counter()
    out: dict[str, Any] = {}
    async with Client(params, mode="legacy") as client:
        out["initialize_s"] = round(time.perf_counter() - started, 3)
        result = await client.call_tool("retrieve_context", {"query": query})
        out["first_answer_s"] = round(time.perf_counter() - started, 3)
        content = result.structured_content or {}
        out["first_answer_keyword_only"] = any("keyword matches only" in w for w in content.get("warnings", []))
        if wait_ready:
            deadline = time.perf_counter() + 900
            while time.perf_counter() < deadline:
                content = (await client.call_tool("retrieve_context", {"query": query})).structured_content or {}
                if not any("keyword matches only" in w for w in content.get("warnings", [])):
                    break
                await anyio.sleep(0.2)
            out["vectors_ready_s"] = round(time.perf_counter() - started, 3)
    return out


def cold_start(tmp: Path, count: int, specs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in specs:
        root = tmp / f"cold-{spec.replace(':', '-')}"
        git_init(root)
        populate(root, count)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
        env |= {"EVENTMEM_EMBEDDER": spec, "EVENTMEM_GLOBAL_DIR": str(tmp / f"global-{spec}"), "PYTHONPATH": str(ROOT)}
        log(f"cold start {spec}: first start (nothing cached)")
        first = anyio.run(lambda r=root, e=env: serve_timing(r, e, QUERY, wait_ready=True))
        log(f"cold start {spec}: restart (cache and snapshot warm)")
        warm = anyio.run(lambda r=root, e=env: serve_timing(r, e, QUERY, wait_ready=True))
        out[spec] = {"memories": count, "first_start": first, "restart": warm}
    return out


def recall(locomo: Path | None, every: int) -> dict[str, Any]:
    """v4 (the default) beside v3 on the shipped evaluations (and the LoCoMo dev set if given)."""
    import eval as easy_eval
    import eval_hard

    specs = ["hashing:v3", "hashing"]
    out: dict[str, Any] = {}
    log("recall: the shipped benchmark")
    report = easy_eval.run(easy_eval.Dataset.load(), specs, vector=False, keyword=False)
    out["benchmark"] = [
        {k: r[k] for k in ("setting", "recall@5", "recall@10", "mrr", "p50_ms")} for r in report["results"]
    ]
    log(f"recall: the hard evaluation (every {every}. question)")
    data = eval_hard.HardSet.load()
    hard = eval_hard.run(data.slice(every) if every > 1 else data, specs, keyword=False, vector=False)
    out["hard"] = [
        {
            "setting": r["setting"],
            **{s: {k: r["by_split"][s][k] for k in ("recall@5", "recall@10", "mrr")} for s in eval_hard.SPLITS},
        }
        for r in hard["results"]
    ]
    if locomo is not None and locomo.is_file():
        import eval_locomo

        log("recall: the LoCoMo dev set")
        report = eval_locomo.run(locomo, specs, keyword=False)
        out["locomo_dev"] = [
            {k: r[k] for k in ("setting", "recall@5", "recall@10", "hit@10", "mrr", "p50_ms")}
            for r in report["results"]
        ]
    return out


def repo_paragraphs(limit: int, chars: int = 380) -> list[str]:
    """Real text: the repository's docs and code split at blank lines, each paragraph cut to ``chars``."""
    out = []
    for path in sorted([*(ROOT / "docs").glob("*.md"), *(ROOT / "eventmem").rglob("*.py")]):
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            paragraph = paragraph.strip()
            if len(paragraph) > 40:
                out.append(paragraph[:chars])
    return out[:limit]


def locomo_turns(path: Path) -> list[str]:
    """The turns of a LoCoMo-format conversation set (short conversational text; measured, never stored)."""
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for session in sample["conversation"].values():
            if isinstance(session, list):
                out += [turn["text"] for turn in session if isinstance(turn, dict) and turn.get("text")]
    return out


BASELINE_MODULES = ("eventmem/core/words.py", "eventmem/embedders/wordtable.py", "eventmem/embedders/embedder.py")
"""The built-in embedder's code: loaded as it is at the baseline's ref, each importing the others at that ref."""


def baseline_embedder_module(ref: str) -> Any:
    """The built-in embedder's module as it is at git ``ref``, loaded beside the current one with its words and its
    word table as they are at ``ref`` too (a module missing there is not loaded)."""
    import types

    import eventmem.embedders.embedder as current

    tag = "".join(c if c.isalnum() else "_" for c in ref)
    names = {path[:-3].replace("/", "."): f"eventmem_at_{tag}_{Path(path).stem}" for path in BASELINE_MODULES}
    module = None
    for path, alias in zip(BASELINE_MODULES, names.values(), strict=True):
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], capture_output=True, text=True)
        if shown.returncode:
            continue
        source = shown.stdout
        for original, renamed in names.items():
            if renamed in sys.modules:
                source = source.replace(f"from {original} import", f"from {renamed} import")
        module = types.ModuleType(alias)
        module.__file__ = current.__file__  # (its data files are found beside the current module)
        sys.modules[alias] = module
        exec(compile(source, f"{ref}:{path}", "exec"), module.__dict__)
    return module


def clear_caches(*modules: Any) -> None:
    """Empty every per-process cache of the embedder's modules (the lru caches of words, n-grams, word
    pieces, the CRC tables), as a fresh process has them: a cold table is a fresh clone's first run."""
    for module in modules:
        for value in list(vars(module).values()):
            if hasattr(value, "cache_clear"):
                value.cache_clear()
        static = getattr(module, "_Static", None)
        pieces = getattr(static, "_pieces", None)
        for value in vars(pieces).values() if pieces is not None else ():
            if hasattr(value, "cache_clear"):
                value.cache_clear()


def embedder_modules(module: Any) -> list[Any]:
    """The embedder's module and the modules of its code it imports (words, the word table)."""
    out = [module]
    for value in list(vars(module).values()):
        owner = sys.modules.get(getattr(value, "__module__", "") or "")
        if (
            owner is not None
            and owner not in out
            and owner.__name__.replace(".", "_").endswith(("_words", "_wordtable"))
        ):
            out.append(owner)
    return out


def versus_baseline(ref: str, count: int, locomo: Path | None, rounds: int, batch: int = 64) -> dict[str, Any]:
    """The default built-in embedder (v4) against its code at ``ref``, alternated in one process: texts
    per CPU-second on a cold table (a new embedder and the modules' caches emptied: every word new, as in
    a fresh clone's first run) and a warm one (the same texts again), the best of ``rounds`` each, and
    whether the vectors are bit for bit the same; then one text alone (see :func:`single_texts`)."""
    import eventmem.embedders.embedder as current

    old = baseline_embedder_module(ref)
    sets: dict[str, tuple[list[str], int]] = {
        "benchmark memories (40-60 words, two unique numbers each)": (texts(count), batch),
        "benchmark memories with two new words each": (
            [f"{text} zq{i}x zr{i}y" for i, text in enumerate(texts(count, seed=3))],
            batch,
        ),
        "docs and code paragraphs (380 characters)": (repo_paragraphs(count), batch),
        "long notes that repeat new words (8 KB)": (long_repetitive_texts(max(1, count // 50)), 8),
    }
    if locomo is not None and locomo.is_file():
        sets["LoCoMo dev turns (conversational)"] = (locomo_turns(locomo)[:count], batch)

    def rate(module: Any, sample: list[str], batch: int) -> tuple[float, float, bytes]:
        clear_caches(*embedder_modules(module))
        embedder = module.HashingEmbedder()
        embedder.embed(["warm up"])
        out = []
        figures = []
        for _ in range(2):  # cold, then warm
            cpu = time.process_time()
            out += [embedder.embed(sample[start : start + batch]).tobytes() for start in range(0, len(sample), batch)]
            figures.append(len(sample) / max(time.process_time() - cpu, 1e-9))
        return figures[0], figures[1], b"".join(out)

    result: dict[str, Any] = {"baseline": ref, "rounds": rounds, "batch": batch}
    for label, (sample, size) in sets.items():
        log(f"versus {ref}: {label}")
        best: dict[str, list[float]] = {"baseline": [0.0, 0.0], "this": [0.0, 0.0]}
        same = True
        for _ in range(rounds):
            base_cold, base_warm, base_vectors = rate(old, sample, size)
            cold, warm, vectors = rate(current, sample, size)
            same = same and vectors == base_vectors
            best["baseline"] = [max(best["baseline"][0], base_cold), max(best["baseline"][1], base_warm)]
            best["this"] = [max(best["this"][0], cold), max(best["this"][1], warm)]
        result[label] = {
            "texts": len(sample),
            "cold_texts_per_cpu_s": round(best["this"][0]),
            "cold_baseline_texts_per_cpu_s": round(best["baseline"][0]),
            "cold_ratio": round(best["this"][0] / best["baseline"][0], 2),
            "warm_texts_per_cpu_s": round(best["this"][1]),
            "warm_baseline_texts_per_cpu_s": round(best["baseline"][1]),
            "warm_ratio": round(best["this"][1] / best["baseline"][1], 2),
            "vectors_bit_for_bit_the_baseline": same,
        }
    result |= single_texts(ref, old, rounds)
    return result


def single_texts(ref: str, old: Any, rounds: int, questions: int = 1000) -> dict[str, Any]:
    """One text alone (a save, a query), against the code at ``ref`` in the same process, alternated, the best of
    ``rounds``: microseconds per CPU of a question with one word new to the table (its other words met before),
    of a question whose words were all met, and of a memory of 40-60 words met before."""
    import eventmem.embedders.embedder as current

    asked = [f"how did question {i} about zq{i}w get answered" for i in range(questions)]
    saved = texts(questions // 4, seed=5)
    kinds = ("one new question alone", "one question of words met before", "one memory of words met before")
    best: dict[str, dict[str, float]] = {kind: {} for kind in kinds}
    same = True
    for _ in range(rounds):
        for name, module in (("baseline", old), ("this", current)):
            clear_caches(*embedder_modules(module))
            embedder = module.HashingEmbedder()
            embedder.embed(["how did question about get answered", *saved])
            vectors = []
            for kind, sample in zip(kinds, (asked, asked, saved), strict=True):
                cpu = time.process_time()
                vectors += [embedder.embed([text]).tobytes() for text in sample]
                figure = (time.process_time() - cpu) / len(sample) * 1e6
                best[kind][name] = min(best[kind].get(name, figure), figure)
            if name == "baseline":
                base_vectors = vectors
            else:
                same = same and vectors == base_vectors
    out: dict[str, Any] = {}
    for kind in kinds:
        out[kind] = {
            "us_per_cpu": round(best[kind]["this"], 1),
            "baseline_us_per_cpu": round(best[kind]["baseline"], 1),
            "ratio": round(best[kind]["this"] / best[kind]["baseline"], 3),
        }
    out["single texts: vectors bit for bit the baseline"] = same
    log(
        f"versus {ref}: one text alone: "
        + ", ".join(f"{k} {v['ratio']}x" for k, v in out.items() if isinstance(v, dict))
    )
    return out


def single_only(ref: str, rounds: int) -> dict[str, Any]:
    """One text alone against the code at ``ref`` (e.g. the code before a change that made it slower)."""
    return {"baseline": ref, "rounds": rounds} | single_texts(ref, baseline_embedder_module(ref), rounds)


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load] if load else None,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--throughput-texts", type=int, default=5000)
    parser.add_argument("--onnx-texts", type=int, default=512)
    parser.add_argument("--cold-memories", type=int, default=2000)
    parser.add_argument("--rebuild-memories", type=int, default=100_000)
    parser.add_argument("--onnx-rebuild-memories", type=int, default=2000)
    parser.add_argument("--skip", default="", help="comma-separated: throughput,onnx,recall,cold_start,rebuild")
    parser.add_argument("--locomo", type=Path, metavar="PATH", help="recall: also this LoCoMo dev set")
    parser.add_argument("--hard-every", type=int, default=1, metavar="N", help="recall: every N-th hard question")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also the built-in embedder against its code at git REF (e.g. main), cold and warm, in one process",
    )
    parser.add_argument("--baseline-rounds", type=int, default=3)
    parser.add_argument(
        "--versus-batch",
        type=int,
        default=64,
        metavar="N",
        help="versus the baseline: texts per call (the store embeds a fresh clone's memories 256 at a time)",
    )
    parser.add_argument(
        "--single-baseline",
        metavar="REF",
        action="append",
        default=[],
        help="also one text alone against the code at git REF (repeatable)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.throughput_texts, args.onnx_texts = 300, 64
        args.cold_memories, args.rebuild_memories, args.onnx_rebuild_memories = 200, 2000, 100
        args.hard_every = max(args.hard_every, 16)
    skip = set(filter(None, args.skip.split(",")))
    result: dict[str, Any] = {"machine": machine(), "started": datetime.now(UTC).isoformat(timespec="seconds")}
    specs = ["hashing"] + (["onnx:minilm"] if onnx_available() else [])
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-embed-") as tmp_name:
        tmp = Path(tmp_name)
        if args.baseline:
            result["versus_baseline"] = versus_baseline(
                args.baseline, args.throughput_texts, args.locomo, args.baseline_rounds, args.versus_batch
            )
        for ref in args.single_baseline:
            log(f"one text alone versus {ref}")
            result[f"single_versus_{ref}"] = single_only(ref, args.baseline_rounds)
        if "throughput" not in skip:
            result["throughput"] = throughput(args.throughput_texts, args.onnx_texts, onnx="onnx" not in skip)
        if "recall" not in skip:
            result["recall"] = recall(args.locomo, args.hard_every)
        if "cold_start" not in skip:
            result["cold_start"] = cold_start(tmp, args.cold_memories, specs)
        if "rebuild" not in skip:
            runs: dict[str, Any] = {"hashing": rebuild(tmp, args.rebuild_memories, HashingEmbedder(), label="hashing")}
            if onnx_available():
                onnx = rebuild(tmp, args.onnx_rebuild_memories, OnnxEmbedder("minilm"), label="onnx")
                rate = args.onnx_rebuild_memories / onnx["empty_cache_s"]
                onnx["extrapolated_empty_cache_s_for"] = {
                    str(args.rebuild_memories): round(args.rebuild_memories / rate, 0)
                }
                runs["onnx:minilm"] = onnx
            result["rebuild"] = runs
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in load] if load else None
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
