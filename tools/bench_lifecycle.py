#!/usr/bin/env python
"""eventmem memory-lifecycle benchmark: every figure next to a baseline measured in the same run.

Prints one JSON object on stdout (progress on stderr). Figures:

- ``compaction``: ``MemoryService.compact()`` archiving the history of long-deleted memories out
  of a journal segment of ``--events`` events (saves, updates, links, deletes), next to a bare
  rewrite of the same segment (read, decode every line, write two files atomically): the least any
  archive pass must do. Also the expiry pass (``expired`` events for due memories) next to a bare
  journal append of the same number of events, and what the rewrite costs another process (its
  next call rebuilds) next to a cold rebuild.
- ``related_depth3``: ``MemoryService.related(depth=3)`` over ``--links`` links, next to a bare
  breadth-first walk over a plain dict of neighbour lists (the floor), and next to a walk without
  an adjacency index (every level scans the link table, as an unindexed SQL table would).
- ``recall_filtered``: ``MemoryService.recall`` at ``--memories`` memories with filters (type,
  tags, min_importance, created_after, all four), next to the same recall without filters and a
  bare numpy scan of the masked vectors; and ``search`` listings (filters, no query).

Data is written straight into journal segments (deterministic text from a small coding
vocabulary), then warmed by one open/close (embeddings cached, snapshot written) before timing.

Usage::

    python tools/bench_lifecycle.py                      # 100k events, 100k links, 100k memories
    python tools/bench_lifecycle.py --quick              # tiny sizes (smoke test)
    python tools/bench_lifecycle.py --out lifecycle.json
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_json import emit

try:
    import eventmem  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import faiss
import numpy as np

from eventmem.core.codec import decode_lines, encode_event
from eventmem.core.events import KINDS, LinkAdded, MemoryDeleted, MemoryExpired, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, to_iso
from eventmem.core.query_rules import Filters
from eventmem.journal.files import atomic_write
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.service import MemoryService, open_service
from eventmem.service.search import build_mask

faiss.omp_set_num_threads(1)  # as eventmem's server does

STARTED = time.perf_counter()
DAY = 86400.0
WORDS = (
    "cache index query journal segment snapshot vector sqlite python function class method module "
    "import async thread lock retry timeout error exception handler request response server client "
    "token parser build deploy docker config yaml json schema migration database table column commit "
    "branch merge test fixture refactor endpoint route session cookie header payload queue worker "
    "scheduler cron batch stream socket process memory leak profile latency ci pipeline lint release "
    "version dependency package api cli flag secret auth permission tenant billing payment webhook "
    "event callback deadline shutdown metric log trace alert incident rollback hotfix bug review "
    "convention naming docs frontend backend component state render storage bucket upload parse "
    "transaction deadlock replica shard partition checksum compression archive retention expiry"
).split()
TAGS = "backend frontend database ci testing performance security auth api infra docs bug".split()


def log(message: str) -> None:
    sys.stderr.write(f"[bench-lifecycle {time.perf_counter() - STARTED:7.1f}s] {message}\n")
    sys.stderr.flush()


def summary(samples: list[float]) -> dict[str, Any]:
    ms = np.asarray(samples, dtype=np.float64) * 1000.0
    return {
        "n": len(ms),
        "p50_ms": round(float(np.median(ms)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "min_ms": round(float(ms.min()), 3),
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def iso(epoch: float) -> str:
    return to_iso(datetime.fromtimestamp(epoch, UTC))


FUNCTION_WORDS = (
    "the a to of and in is for on with that this it when we by from be as not after before if so but "
    "or are was should must can now only also all then use instead because"
).split()


class Text:
    """Deterministic text: Zipf-distributed words over function words, coding words and ~1500
    identifiers (as notes about code read), so that keyword search sees realistic term rarity."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        vocabulary = random.Random(1234)  # the same vocabulary for every generator
        identifiers: set[str] = set()
        while len(identifiers) < 1500:
            a, b = vocabulary.sample(WORDS, 2)
            identifiers.add(vocabulary.choice((f"{a}_{b}", a + b.capitalize(), f"src/{a}/{b}.py", f"{a}.{b}()")))
        self.content = WORDS + sorted(identifiers)
        vocabulary.shuffle(self.content)
        self.vocab = FUNCTION_WORDS + self.content
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(self.vocab))))

    def sentence(self, low: int = 12, high: int = 30) -> str:
        words = self.rng.choices(self.vocab, cum_weights=self.cum_weights, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + "."

    def query(self) -> str:
        return " ".join(self.rng.sample(self.content, self.rng.randint(2, 3)))


class Bench:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {
            "EVENTMEM_GLOBAL_DIR": str(tmp / "global-memory"),
            "EVENTMEM_COMPACT_INTERVAL_SECONDS": "0",
            "EVENTMEM_RECENCY_BOOST": "0",
        }

    def open(self, root: Path) -> MemoryService:
        return open_service(RootChoice(root, "bench"), environ=self.env)

    def project(self, name: str) -> tuple[Path, ProjectPaths]:
        root = self.tmp / name
        root.mkdir()
        paths = ProjectPaths(root)
        paths.ensure()
        return root, paths

    def warm(self, root: Path) -> float:
        seconds, service = timed(lambda: self.open(root))
        service.close()
        return seconds

    # -- compaction -----------------------------------------------------------------------------

    def compaction(self, events: int, repeats: int) -> dict[str, Any]:
        """A segment of ``events`` events: 40% saves, 20% updates, 20% links, 20% deletes (half of
        them older than archive_after_days)."""
        log(f"compaction: writing a {events}-event segment")
        root, paths = self.project("compaction")
        text = Text(1)
        rng = random.Random(1)
        now = time.time()
        saves = int(events * 0.4)
        lines: list[bytes] = []
        memories: list[str] = []
        for _ in range(saves):
            event = MemorySaved(
                id=new_id(),
                ts=iso(now - rng.uniform(60, 120) * DAY),
                by="bench",
                memory=new_id(),
                kind=rng.choice(KINDS[:8]),
                content=text.sentence(),
                tags=tuple(rng.sample(TAGS, 2)),
                importance=rng.choice((0.3, 0.5, 0.7)),
            )
            memories.append(event.memory)
            lines.append(encode_event(event))
        for _ in range(int(events * 0.2)):
            event_u = MemoryUpdated(
                id=new_id(), ts=iso(now - rng.uniform(55, 59) * DAY), memory=rng.choice(memories), importance=0.6
            )
            lines.append(encode_event(event_u))
        for _ in range(int(events * 0.2)):
            a, b = rng.sample(memories, 2)
            lines.append(
                encode_event(LinkAdded(id=new_id(), ts=iso(now - 50 * DAY), link=new_id(), source=a, target=b))
            )
        deleted = rng.sample(memories, events - len(lines))
        for i, memory_id in enumerate(deleted):
            age = 45 if i % 2 else 5  # half long dead (archived), half recently deleted (kept)
            lines.append(encode_event(MemoryDeleted(id=new_id(), ts=iso(now - age * DAY), memory=memory_id)))
        segment = paths.journal_dir / paths.segment_name()
        segment.write_bytes(b"".join(lines))
        size = segment.stat().st_size
        log(f"compaction: warming ({saves} memories, {size} bytes)")
        warm_s = self.warm(root)

        compact_s: list[float] = []
        bare_s: list[float] = []
        reader_s: list[float] = []
        cold_s: list[float] = []
        report: dict[str, Any] = {}
        for attempt in range(repeats):
            log(f"compaction: round {attempt + 1}/{repeats}")
            copy = self.tmp / f"compaction-{attempt}"
            shutil.copytree(root, copy)
            reader = self.open(copy)  # another process, open before the compaction
            service = self.open(copy)
            seconds, report = timed(service.compact)
            compact_s.append(seconds)
            service.close()
            seconds, _ = timed(reader.catch_up)
            reader_s.append(seconds)
            reader.close()
            cold = self.open(copy)
            seconds, _ = timed(cold.project.rebuild)
            cold_s.append(seconds)
            cold.close()
            bare_s.append(bare_rewrite(root / ".eventmem" / "journal" / segment.name, self.tmp / "bare"))
            shutil.rmtree(copy)
        (archived,) = report["archived"]

        log("compaction: expiry pass")
        due = min(10_000, saves // 4)
        expiry_root, expiry_paths = self.project("expiry")
        text = Text(2)
        expiring = [
            MemorySaved(
                id=new_id(),
                ts=iso(now - 2 * DAY),
                memory=new_id(),
                content=text.sentence(),
                ttl_seconds=3600 if i < due else None,
            )
            for i in range(saves // 2)
        ]
        (expiry_paths.journal_dir / expiry_paths.segment_name()).write_bytes(
            b"".join(encode_event(e) for e in expiring)
        )
        self.warm(expiry_root)
        shutil.copytree(expiry_root, self.tmp / "expiry-copy")
        service = self.open(expiry_root)
        expire_s, expire_report = timed(lambda: service.compact(archive=False))
        service.close()
        # the same events written by a plain Store.append (journal append, fold, index updates)
        events_due: list[Any] = [MemoryExpired(id=new_id(), ts=iso(now), memory=e.memory) for e in expiring[:due]]
        service = self.open(self.tmp / "expiry-copy")
        store_append_s, _ = timed(lambda: service.project.append(events_due))
        service.close()
        _, append_paths = self.project("append")
        journal = Journal(append_paths)
        append_s, _ = timed(lambda: journal.append(events_due))
        return {
            "events": events,
            "segment_bytes": size,
            "memories": saves,
            "archived_memories": archived["memories"],
            "archived_events": archived["events"],
            "bytes_after": archived["bytes_after"],
            "warm_open_s": round(warm_s, 3),
            "compact_s": round(float(np.median(compact_s)), 3),
            "bare_rewrite_s": round(float(np.median(bare_s)), 3),
            "ratio_to_bare_rewrite": ratio(float(np.median(compact_s)), float(np.median(bare_s))),
            "other_process_catch_up_s": round(float(np.median(reader_s)), 3),
            "cold_rebuild_s": round(float(np.median(cold_s)), 3),
            "ratio_catch_up_to_cold_rebuild": ratio(float(np.median(reader_s)), float(np.median(cold_s))),
            "expiry": {
                "memories": len(expiring),
                "expired": len(expire_report["expired"]),
                "compact_s": round(expire_s, 3),
                "store_append_s": round(store_append_s, 3),
                "ratio_to_store_append": ratio(expire_s, store_append_s),
                "bare_journal_append_s": round(append_s, 3),
            },
        }

    # -- relationships --------------------------------------------------------------------------

    def related(self, links: int, queries: int) -> dict[str, Any]:
        count = max(links // 5, 10)
        log(f"related: {count} memories, {links} links")
        root, paths = self.project("related")
        text = Text(3)
        rng = random.Random(3)
        now = time.time()
        saves = [
            MemorySaved(id=new_id(), ts=iso(now - DAY), memory=new_id(), content=text.sentence(6, 12))
            for _ in range(count)
        ]
        ids = [s.memory for s in saves]
        # preferential attachment: a few hubs, many leaves, as real knowledge graphs have
        ends: list[str] = ids[:10]
        link_events = []
        for _ in range(links):
            a = rng.choice(ids)
            b = rng.choice(ends) if rng.random() < 0.5 else rng.choice(ids)
            if a == b:
                b = ids[(ids.index(a) + 1) % len(ids)]
            ends += (a, b)
            link_events.append(
                LinkAdded(
                    id=new_id(),
                    ts=iso(now - DAY),
                    link=new_id(),
                    source=a,
                    target=b,
                    relation=rng.choice(("solves", "causes", "related_to", "depends_on")),
                    strength=round(rng.random(), 2),
                )
            )
        (paths.journal_dir / paths.segment_name()).write_bytes(
            b"".join(encode_event(e) for e in [*saves, *link_events])
        )
        self.warm(root)
        neighbours: dict[str, list[str]] = {}
        table = [(e.source, e.target) for e in link_events]
        for a, b in table:
            neighbours.setdefault(a, []).append(b)
            neighbours.setdefault(b, []).append(a)
        starts = rng.sample(ids, queries)
        service = self.open(root)
        try:
            service_s, bare_s, scan_s, reached = [], [], [], []
            for start in starts:
                seconds, out = timed(lambda s=start: service.related(s, depth=3, limit=500))
                service_s.append(seconds)
                reached.append(len(out))
                seconds, _ = timed(lambda s=start: bare_bfs(neighbours, s, 3, 500))
                bare_s.append(seconds)
            for start in starts[: max(3, queries // 10)]:
                seconds, _ = timed(lambda s=start: table_scan_bfs(table, s, 3, 500))
                scan_s.append(seconds)
            filtered_s = [
                timed(lambda s=start: service.related(s, depth=3, relations=["solves", "causes"], limit=500))[0]
                for start in starts
            ]
        finally:
            service.close()
        p50, bare, scan = (float(np.median(x)) for x in (service_s, bare_s, scan_s))
        return {
            "memories": count,
            "links": links,
            "depth": 3,
            "limit": 500,
            "reached_p50": int(np.median(reached)),
            "related": summary(service_s),
            "related_with_relation_filter": summary(filtered_s),
            "bare_dict_bfs": summary(bare_s),
            "link_table_scan_bfs": summary(scan_s),
            "ratio_to_bare_bfs": ratio(p50, bare),
            "speedup_over_table_scan": ratio(scan, p50),
        }

    # -- recall with filters --------------------------------------------------------------------

    def recall(self, memories: int, queries: int) -> dict[str, Any]:
        log(f"recall: writing {memories} memories")
        root, paths = self.project("recall")
        text = Text(4)
        rng = random.Random(4)
        now = time.time()
        lines = []
        for i in range(memories):
            event = MemorySaved(
                id=new_id(),
                ts=iso(now - rng.uniform(0, 365) * DAY),
                memory=new_id(),
                kind=rng.choice(KINDS[:8]),
                title=" ".join(rng.sample(WORDS, 4)),
                content=text.sentence(20, 45),
                tags=tuple(rng.sample(TAGS, rng.randint(1, 3))),
                importance=rng.choice((0.2, 0.4, 0.5, 0.6, 0.8, 0.9)),
                ttl_seconds=(400 * 86400) if i % 10 == 0 else None,
            )
            lines.append(encode_event(event))
        for first in range(0, len(lines), 25_000):  # a few writers' segments
            (paths.journal_dir / f"seed{first // 25_000:02d}.main.jsonl").write_bytes(
                b"".join(lines[first : first + 25_000])
            )
        log("recall: warming (embedding every memory once)")
        warm_s = self.warm(root)
        text = Text(5)
        questions = [text.query() for _ in range(queries)]
        cutoff = iso(now - 90 * DAY)
        cases = {
            "none": Filters(),
            "type": Filters(kinds=("fix",)),
            "tags": Filters(tags=("database", "performance")),
            "min_importance": Filters(min_importance=0.8),
            "created_after": Filters(created_after=cutoff),
            "all_four": Filters(kinds=("fix", "error"), tags=("database",), min_importance=0.5, created_after=cutoff),
        }
        service = self.open(root)
        out: dict[str, Any] = {"memories": memories, "warm_open_s": round(warm_s, 3)}
        try:
            store = service.project
            for name, filters in cases.items():
                samples = [timed(lambda q=q, f=filters: service.recall(q, limit=10, filters=f))[0] for q in questions]
                with store.read() as view:
                    n = view.size()
                    matching = int(build_mask(view, filters).sum())
                out[f"recall_{name}"] = summary(samples) | {"matching": matching, "of": n}
            for name in ("type", "tags", "min_importance", "created_after", "all_four"):
                out[f"recall_{name}"]["ratio_to_unfiltered"] = ratio(
                    out[f"recall_{name}"]["p50_ms"], out["recall_none"]["p50_ms"]
                )
            # floors: a bare numpy scan of every vector, and of the masked ones (vectors only: no
            # keyword side, no fusion, no boosts)
            with store.read() as view:
                matrix = np.stack([view.vector_of(m) for m in view.positions()]).astype(np.float32)
                query_vectors = [view.embed_query(q) for q in questions]
                masked = build_mask(view, cases["all_four"])
            for name, mask in (("full", None), ("masked_all_four", masked)):
                bare = []
                for qv in query_vectors:
                    started = time.perf_counter()
                    rows = np.arange(len(matrix)) if mask is None else np.flatnonzero(mask)
                    scores = matrix[rows] @ qv
                    if len(rows) > 10:
                        rows = rows[np.argpartition(-scores, 10)[:10]]
                    bare.append(time.perf_counter() - started)
                out[f"bare_numpy_scan_{name}"] = summary(bare)
            out["recall_none"]["ratio_to_bare_full_scan"] = ratio(
                out["recall_none"]["p50_ms"], out["bare_numpy_scan_full"]["p50_ms"]
            )
            listing = [
                timed(lambda f=f: service.search(None, limit=20, filters=f))[0]
                for f in (cases["type"], cases["tags"], cases["all_four"])
                for _ in range(max(3, queries // 3))
            ]
            out["search_listing_no_query"] = summary(listing)
        finally:
            service.close()
        return out


def bare_rewrite(segment: Path, scratch: Path) -> float:
    """Read, decode every line, split by a set lookup, write two files atomically."""
    scratch.mkdir(exist_ok=True)
    gc.collect()
    started = time.perf_counter()
    data = segment.read_bytes()
    events = decode_lines(data) or []
    lines = data.split(b"\n")
    dead = {getattr(e, "memory", "") for e in events if type(e).__name__ == "MemoryDeleted"}
    kept, moved = [], []
    for line, event in zip(lines, events, strict=False):
        (moved if getattr(event, "memory", None) in dead else kept).append(line + b"\n")
    atomic_write(scratch / "archive.jsonl", b"".join(moved))
    atomic_write(scratch / "journal.jsonl", b"".join(kept))
    return time.perf_counter() - started


def bare_bfs(neighbours: dict[str, list[str]], start: str, depth: int, limit: int) -> list[str]:
    """Level by level (as ``related`` walks), over a plain dict of neighbour lists, cut to ``limit``."""
    seen = {start}
    frontier = [start]
    out: list[str] = []
    for _ in range(depth):
        found = []
        for node in frontier:
            for other in neighbours.get(node, ()):
                if other not in seen:
                    seen.add(other)
                    found.append(other)
        out += found
        if len(out) >= limit or not found:
            break
        frontier = found
    return out[:limit]


def table_scan_bfs(table: list[tuple[str, str]], start: str, depth: int, limit: int) -> list[str]:
    seen = {start}
    frontier = {start}
    out: list[str] = []
    for _ in range(depth):
        found = set()
        for a, b in table:
            if a in frontier and b not in seen:
                found.add(b)
            elif b in frontier and a not in seen:
                found.add(a)
        seen |= found
        out += sorted(found)
        frontier = found
        if len(out) >= limit or not frontier:
            break
    return out[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the compacted journal")
    parser.add_argument("--links", type=int, default=100_000, help="links in the graph walked")
    parser.add_argument("--memories", type=int, default=100_000, help="memories recalled over")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="compaction rounds (each on a fresh copy)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.links, args.memories, args.queries, args.repeats = 2000, 2000, 2000, 5, 1
    result: dict[str, Any] = {
        "benchmark": "eventmem lifecycle",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "sizes": {"events": args.events, "links": args.links, "memories": args.memories},
    }
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-lifecycle-") as tmp:
        bench = Bench(Path(tmp))
        result["compaction"] = bench.compaction(args.events, args.repeats)
        result["related_depth3"] = bench.related(args.links, args.queries)
        result["recall_filtered"] = bench.recall(args.memories, args.queries)
    result["seconds"] = round(time.perf_counter() - STARTED, 1)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
