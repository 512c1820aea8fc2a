"""Replay is the truth: whatever sequence of saves, updates and deletes a live service went
through, a service rebuilt from the journal alone (and one loaded from the snapshot) gives the
same answers: every memory, every recall (ids, order, scores), the stats."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventmem.core.errors import UnknownMemory
from eventmem.core.query_rules import Filters
from eventmem.journal.project import RootChoice
from eventmem.runner.tuning import BULK_PATHS, Tuning
from eventmem.service import MemoryService, open_service

WORDS = ["cache", "database", "deploy", "parser", "queue", "redis", "tests", "lint", "schema", "retry"]
TAGS = ["db", "ci", "api", "ops"]
KINDS = ["general", "decision", "fix"]

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
tags = st.lists(st.sampled_from(TAGS), max_size=2)
importance = st.sampled_from([0.1, 0.5, 0.9])

save_op = st.fixed_dictionaries(
    {
        "op": st.just("save"),
        "content": words,
        "kind": st.sampled_from(KINDS),
        "tags": tags,
        "importance": importance,
        "ttl": st.sampled_from([None, 86400]),
        "scope": st.sampled_from(["project", "project", "global"]),
    }
)
update_op = st.fixed_dictionaries(
    {
        "op": st.just("update"),
        "target": st.integers(0, 15),
        "content": st.none() | words,
        "tags": st.none() | tags,
        "kind": st.none() | st.sampled_from(KINDS),
        "importance": st.none() | importance,
        "ttl": st.sampled_from(["unchanged", None, 3600]),
    }
)
delete_op = st.fixed_dictionaries({"op": st.just("delete"), "target": st.integers(0, 15)})
operations = st.lists(st.one_of(save_op, save_op, update_op, delete_op), min_size=1, max_size=12)

QUERIES: list[tuple[str, int, Filters]] = [
    ("cache database", 3, Filters()),
    ("deploy redis queue retry", 20, Filters()),
    ("tests", 2, Filters(kinds=("fix", "decision"))),
    ("schema lint", 5, Filters(tags=("db",))),
    ("parser cache", 5, Filters(scope="global")),
    ("queue database", 5, Filters(scope="project", min_importance=0.5)),
]


def open_at(root: Path, tuning: Tuning | None = None) -> MemoryService:
    environ = {
        "EVENTMEM_GLOBAL_DIR": str(root / "global-memory"),
        "EVENTMEM_DURABILITY": "flush",  # fsync is not what is under test; keep examples quick
        # Recency ranks by the clock at query time; without it scores depend on the journal only,
        # so the live and the rebuilt service can be compared to the last digit.
        "EVENTMEM_RECENCY_BOOST": "0",
    }
    return open_service(RootChoice(root / "project", "test"), environ=environ, tuning=tuning)


def run(service: MemoryService, ops: list[dict[str, Any]]) -> list[str]:
    """Apply the operations; returns every memory id ever saved, in order."""
    ids: list[str] = []
    deleted: set[str] = set()
    for op in ops:
        if op["op"] == "save":
            memory = service.save(
                op["content"],
                kind=op["kind"],
                tags=op["tags"],
                importance=op["importance"],
                ttl_seconds=op["ttl"],
                scope=op["scope"],
                by="hypothesis",
            )
            ids.append(memory.id)
            continue
        if not ids:
            continue
        target = ids[op["target"] % len(ids)]
        try:
            if op["op"] == "update":
                service.update(
                    target,
                    content=op["content"],
                    tags=op["tags"],
                    kind=op["kind"],
                    importance=op["importance"],
                    ttl_seconds=op["ttl"],
                    by="hypothesis",
                )
            else:
                service.delete(target, reason="test", by="hypothesis")
                deleted.add(target)
        except UnknownMemory:
            assert target in deleted
    return ids


def answers(service: MemoryService, ids: list[str]) -> dict[str, Any]:
    memories: dict[str, Any] = {}
    for memory_id in ids:
        try:
            memories[memory_id] = msgspec.to_builtins(service.get(memory_id))
        except UnknownMemory:
            memories[memory_id] = None
    recalls = [
        msgspec.to_builtins(service.recall(query, limit=limit, filters=filters, include_content=True))
        for query, limit, filters in QUERIES
    ]
    return {"memories": memories, "recalls": recalls, "stats": service.stats()}


def live_answers(root: Path, ops: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Run ``ops`` on a service opened at ``root``; its memory ids and answers (it is then closed,
    which writes a snapshot)."""
    live = open_at(root)
    try:
        ids = run(live, ops)
        return ids, answers(live, ids)
    finally:
        live.close()


def answers_at(root: Path, ids: list[str], tuning: Tuning | None = None) -> dict[str, Any]:
    """The answers of a service opened afresh at ``root`` (with ``tuning``), then closed."""
    service = open_at(root, tuning)
    try:
        return answers(service, ids)
    finally:
        service.close()


def drop_caches(root: Path) -> None:
    for base in (root / "project", root / "global-memory"):
        shutil.rmtree(base / ".eventmem" / "cache", ignore_errors=True)


@settings(max_examples=40, deadline=None)
@given(ops=operations)
def test_a_service_rebuilt_from_the_journal_gives_the_same_answers_as_the_live_one(ops: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="eventmem-replay-") as tmp:
        root = Path(tmp)
        (root / "project").mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root / "project", check=True)
        ids, expected = live_answers(root, ops)
        drop_caches(root)
        assert answers_at(root, ids) == expected  # rebuilt; closing writes a snapshot of it
        assert answers_at(root, ids) == expected  # from that snapshot


@pytest.mark.parametrize("bulk", [False, True])
@settings(max_examples=30, deadline=None)
@given(ops=operations)
def test_store_rebuild_in_place_gives_the_same_answers(bulk: bool, ops: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="eventmem-replay-") as tmp:
        root = Path(tmp)
        (root / "project").mkdir()
        service = open_at(root)
        try:
            ids = run(service, ops)
            expected = answers(service, ids)
            for store in service.stores():
                if bulk:
                    store.tuning = BULK_PATHS
                store.rebuild(wait=False)
            assert answers(service, ids) == expected
            for store in service.stores():
                store.wait_snapshot()
        finally:
            service.close()
        assert answers_at(root, ids) == expected  # from the snapshot the rebuild wrote


@settings(max_examples=20, deadline=None)
@given(ops=operations)
def test_a_start_without_snapshot_on_the_bulk_paths_gives_the_same_answers(ops: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="eventmem-replay-") as tmp:
        root = Path(tmp)
        (root / "project").mkdir()
        ids, expected = live_answers(root, ops)
        drop_caches(root)
        assert answers_at(root, ids, BULK_PATHS) == expected
