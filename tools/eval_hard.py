"""The hard retrieval evaluation (``tests/eval/hard/``, written by ``tools/make_hard_eval.py``) run
through the real service: ``python tools/eval.py --hard``.

The memories are saved as journal events at their own ``created_at`` in a temporary git repository;
every question is asked with ``MemoryService.recall(limit=10, now=<its now>)`` for each
configuration: ``keyword`` (FTS5 alone), and for each embedder ``vector`` (alone) and ``hybrid``
(the config's default fusion for that embedder). Reported per configuration, per split (``dev``,
``test``) and per category: recall@5 and recall@10 (share of the relevant memories in the top k),
MRR (first relevant within the top 10), p50 latency of one call; ``violations`` counts returned
memories that a later decision superseded with a link (must be 0) and ``stale_first`` the
questions where a decision replaced only in words ranks above its replacement.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from eval_common import read_jsonl

from eventmem.core.events import AnyEvent, LinkAdded, MemorySaved
from eventmem.core.ids import iso_to_epoch, new_id
from eventmem.core.summarizer import ExtractiveSummarizer
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService, open_service

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "eval" / "hard"
CATEGORIES = ("identifier", "paraphrase", "multi_hop", "temporal", "superseded", "distractor")
SPLITS = ("dev", "test")


@dataclass
class HardSet:
    memories: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    forbidden: set[str] = field(default_factory=set)
    """Decisions superseded by a link: never to be returned."""

    @classmethod
    def load(cls, folder: Path = DATA) -> HardSet:
        memories, queries = read_jsonl(folder / "memories.jsonl"), read_jsonl(folder / "queries.jsonl")
        forbidden = {m["supersedes"] for m in memories if m.get("supersedes")}
        return cls(memories, queries, forbidden)

    def slice(self, every: int) -> HardSet:
        """Every ``every``-th question of each category, with all the memories (a fast run)."""
        kept = [q for c in CATEGORIES for q in [q for q in self.queries if q["category"] == c][::every]]
        return HardSet(self.memories, kept, self.forbidden)


def events_for(memories: list[dict[str, Any]]) -> list[AnyEvent]:
    summarizer = ExtractiveSummarizer()
    events: list[AnyEvent] = []
    for memory in sorted(memories, key=lambda m: (m["created_at"], m["id"])):
        events.append(
            MemorySaved(
                id=new_id(),
                ts=memory["created_at"],
                by="eval",
                memory=memory["id"],
                kind=memory["kind"],
                title=memory["title"],
                content=memory["content"],
                summary=summarizer.summarize([memory["content"]])[0],
                tags=tuple(memory["tags"]),
                importance=memory["importance"],
            )
        )
        if memory.get("supersedes"):
            link = LinkAdded(
                id=new_id(),
                ts=memory["created_at"],
                by="eval",
                link=new_id(),
                source=memory["id"],
                target=memory["supersedes"],
                relation="supersedes",
            )
            events.append(link)
    return events


@contextlib.contextmanager
def project(data: HardSet) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary git repository holding the memories' journal; yields it and the environment."""
    with tempfile.TemporaryDirectory(prefix="eventmem-hard-") as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        env = {"EVENTMEM_GLOBAL_DIR": str(Path(tmp) / "global"), "EVENTMEM_DURABILITY": "flush"}
        service = open_service(RootChoice(root, "eval"), environ=env | {"EVENTMEM_EMBEDDER": "hashing"})
        service.project.append(events_for(data.memories))
        service.close()
        yield root, env


@dataclass
class Configuration:
    name: str
    mode: str
    overrides: dict[str, Any] = field(default_factory=dict)


def configurations(embedder: str, *, keyword: bool) -> list[Configuration]:
    out = [Configuration("keyword", "keyword")] if keyword else []
    return [*out, Configuration(f"{embedder} vector", "vector"), Configuration(f"{embedder} hybrid", "hybrid")]


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    return {
        "n": len(rows),
        "recall@5": round(statistics.fmean(r["r5"] for r in rows), 4),
        "recall@10": round(statistics.fmean(r["r10"] for r in rows), 4),
        "mrr": round(statistics.fmean(r["rr"] for r in rows), 4),
        "p50_ms": round(statistics.median(r["ms"] for r in rows), 2),
    }


