"""Journals for ``tools/bench_scale.py``: a git project of N saved memories (the corpus of the
PostgreSQL tiers, ``tools/scale_postgres.py``, made here without the PostgreSQL extra), and batches
of mixed events (saves, updates, deletes, links) appended by one writer, as a branch or a local
session would append them."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "eventmem" not in sys.modules:  # (a caller measuring another revision imported its eventmem first)
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench import Corpus, saved_event  # noqa: E402

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.events import AnyEvent, LinkAdded, MemoryDeleted, MemoryUpdated  # noqa: E402
from eventmem.core.ids import new_id, to_iso  # noqa: E402
from eventmem.journal.project import ProjectPaths  # noqa: E402

SEGMENT_EVENTS = 25_000
MIX = (("saved", 0.4), ("updated", 0.3), ("deleted", 0.15), ("linked", 0.15))
"""What a batch of mixed events holds, by share."""


def chunks(count: int, size: int, seed: int = 7) -> Iterator[list[tuple[str, str, tuple[str, ...], str, float]]]:
    """The corpus's memories, ``size`` at a time (one generator: the same stream as one big call)."""
    corpus = Corpus(seed)
    done = 0
    while done < count:
        n = min(size, count - done)
        yield corpus.memories(n)
        done += n


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout


@dataclass
class Project:
    """A git project whose journal holds ``count`` saved memories, committed on ``main``."""

    root: Path
    live: list[str] = field(default_factory=list)
    """Ids of the live memories, in the order saved."""
    heads: dict[str, str] = field(default_factory=dict)
    """The id of each live memory's latest event (what the next event names as ``prev``)."""
    records: list[tuple[str, str, str, tuple[str, ...]]] = field(default_factory=list)
    """(id, title, content, tags) of each memory :meth:`create` saved, in order."""
    journal_bytes: int = 0

    @property
    def paths(self) -> ProjectPaths:
        return ProjectPaths(self.root)

    def create(self, count: int) -> None:
        self.root.mkdir(parents=True)
        git(self.root, "init", "-q", "-b", "main")
        git(self.root, "config", "user.email", "bench@example.invalid")
        git(self.root, "config", "user.name", "bench")
        subprocess.run(
            [sys.executable, "-m", "eventmem", "--root", str(self.root), "init"], capture_output=True, check=True
        )
        rng = random.Random(7)
        now = time.time()
        lines: list[bytes] = []
        segment = 0
        for memories in chunks(count, 20_000):
            for memory in memories:
                moment = datetime.fromtimestamp(now - rng.random() * 86400 * 30, UTC)
                event = saved_event(memory, to_iso(moment), "bench")
                self.live.append(event.memory)
                self.heads[event.memory] = event.id
                self.records.append((event.memory, event.title, event.content, event.tags))
                lines.append(encode_event(event))
                if len(lines) == SEGMENT_EVENTS:
                    self._write_segment(f"seed{segment:03d}.main.jsonl", lines)
                    segment, lines = segment + 1, []
        if lines:
            self._write_segment(f"seed{segment:03d}.main.jsonl", lines)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", f"{count} memories")

    def _write_segment(self, name: str, lines: list[bytes]) -> None:
        data = b"".join(lines)
        (self.paths.journal_dir / name).write_bytes(data)
        self.journal_bytes += len(data)

    def mixed_events(self, count: int, seed: int, marker: str) -> tuple[list[AnyEvent], dict[str, int], str]:
        """``count`` events in :data:`MIX`'s shares, each naming the head it follows; the first save's
        title carries ``marker`` (a word no other memory holds). Returns the events, how many of
        each type, and the id of the marked memory."""
        rng = random.Random(seed)
        corpus = Corpus(seed)
        kinds = rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX], k=count)
        kinds[0] = "saved"
        events: list[AnyEvent] = []
        counts = dict.fromkeys((k for k, _ in MIX), 0)
        marked = ""
        ts = to_iso(datetime.now(UTC))
        for kind in kinds:
            if kind != "saved" and len(self.live) < 2:
                kind = "saved"
            counts[kind] += 1
            if kind == "saved":
                title, content, tags, memory_kind, importance = corpus.memories(1)[0]
                if not marked:
                    title = f"{marker} {title}"
                saved = saved_event((title, content, tags, memory_kind, importance), ts, "bench-branch")
                marked = marked or saved.memory
                self.live.append(saved.memory)
                self.heads[saved.memory] = saved.id
                events.append(saved)
                continue
            target = self.live[rng.randrange(len(self.live))]
            event: AnyEvent
            if kind == "updated":
                change = corpus.memories(1)[0]
                if rng.random() < 0.5:
                    event = MemoryUpdated(
                        id=new_id(), ts=ts, by="bench-branch", prev=self.heads[target], memory=target, content=change[1]
                    )
                else:
                    event = MemoryUpdated(
                        id=new_id(),
                        ts=ts,
                        by="bench-branch",
                        prev=self.heads[target],
                        memory=target,
                        importance=change[4],
                        tags=change[2],
                    )
                self.heads[target] = event.id
            elif kind == "deleted":
                event = MemoryDeleted(id=new_id(), ts=ts, by="bench-branch", prev=self.heads[target], memory=target)
                self._drop(target)
                del self.heads[target]
            else:
                other = self.live[rng.randrange(len(self.live))]
                event = LinkAdded(id=new_id(), ts=ts, by="bench-branch", link=new_id(), source=target, target=other)
            events.append(event)
        return events, counts, marked

    def kept_text_events(self, count: int, seed: int) -> list[AnyEvent]:
        """``count`` updates that keep each memory's text, tags and type: a new importance, or a time to
        live (half each), each of a live memory picked at random."""
        rng = random.Random(seed)
        ts = to_iso(datetime.now(UTC))
        events: list[AnyEvent] = []
        for n in range(count):
            target = self.live[rng.randrange(len(self.live))]
            change: dict[str, object] = (
                {"importance": round(rng.random(), 2)} if n % 2 == 0 else {"ttl_seconds": 86400 * rng.randint(7, 90)}
            )
            event = MemoryUpdated(
                id=new_id(), ts=ts, by="bench-branch", prev=self.heads[target], memory=target, **change
            )
            self.heads[target] = event.id
            events.append(event)
        return events

    def _drop(self, memory_id: str) -> None:
        """Remove one id from the live ids (the last one takes its place)."""
        index = self.live.index(memory_id)
        self.live[index] = self.live[-1]
        self.live.pop()

    def append(self, root: Path, name: str, events: list[AnyEvent]) -> int:
        """Write ``events`` as the segment ``name`` of the journal under ``root``; its size in bytes."""
        data = b"".join(encode_event(e) for e in events)
        (ProjectPaths(root).journal_dir / name).write_bytes(data)
        return len(data)

    def branch(self, name: str, events: list[AnyEvent]) -> Path:
        """A git branch ``name`` off ``main`` (in a worktree of its own) with ``events`` committed."""
        tree = self.root.parent / f"{self.root.name}-{name}"
        git(self.root, "worktree", "add", "-q", "-b", name, str(tree))
        self.append(tree, f"writer-{name}.{name}.jsonl", events)
        git(tree, "add", "-A", ".eventmem/journal")
        git(tree, "commit", "-q", "-m", f"{len(events)} events on {name}")
        return tree


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
