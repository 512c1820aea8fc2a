"""The fold is commutative all the way to the answers: any order of a set of events, and any split
of it into two branches merged either way, gives the same recall results and the same memories
through the real Store and service (FAISS and FTS5 indexes, filter columns, supersede links)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from answers import answers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventmem.core.codec import UnknownEvent, encode_event
from eventmem.core.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.journal.config import Config
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.runner.runner import Store
from eventmem.service import MemoryService

Decoded = AnyEvent | UnknownEvent

MEMORIES = tuple(f"01JM{n:022d}" for n in range(5))
LINKS = tuple(f"01JL{n:022d}" for n in range(2))
TIMES = (*(f"2026-02-01T09:00:0{s}.000000Z" for s in range(4)), "2026-02-01T10:00:01+01:00")
TEXTS = (
    "Keyword search engine uses SQLite FTS5",
    "The database connection pool holds 50 connections",
    "Redis is the job queue for background work",
    "Tests are flaky when they sleep instead of waiting",
    "Deploy a release every Tuesday after the database migration",
)

memory_ids = st.sampled_from(MEMORIES)
times = st.sampled_from(TIMES)
texts = st.sampled_from(TEXTS)
tags = st.lists(st.sampled_from(("db", "search", "ci")), max_size=2, unique=True).map(tuple)
kinds = st.sampled_from(("general", "decision", "fix"))
ttls = st.one_of(st.none(), st.just(10**9))  # set or not; never runs out during the test


def simple(kind: type[Any]) -> st.SearchStrategy[Any]:
    return st.builds(kind, id=st.just("?"), ts=times, memory=memory_ids)


saved_events = st.builds(
    MemorySaved,
    id=st.just("?"),
    ts=times,
    by=st.sampled_from(("ann", "bob")),
    memory=memory_ids,
    kind=kinds,
    title=st.sampled_from(("", "Search", "Pool")),
    content=texts,
    tags=tags,
    importance=st.sampled_from((0.2, 0.5, 0.9)),
    ttl_seconds=ttls,
)
link_events = st.builds(
    LinkAdded,
    id=st.just("?"),
    ts=times,
    link=st.sampled_from(LINKS),
    source=memory_ids,
    target=memory_ids,
    relation=st.sampled_from(("supersedes", "related_to")),
)
any_event = st.one_of(
    saved_events,
    st.builds(MemoryUpdated, id=st.just("?"), ts=times, memory=memory_ids, content=texts, tags=tags),
    st.builds(MemoryUpdated, id=st.just("?"), ts=times, memory=memory_ids, kind=kinds, importance=st.just(0.7)),
    simple(MemoryDeleted),
    simple(MemoryRestored),
    simple(MemoryPromoted),
    simple(MemoryExpired),
    link_events,
    st.builds(LinkRemoved, id=st.just("?"), ts=times, link=st.sampled_from(LINKS)),
    st.builds(UnknownEvent, type=st.just("pinned"), id=st.just("?"), ts=times, raw=st.just(b"")),
)


@st.composite
def event_sets(draw: st.DrawFn) -> list[Decoded]:
    events = [
        *draw(st.lists(saved_events, min_size=2, max_size=6)),
        *draw(st.lists(link_events, max_size=2)),
        *draw(st.lists(any_event, max_size=16)),
    ]
    numbers = draw(st.lists(st.integers(0, 99999), min_size=len(events), max_size=len(events), unique=True))
    out: list[Decoded] = []
    for event, number in zip(events, numbers, strict=True):
        event_id = f"01JE{number:022d}"
        if isinstance(event, UnknownEvent):
            raw = b'{"type":"pinned","id":"%s","ts":"%s"}' % (event_id.encode(), event.ts.encode())
            out.append(UnknownEvent("pinned", event_id, event.ts, raw))
        else:
            out.append(msgspec.structs.replace(event, id=event_id))
    return out


def line(event: Decoded) -> bytes:
    return event.raw + b"\n" if isinstance(event, UnknownEvent) else encode_event(event)


def write_segment(root: Path, name: str, events: Sequence[Decoded]) -> None:
    path = ProjectPaths(root).journal_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(b"".join(line(event) for event in events))


@contextmanager
def opened(root: Path) -> Iterator[MemoryService]:
    """A service on ``root`` with the built-in embedder and time kept out of the scores."""
    config = Config(recency_boost=0.0, durability="flush")
    store = Store(ProjectPaths(root), config, HashingEmbedder())
    store.open()
    yield MemoryService(store, root=RootChoice(root, "test"))


def everything(service: MemoryService) -> dict[str, Any]:
    """Plain answers, plus filtered ones: filters are applied before the top-k cut, from columns."""
    found = answers(service)
    found["filtered"] = [
        [hit.id for hit in service.recall("database search", limit=10, filters=filters)]
        for filters in (Filters(kinds=("decision",)), Filters(tags=("db",)), Filters(min_importance=0.6))
    ]
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=event_sets(), data=st.data())
def test_any_order_and_any_branch_split_of_the_same_events_gives_the_same_answers(
    events: list[Decoded], data: st.DataObject
) -> None:
    sides = data.draw(st.lists(st.sampled_from("AB*"), min_size=len(events), max_size=len(events)))
    branch_a = [e for e, side in zip(events, sides, strict=True) if side in "A*"]
    branch_b = [e for e, side in zip(events, sides, strict=True) if side in "B*"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        write_segment(base / "in-order", "w1.main.jsonl", events)
        with opened(base / "in-order") as service:
            expected = everything(service)

        write_segment(base / "shuffled", "w1.main.jsonl", data.draw(st.permutations(events)))
        with opened(base / "shuffled") as service:
            assert everything(service) == expected

        # a server on branch A sees B's segment arrive (a merge), and one on B sees A's
        for first, second in (("A", "B"), ("B", "A")):
            root = base / f"merge-{first}-into-{second}"
            halves = {"A": ("w1.main.jsonl", branch_a), "B": ("w2.feature.jsonl", branch_b)}
            write_segment(root, halves[first][0], data.draw(st.permutations(halves[first][1])))
            with opened(root) as service:
                service.catch_up()
                write_segment(root, halves[second][0], data.draw(st.permutations(halves[second][1])))
                assert everything(service) == expected


def test_a_supersedes_link_moved_to_other_ends_releases_its_old_target_in_a_running_store(tmp_path: Path) -> None:
    # found by the property above: the old target stayed hidden as "superseded" in one merge order
    first, second = MEMORIES[0], MEMORIES[1]
    saves = [
        MemorySaved(id=f"01JE{n:022d}", ts=TIMES[0], memory=memory, content=TEXTS[n])
        for n, memory in enumerate((first, second))
    ]
    link = LinkAdded(id=f"01JE{2:022d}", ts=TIMES[1], link=LINKS[0], source=first, target=second, relation="supersedes")
    moved = msgspec.structs.replace(link, id=f"01JE{3:022d}", ts=TIMES[2], target=first)
    write_segment(tmp_path, "w1.main.jsonl", [*saves, link])
    with opened(tmp_path) as service:
        assert service.get(second).superseded
        write_segment(tmp_path, "w2.feature.jsonl", [moved])
        assert not service.get(second).superseded
        assert [hit.id for hit in service.recall("database connection pool", limit=1)] == [second]