def evaluate(service: MemoryService, data: HardSet, setting: Configuration) -> dict[str, Any]:
    base = service.config
    service.config = msgspec.structs.replace(base, **setting.overrides)
    service.project.embedding.query_vectors.clear()  # (each configuration embeds its questions afresh)
    rows: list[dict[str, Any]] = []
    violations: list[tuple[str, str]] = []
    stale_first = 0
    try:
        for query in data.queries:
            started = time.perf_counter()
            hits = service.recall(
                query["query"],
                limit=10,
                mode=setting.mode,  # type: ignore[arg-type]
                now=iso_to_epoch(query["now"].replace("Z", ".000000Z")),
            )
            elapsed = (time.perf_counter() - started) * 1000
            ranked = [h.id for h in hits]
            violations += [(query["id"], h) for h in ranked if h in data.forbidden]
            relevant = set(query["relevant"])
            first = next((i for i, h in enumerate(ranked) if h in relevant), None)
            stale = next((i for i, h in enumerate(ranked) if h in set(query.get("stale", ()))), None)
            if stale is not None and (first is None or stale < first):
                stale_first += 1
            rows.append(
                {
                    "category": query["category"],
                    "split": query["split"],
                    "r5": len(relevant & set(ranked[:5])) / len(relevant),
                    "r10": len(relevant & set(ranked[:10])) / len(relevant),
                    "rr": 0.0 if first is None else 1.0 / (first + 1),
                    "ms": elapsed,
                }
            )
    finally:
        service.config = base
    return {
        "setting": setting.name,
        "mode": setting.mode,
        "overrides": setting.overrides,
        **_summary(rows),
        "violations": len(violations),
        "violation_examples": violations[:5],
        "stale_first": stale_first,
        "by_split": {
            s: {
                **_summary([r for r in rows if r["split"] == s]),
                "by_category": {
                    c: _summary([r for r in rows if r["split"] == s and r["category"] == c]) for c in CATEGORIES
                },
            }
            for s in SPLITS
        },
    }


def run(data: HardSet, embedders: list[str], *, keyword: bool = True, vector: bool = True) -> dict[str, Any]:
    """The rows of every configuration, ``keyword`` first (once)."""
    results: list[dict[str, Any]] = []
    builds: dict[str, float] = {}
    with project(data) as (root, env):
        for index, embedder in enumerate(embedders):
            started = time.perf_counter()
            service = open_service(RootChoice(root, "eval"), environ=env | {"EVENTMEM_EMBEDDER": embedder})
            builds[embedder] = round(time.perf_counter() - started, 3)
            try:
                for setting in configurations(embedder, keyword=keyword and index == 0):
                    if setting.mode == "vector" and not vector:
                        continue
                    results.append(evaluate(service, data, setting))
            finally:
                service.close()
    return {
        "memories": len(data.memories),
        "queries": len(data.queries),
        "open_and_embed_seconds": builds,
        "results": results,
    }


def table(report: dict[str, Any]) -> str:
    """Markdown: one row per configuration and split, recall@5 per category, then the totals."""
    head = " | ".join(CATEGORIES)
    lines = [
        f"| configuration | split | {head} | recall@5 | recall@10 | MRR | p50 ms |",
        "|---|---|" + "---:|" * (len(CATEGORIES) + 4),
    ]
    for row in report["results"]:
        for split in SPLITS:
            part = row["by_split"][split]
            cells = " | ".join(f"{part['by_category'][c].get('recall@5', 0):.3f}" for c in CATEGORIES)
            lines.append(
                f"| {row['setting']} | {split} | {cells} | {part['recall@5']:.3f} | {part['recall@10']:.3f} "
                f"| {part['mrr']:.3f} | {part['p50_ms']:.1f} |"
            )
    return "\n".join(lines)
