#!/usr/bin/env python
"""Retrieval evaluation: eventmem's shipped benchmark run through the real service.

The data (``tests/eval/memories.jsonl``, ``tests/eval/queries.jsonl``) is a coding agent's memory of
a fictional invoicing SaaS ("ledgerly": decisions, conventions, error → fix pairs, what changed,
code patterns, task notes) plus a second project ("tidepool") on similar topics. It is loaded into
temporary git repositories as journal events with back-dated timestamps (so recency means
something): expired memories are saved long ago with a short TTL, superseded ones are linked with
``supersedes``, and tidepool lives in its own project directory. Every query is then asked through
``MemoryService.recall`` of the ledgerly project, for each configuration:

- ``keyword``: the FTS5 index alone;
- ``<embedder> vector``: the embedder alone;
- ``<embedder> hybrid linear a/b``, ``<embedder> hybrid rrf``: fused, with the importance and
  recency boosts of the default config.

Metrics (over queries that have relevant memories): recall@5, recall@10 (share of the relevant
memories in the top k, averaged), MRR (reciprocal rank of the first relevant one, within the top
10), p50 latency of one ``recall(limit=10)`` call; per query category too. ``violations`` counts
results, over all queries, that are expired, superseded or from the other project: it must be 0.

Queries are split in two halves by id (odd ids: ``dev``, even: ``test``); ``--grid`` searches fusion
weights and boosts on ``dev`` only and reports the chosen setting on both halves, so a default picked
from it is not simply fitted to the questions it is judged on.

``--no-match`` asks instead a fixed set of queries that match nothing in the benchmark (made-up words,
random letter strings, off-topic questions: :data:`NO_MATCH`) and counts, per configuration, those
that return anything, and those that return a memory holding none of the query's words (found by
its vector alone): a search that matches nothing should return nothing.

``--distractors N`` adds N unrelated memories (``tools/bench.py``'s synthetic coding notes) to the
main project, to see how the answers hold in a larger memory.

Usage::

    python tools/eval.py                         # hashing (default) and onnx:minilm when installed
    python tools/eval.py --embedders hashing     # only the built-in embedder
    python tools/eval.py --standins              # also Ollama / OpenAI HTTP providers against local
                                                 #   stand-in servers serving the MiniLM vectors
    python tools/eval.py --grid                  # fusion/boost grid on the dev split
    python tools/eval.py --json out.json
    python tools/eval.py --embedders hashing --distractors 10000
    python tools/eval.py --no-match              # queries that match nothing: how many answer
    python tools/eval.py --hard --json hard.json # the hard evaluation (tools/eval_hard.py)
    python tools/eval.py --locomo ../shared/quality/locomo-dev.json --json dev.json
                                                 # a LoCoMo conversation set through the MCP tools
                                                 #   (tools/eval_locomo.py; --misses prints the misses)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "eval"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from eval_common import read_jsonl  # noqa: E402

from eventmem.core.events import AnyEvent, LinkAdded, MemorySaved  # noqa: E402
from eventmem.core.ids import new_id, to_iso  # noqa: E402
from eventmem.core.summarizer import ExtractiveSummarizer  # noqa: E402
from eventmem.journal.config import Config  # noqa: E402
from eventmem.journal.project import RootChoice  # noqa: E402
from eventmem.service import MemoryService, open_service  # noqa: E402

MADE_UP_WORDS = (
    "florbix quandrel zemplotic brastow glimmerfax trundlewick vorpelline snizzle plonkerate mavrosque "
    "drizzlenaut kexotrop wumblecrank yastrophy fendlebork crumplestad ozzifrond blintermoss xanthulope perriwangle"
).split()
_letters = random.Random(7)
RANDOM_STRINGS = tuple(
    "".join(_letters.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_letters.randint(5, 12))) for _ in range(15)
)
OFF_TOPIC = (
    "what is the capital of Peru",
    "how tall is Mount Everest",
    "recipe for banana bread",
    "who won the football world cup in 1998",
    "when should tulip bulbs be planted",
    "how do whales sleep",
    "the plot of Hamlet",
    "best hiking trails in Patagonia",
    "how to knit a scarf",
    "why is the sky blue",
    "symptoms of the common cold",
    "who painted the Mona Lisa",
    "how many moons does Jupiter have",
    "translate good morning into Italian",
    "rules of cricket",
)
NO_MATCH = (*MADE_UP_WORDS, *RANDOM_STRINGS, *OFF_TOPIC)
"""Queries no benchmark memory answers. A few off-topic questions share a word with some memory
("blue", "rules", "good"): those memories come back as keyword matches, by design."""

CATEGORIES = ("exact", "paraphrase", "identifier", "error", "changed", "negative")
MAIN = "ledgerly"


@dataclass
class Dataset:
    memories: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    forbidden: set[str] = field(default_factory=set)
    """Ids that must never be returned: expired, superseded, other project."""

    @classmethod
    def load(cls, folder: Path = DATA) -> Dataset:
        memories, queries = read_jsonl(folder / "memories.jsonl"), read_jsonl(folder / "queries.jsonl")
        data = cls(memories, queries)
        superseded = {m["supersedes"] for m in memories if m.get("supersedes")}
        for memory in memories:
            expired = memory.get("ttl_seconds") is not None and memory["ttl_seconds"] < memory["age_days"] * 86400
            if memory["project"] != MAIN or expired or memory["id"] in superseded:
                data.forbidden.add(memory["id"])
        bad = {r for q in queries for r in q["relevant"] if r in data.forbidden}
        if bad:
            raise SystemExit(f"relevant memories that must never be returned: {sorted(bad)}")
        return data


def split_of(query: dict[str, Any]) -> str:
    return "dev" if int(query["id"][1:]) % 2 else "test"


def git_init(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)


def events_for(memories: list[dict[str, Any]], now: datetime) -> list[AnyEvent]:
    summarizer = ExtractiveSummarizer()
    events: list[AnyEvent] = []
    for memory in sorted(memories, key=lambda m: -m["age_days"]):
        ts = to_iso(now - timedelta(days=memory["age_days"]))
        events.append(
            MemorySaved(
                id=new_id(),
                ts=ts,
                by="eval",
                memory=memory["id"],
                kind=memory["kind"],
                title=memory["title"],
                content=memory["content"],
                summary=summarizer.summarize([memory["content"]])[0],
                tags=tuple(memory["tags"]),
                importance=memory["importance"],
                ttl_seconds=memory.get("ttl_seconds"),
            )
        )
        if memory.get("supersedes"):
            events.append(
                LinkAdded(
                    id=new_id(),
                    ts=ts,
                    by="eval",
                    link=new_id(),
                    source=memory["id"],
                    target=memory["supersedes"],
                    relation="supersedes",
                )
            )
    return events


def distractors(count: int, now: datetime) -> list[AnyEvent]:
    """``count`` unrelated memories for the main project: ``tools/bench.py``'s synthetic coding notes
    (a Zipf-distributed vocabulary of coding words and identifiers), saved over the past year."""
    sys.path.insert(0, str(ROOT / "tools"))
    from bench import Corpus, saved_event

    rng = random.Random(count)
    return [
        saved_event(memory, to_iso(now - timedelta(days=rng.random() * 365)), "eval")
        for memory in Corpus(seed=count).memories(count)
    ]


@contextlib.contextmanager
def projects(data: Dataset, extra: int = 0) -> Iterator[tuple[Path, dict[str, str]]]:
    """Temporary git repositories holding the journals; yields the main one and the environment.
    ``extra``: that many unrelated memories join the main project (see :func:`distractors`)."""
    with tempfile.TemporaryDirectory(prefix="eventmem-eval-") as tmp:
        base = Path(tmp)
        env = {"EVENTMEM_GLOBAL_DIR": str(base / "global"), "EVENTMEM_DURABILITY": "flush"}
        now = datetime.now(UTC)
        for name in sorted({m["project"] for m in data.memories}):
            root = base / name
            git_init(root)
            service = open_service(RootChoice(root, "eval"), environ=env | {"EVENTMEM_EMBEDDER": "hashing"})
            events = events_for([m for m in data.memories if m["project"] == name], now)
            service.project.append(events + (distractors(extra, now) if name == MAIN and extra else []))
            service.close()
        yield base / MAIN, env


@dataclass
class Setting:
    name: str
    mode: str
    overrides: dict[str, Any] = field(default_factory=dict)


def settings_for(label: str, *, vector: bool = True) -> list[Setting]:
    """Vector only, the default linear fusion (the Config's weights and boosts), and RRF."""
    out = [Setting(f"{label} vector", "vector")] if vector else []
    out += [
        Setting(f"{label} hybrid linear", "hybrid", {"fusion": "linear"}),
        Setting(f"{label} hybrid rrf", "hybrid", {"fusion": "rrf", "vector_weight": 1.0, "keyword_weight": 1.0}),
    ]
    return out


def evaluate(service: MemoryService, data: Dataset, setting: Setting, *, split: str | None = None) -> dict[str, Any]:
    base = service.project.config
    service.config = msgspec.structs.replace(base, **setting.overrides)
    service.project.forget_query_vectors()  # (each configuration embeds its queries afresh)
    rows: list[dict[str, Any]] = []
    violations: list[tuple[str, str]] = []
    latencies: list[float] = []
    for query in data.queries:
        if split is not None and split_of(query) != split:
            continue
        started = time.perf_counter()
        hits = service.recall(query["query"], limit=10, mode=setting.mode)  # type: ignore[arg-type]
        latencies.append(time.perf_counter() - started)
        ranked = [h.id for h in hits]
        violations += [(query["id"], h) for h in ranked if h in data.forbidden]
        relevant = set(query["relevant"])
        if not relevant:
            continue
        first = next((i for i, h in enumerate(ranked) if h in relevant), None)
        rows.append(
            {
                "category": query["category"],
                "r5": len(relevant & set(ranked[:5])) / len(relevant),
                "r10": len(relevant & set(ranked[:10])) / len(relevant),
                "rr": 0.0 if first is None else 1.0 / (first + 1),
            }
        )
    service.config = base

    def summary(selected: list[dict[str, Any]]) -> dict[str, float]:
        if not selected:
            return {"n": 0}
        return {
            "n": len(selected),
            "recall@5": round(statistics.fmean(r["r5"] for r in selected), 4),
            "recall@10": round(statistics.fmean(r["r10"] for r in selected), 4),
            "mrr": round(statistics.fmean(r["rr"] for r in selected), 4),
        }

    return {
        "setting": setting.name,
        "mode": setting.mode,
        "overrides": setting.overrides,
        **summary(rows),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "violations": len(violations),
        "violation_examples": violations[:5],
        "by_category": {c: summary([r for r in rows if r["category"] == c]) for c in CATEGORIES},
    }


def no_match(service: MemoryService, setting: Setting, queries: tuple[str, ...] = NO_MATCH) -> dict[str, Any]:
    """How many of ``queries`` (none of which any memory answers) return anything, and how many return
    a memory found by its vector alone (no keyword score)."""
    base = service.project.config
    service.config = msgspec.structs.replace(base, **setting.overrides)
    answered: list[str] = []
    by_vector: list[tuple[str, str, float]] = []
    try:
        for query in queries:
            hits = service.recall(query, limit=10, mode=setting.mode)  # type: ignore[arg-type]
            if hits:
                answered.append(query)
            alone = [h for h in hits if h.keyword_score == 0]
            if alone:
                by_vector.append((query, alone[0].title, round(alone[0].vector_score, 3)))
    finally:
        service.config = base
    return {
        "setting": setting.name,
        "mode": setting.mode,
        "queries": len(queries),
        "answered": len(answered),
        "by_vector_alone": len(by_vector),
        "answered_examples": answered[:8],
        "vector_examples": by_vector[:5],
    }


def no_match_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | queries | return anything | return a memory by its vector alone |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {r['setting']} | {r['queries']} | {r['answered']} | {r['by_vector_alone']} |" for r in rows]
    return "\n".join(lines)


def open_with(root: Path, env: dict[str, str], embedder: str) -> tuple[MemoryService, float]:
    started = time.perf_counter()
    service = open_service(RootChoice(root, "eval"), environ=env | {"EVENTMEM_EMBEDDER": embedder})
    return service, time.perf_counter() - started


def grid(service: MemoryService, data: Dataset, label: str) -> list[dict[str, Any]]:
    """Fusion settings scored on the dev split (and, for the record, on test)."""
    candidates: list[Setting] = []
    for vector_weight in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        for importance in (0.0, 0.1):
            for recency in (0.0, 0.05):
                overrides = {
                    "fusion": "linear",
                    "vector_weight": vector_weight,
                    "keyword_weight": round(1 - vector_weight, 2),
                    "importance_boost": importance,
                    "recency_boost": recency,
                }
                name = f"{label} linear {vector_weight:.1f} imp {importance} rec {recency}"
                candidates.append(Setting(name, "hybrid", overrides))
    for keyword_weight in (0.5, 1.0, 2.0):
        overrides = {"fusion": "rrf", "vector_weight": 1.0, "keyword_weight": keyword_weight}
        candidates.append(Setting(f"{label} rrf kw {keyword_weight}", "hybrid", overrides))
    out = []
    for setting in candidates:
        dev = evaluate(service, data, setting, split="dev")
        test = evaluate(service, data, setting, split="test")
        out.append({"setting": setting.name, "overrides": setting.overrides, "dev": dev, "test": test})
    out.sort(key=lambda r: (-r["dev"]["recall@5"], -r["dev"]["mrr"]))
    return out


def table(results: list[dict[str, Any]]) -> str:
    head = "| configuration | recall@5 | recall@10 | MRR | paraphrase r@5 | p50 ms | violations |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        para = r["by_category"]["paraphrase"].get("recall@5", 0.0)
        lines.append(
            f"| {r['setting']} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | {r['mrr']:.3f} | "
            f"{para:.3f} | {r['p50_ms']:.1f} | {r['violations']} |"
        )
    return "\n".join(lines)


def category_table(results: list[dict[str, Any]]) -> str:
    cats = [c for c in CATEGORIES if c != "negative"] + ["negative"]
    lines = ["| configuration | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
    for r in results:
        cells = [f"{r['by_category'][c].get('recall@5', 0.0):.3f}" for c in cats]
        lines.append(f"| {r['setting']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(
    data: Dataset,
    embedders: list[str],
    *,
    standins: bool = False,
    with_grid: bool = False,
    split: str | None = None,
    vector: bool = True,
    keyword: bool = True,
    extra: int = 0,
    only_no_match: bool = False,
) -> dict[str, Any]:
    """The benchmark's rows (or, ``only_no_match``, the :func:`no_match` rows) for each embedder."""
    results: list[dict[str, Any]] = []
    unmatched: list[dict[str, Any]] = []
    builds: dict[str, float] = {}
    grids: dict[str, list[dict[str, Any]]] = {}
    with projects(data, extra) as (root, env):
        for embedder in embedders:
            service, seconds = open_with(root, env, embedder)
            builds[embedder] = round(seconds, 3)
            try:
                if only_no_match:
                    first = [Setting("keyword", "keyword")] if keyword and embedder == embedders[0] else []
                    unmatched += [no_match(service, s) for s in first + settings_for(embedder, vector=vector)]
                    continue
                if keyword and embedder == embedders[0]:
                    results.append(evaluate(service, data, Setting("keyword", "keyword"), split=split))
                results += [evaluate(service, data, s, split=split) for s in settings_for(embedder, vector=vector)]
                if with_grid:
                    grids[embedder] = grid(service, data, embedder)
            finally:
                service.close()
        if standins and not only_no_match:
            results += run_standins(root, env, data, builds, split)
    return {
        "memories": len(data.memories),
        "distractors": extra,
        "queries": len(data.queries),
        "split": split or "all",
        "default_config": {
            k: getattr(Config(), k)
            for k in ("fusion", "vector_weight", "keyword_weight", "importance_boost", "recency_boost")
        },
        "open_and_embed_seconds": builds,
        "results": results,
        "grid": grids,
        "no_match": unmatched,
    }


def run_standins(
    root: Path, env: dict[str, str], data: Dataset, builds: dict[str, float], split: str | None
) -> list[dict[str, Any]]:
    """The HTTP providers, end to end, against local stand-ins that serve MiniLM vectors."""
    sys.path.insert(0, str(ROOT / "tests"))
    from embedding_standins import StandIn, serve

    from eventmem.embedders.providers import OnnxEmbedder

    out: list[dict[str, Any]] = []
    standin = StandIn(embedder=OnnxEmbedder("minilm"), models=("all-minilm", "all-minilm:latest", "minilm"))
    with serve(standin) as running:
        specs = {
            "ollama (stand-in)": f"ollama:all-minilm@{running.url}",
            "openai (stand-in)": f"openai:minilm@{running.url}/v1?dim=384",
        }
        for label, spec in specs.items():
            service, seconds = open_with(root, env, spec)
            builds[label] = round(seconds, 3)
            try:
                out += [evaluate(service, data, s, split=split) for s in settings_for(label, vector=False)]
            finally:
                service.close()
    return out


def available_embedders() -> list[str]:
    from eventmem.embedders.providers import onnx_available

    return ["hashing", "onnx:minilm"] if onnx_available() else ["hashing"]


def hard(embedders: list[str], every: int, out: Path | None) -> int:
    """``--hard``: the hard evaluation's table and JSON (see ``tools/eval_hard.py``)."""
    import eval_hard

    data = eval_hard.HardSet.load()
    data = data.slice(every) if every > 1 else data
    report = eval_hard.run(data, embedders)
    print(f"{report['memories']} memories, {report['queries']} questions (hard evaluation)\n")
    print(eval_hard.table(report))
    if out:
        out.write_text(json.dumps(report, indent=2))
    print("\n" + json.dumps({"results": [{k: r[k] for k in r if k != "by_split"} for r in report["results"]]}))
    return 0


def locomo(path: Path, embedders: list[str], out: Path | None, *, misses: bool) -> int:
    """``--locomo PATH``: the conversational benchmark's table and JSON (see ``tools/eval_locomo.py``)."""
    import eval_locomo

    if not path.is_file():
        print(f"no LoCoMo file at {path}: nothing to evaluate", file=sys.stderr)
        return 2
    report = eval_locomo.run(path, embedders)
    print(f"{len(report['conversations'])} conversations, {report['turns']} turns, {report['questions']} questions\n")
    print(eval_locomo.table(report))
    if misses:
        for row in report["results"]:
            print(f"\nmisses of {row['setting']} (evidence not all in the top 5):")
            for miss in row["misses"]:
                print(f"  [{miss['category']}] {miss['question']}  evidence {miss['evidence']}  top5 {miss['top5']}")
    written = eval_locomo.without_misses(report)
    if out:
        out.write_text(json.dumps(written, indent=2))
    print("\n" + json.dumps({"results": [{k: r[k] for k in r if k != "by_category"} for r in written["results"]]}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", help="comma-separated embedder specs (default: hashing, onnx:minilm)")
    parser.add_argument("--standins", action="store_true", help="also the HTTP providers against local stand-ins")
    parser.add_argument("--grid", action="store_true", help="search fusion settings on the dev split")
    parser.add_argument("--split", choices=("dev", "test"), help="only this half of the queries")
    parser.add_argument("--json", type=Path, help="also write the full results here")
    parser.add_argument(
        "--distractors", type=int, default=0, metavar="N", help="add N unrelated memories to the main project"
    )
    parser.add_argument("--no-match", action="store_true", help="only count answers to queries that match nothing")
    parser.add_argument(
        "--hard", action="store_true", help="the hard evaluation (tests/eval/hard/, tools/eval_hard.py)"
    )
    parser.add_argument("--every", type=int, default=1, metavar="N", help="--hard: every N-th question per category")
    parser.add_argument("--locomo", type=Path, metavar="PATH", help="a LoCoMo conversation set (tools/eval_locomo.py)")
    parser.add_argument("--misses", action="store_true", help="--locomo: print the questions missed in the top 5")
    args = parser.parse_args(argv)
    embedders = args.embedders.split(",") if args.embedders else available_embedders()
    if args.hard:
        return hard(embedders, args.every, args.json)
    if args.locomo:
        return locomo(args.locomo, embedders, args.json, misses=args.misses)
    data = Dataset.load()
    if args.no_match:
        report = run(data, embedders, extra=args.distractors, only_no_match=True)
        among = f" among {report['distractors']} unrelated ones" if report["distractors"] else ""
        print(f"{len(NO_MATCH)} queries that match nothing, against {report['memories']} memories{among}\n")
        print(no_match_table(report["no_match"]))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        print("\n" + json.dumps({"no_match": report["no_match"]}))
        return 0
    report = run(data, embedders, standins=args.standins, with_grid=args.grid, split=args.split, extra=args.distractors)
    defaults = report["default_config"]
    among = f" among {report['distractors']} unrelated ones" if report["distractors"] else ""
    print(f"{report['memories']} memories{among}, {report['queries']} queries ({report['split']})")
    print(
        f"hybrid linear = {defaults['vector_weight']}/{defaults['keyword_weight']}, importance boost "
        f"{defaults['importance_boost']}, recency boost {defaults['recency_boost']} (the defaults)\n"
    )
    print(table(report["results"]))
    print("\nrecall@5 by query category\n")
    print(category_table(report["results"]))
    for embedder, rows in report["grid"].items():
        print(f"\ngrid for {embedder} (sorted by dev recall@5; test shown for the record)\n")
        for row in rows[:8]:
            print(
                f"  {row['setting']:<45} dev r@5 {row['dev']['recall@5']:.3f} mrr {row['dev']['mrr']:.3f}"
                f" | test r@5 {row['test']['recall@5']:.3f} mrr {row['test']['mrr']:.3f}"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print("\n" + json.dumps({"results": [{k: r[k] for k in r if k != "by_category"} for r in report["results"]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
