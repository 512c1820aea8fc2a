"""The store: catch-up across processes, journals changed underneath, snapshots, filters before the cut.

Two services on one project stand in for two processes. "Fresh" answers come from a service that
folds the journal from scratch (no snapshot), the reference every other path must agree with.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import numpy as np
import pytest
from conftest import reopen, write_events

import eventmem.runner.runner as runner_module
import eventmem.runner.snapshots as snapshots_module
from eventmem.context.project_context import ProjectContext
from eventmem.core.codec import encode_event
from eventmem.core.errors import InvalidInput, SnapshotDamaged
from eventmem.core.events import LinkAdded, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso, to_iso
from eventmem.core.query_rules import Filters
from eventmem.core.records import MemoryRecord, MemoryRecords
from eventmem.core.stamps import key_of
from eventmem.core.state import State, StoredState
from eventmem.embedders.embedcache import EmbeddingCache
from eventmem.journal.project import RootChoice
from eventmem.projectors.base import Batch, Projected
from eventmem.projectors.columns import ColumnsProjector, SlotTable, make_dedup_keys
from eventmem.runner.snapshots import Snapshot, StoredSnapshot
from eventmem.runner.tuning import BULK_PATHS, Tuning
from eventmem.service import MemoryService, open_service
from eventmem.service import search as query

SNAPSHOT_AT_EVERY_CATCH_UP = dataclasses.replace(BULK_PATHS, snapshot_every=1)
"""Every bulk path, and a snapshot due at every catch-up."""
QUERIES = ("database connection pool", "deploy to staging", "parser library choice", "flaky tests", "cache")

TOPICS = [
    ("Database pool", "The database connection pool is capped at 20 connections per worker."),
    ("Staging deploys", "Deploy to staging from the release branch with make deploy-staging."),
    ("Parser choice", "We chose msgspec over pydantic for the journal parser library."),
    ("Flaky tests", "The flaky network tests retry three times before failing."),
    ("Cache layout", "The cache folder holds snapshots and embeddings and is never committed."),
    ("Lint", "ruff check and ruff format run in CI on every push."),
    ("Branch names", "Feature branches are named feature/<ticket> and merged by squash."),
    ("Timeouts", "HTTP clients use a ten second timeout and exponential backoff."),
]


@pytest.fixture(autouse=True)
def steady_scores(isolated_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No recency boost, so two services asked at different moments must score identically."""
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", "0")
    monkeypatch.setenv("EVENTMEM_DURABILITY", "flush")


def save_topics(service: MemoryService) -> list[str]:
    return [service.save(content, title=title, tags=["topic"]).id for title, content in TOPICS]


def answers(service: MemoryService) -> tuple[list[Any], dict[str, Any]]:
    recalls = [
        [msgspec.to_builtins(hit) for hit in service.recall(query, limit=10, include_content=True)] for query in QUERIES
    ]
    return recalls, service.stats()


def fresh_answers(project: Path) -> tuple[list[Any], dict[str, Any]]:
    """Answers folded from the journal alone, without any snapshot."""
    service = open_service(RootChoice(project, "test"), load=False)
    try:
        return answers(service)
    finally:
        service.close()


def segment_of(project: Path) -> Path:
    (path,) = (project / ".eventmem" / "journal").glob("*.jsonl")
    return path


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]


def ids_of(hits: list[Any]) -> set[str]:
    return {hit.id for hit in hits}


def old_ts(days: float) -> str:
    return to_iso(datetime.now(UTC) - timedelta(days=days))


# -- catching up ----------------------------------------------------------------------------------


def test_a_save_in_one_process_is_seen_by_the_next_call_of_another(service: MemoryService, project: Path) -> None:
    other = reopen(project)
    try:
        assert other.recall("database connection pool") == []
        saved = service.save(TOPICS[0][1], title=TOPICS[0][0])
        (hit,) = other.recall("database connection pool")
        assert hit.id == saved.id
        assert other.get(saved.id).content == TOPICS[0][1]
        service.update(saved.id, content="The database connection pool is capped at 50 connections.")
        assert "50" in other.get(saved.id).content
        service.delete(saved.id)
        assert other.recall("database connection pool") == []
        assert other.project.rebuilds == 0
    finally:
        other.close()


def test_a_process_own_writes_leave_it_current_and_another_process_writes_do_not(
    service: MemoryService, project: Path
) -> None:
    """What the watcher asks before catching up: its own appends need no catch-up."""
    other = reopen(project)
    try:
        saved = service.save(TOPICS[0][1], title=TOPICS[0][0])
        segments = [str(path) for path in (project / ".eventmem" / "journal").glob("*.jsonl")]
        assert service.project.is_current(segments)
        service.update(saved.id, content="The database connection pool is capped at 50 connections.")
        service.delete(saved.id)
        assert service.project.is_current(segments)
        other.save(TOPICS[1][1], title=TOPICS[1][0])
        assert not service.project.is_current(segments)
        service.project.catch_up()
        assert service.project.is_current(segments)
        assert not service.project.is_current([str(project / ".eventmem" / "journal" / "gone.main.jsonl")])
    finally:
        other.close()


def test_the_cursor_moved_past_an_own_append_equals_one_read_from_the_file(
    service: MemoryService, project: Path
) -> None:
    for title, content in TOPICS[:3]:
        service.save(content, title=title)
    other = reopen(project)
    try:
        assert other.project.derived.cursors == service.project.derived.cursors
        other.save(TOPICS[3][1], title=TOPICS[3][0])  # another process's append: read, not assumed
        service.save(TOPICS[4][1], title=TOPICS[4][0])
        other.project.catch_up()
        assert other.project.derived.cursors == service.project.derived.cursors
        assert service.project.rebuilds == other.project.rebuilds == 0
    finally:
        other.close()


@pytest.fixture
def server_mode(project: Path) -> Any:
    """A service opened as the MCP server opens it: texts of local changes are indexed after the reply."""
    svc = open_service(RootChoice(project, "test"), background_vectors=True)
    assert svc.project.deferral.enabled
    yield svc
    svc.close()


def test_a_save_acknowledged_before_its_text_is_indexed_is_found_by_the_next_call(server_mode: MemoryService) -> None:
    store = server_mode.project
    store.deferral.delay = 60.0  # the indexer thread waits
    saved = server_mode.save(TOPICS[0][1], title=TOPICS[0][0])
    assert store.deferral.pending()  # acknowledged, folded, not yet in the keyword or vector index
    assert server_mode.get(saved.id).content == TOPICS[0][1]
    (hit,) = server_mode.recall("database connection pool")
    assert hit.id == saved.id
    assert not store.deferral.pending()


def test_texts_indexed_after_the_reply_give_the_same_answers_as_a_fresh_fold(
    server_mode: MemoryService, project: Path
) -> None:
    ids = save_topics(server_mode)
    server_mode.update(ids[1], content="Deploy to staging from main with make deploy.")
    server_mode.delete(ids[2])  # deleted while its text may still wait to be indexed
    server_mode.save(TOPICS[2][1] + " Again.", title=TOPICS[2][0])
    assert server_mode.project.deferral.wait_idle(10)  # the indexer thread, not a call, indexes them
    assert answers(server_mode) == fresh_answers(project)


def test_accesses_counted_after_the_reply_are_seen_by_the_next_call_and_kept_at_close(project: Path) -> None:
    svc = open_service(RootChoice(project, "test"), background_vectors=True)
    svc.project.deferral.delay = 60.0
    saved = svc.save(TOPICS[0][1], title=TOPICS[0][0])
    svc.recall("database connection pool", access=True)
    assert not svc.project.usage.path.exists()  # not written yet: the reply went first
    assert svc.get(saved.id).access_count == 1
    svc.recall("database connection pool", access=True)
    svc.close()  # the second access is written before the process goes
    other = reopen(project)
    try:
        assert other.get(saved.id).access_count == 2
    finally:
        other.close()


PROMOTION_THEN_SAVE = """
import sys
from pathlib import Path
from eventmem.journal.config import Config
from eventmem.journal.project import RootChoice
from eventmem.service import open_service

svc = open_service(RootChoice(Path(sys.argv[1]), "test"), background_vectors=True)
svc.project.deferral.delay = 60.0  # the after-reply thread waits: the save below finds the promotion pending
short = svc.save("The connection pool holds twenty database connections.", ttl_seconds=3600)
for _ in range(Config().promote_accesses):
    svc.recall("database connection pool", access=True)
assert svc.project.deferral.pending()
saved = svc.save("Deploys go out on Tuesdays.")
assert svc.get(short.id).ttl_seconds is None, "promoted: long-term now"
print(saved.id)
svc.close()
"""


def test_a_save_while_a_deferred_promotion_waits_writes_both_and_never_deadlocks(project: Path) -> None:
    """The promotion an access earns is deferred until after the reply; the next save runs it under the
    journal lock it already holds (taking that lock again in the same thread must not wait for itself).
    In a process of its own, so that a deadlock fails the test instead of hanging the suite."""
    done = subprocess.run(
        [sys.executable, "-c", PROMOTION_THEN_SAVE, str(project)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    other = reopen(project)
    try:
        assert other.get(done.stdout.strip()).content == "Deploys go out on Tuesdays."
    finally:
        other.close()


def test_deferred_work_runs_once_in_order_past_a_failing_item(server_mode: MemoryService) -> None:
    store = server_mode.project
    ran: list[int] = []

    def fail() -> None:
        raise RuntimeError("boom")

    store.deferral.delay = 60.0
    store.deferral.defer(lambda: ran.append(1))
    store.deferral.defer(fail)
    store.deferral.defer(lambda: ran.append(3))
    store.deferral.defer(lambda: ran.append(4))
    store.catch_up()
    assert ran == [1, 3, 4]
    assert store.rebuilds == 1  # a failed item may have been an index update: rebuilt from the journal


def test_a_text_that_fails_to_index_after_the_reply_is_indexed_by_a_rebuild(
    server_mode: MemoryService, project: Path
) -> None:
    store = server_mode.project
    store.deferral.delay = 60.0
    with mock.patch.object(store.derived.keywords, "apply", side_effect=sqlite3.OperationalError("disk I/O error")):
        saved = server_mode.save(TOPICS[0][1], title=TOPICS[0][0])
        store.catch_up()  # the flush fails: logged, and the indexes are rebuilt from the journal
    assert store.rebuilds == 1
    (hit,) = server_mode.recall("database connection pool")
    assert hit.id == saved.id
    assert answers(server_mode) == fresh_answers(project)


def test_both_processes_give_the_same_answers_as_a_fresh_fold(service: MemoryService, project: Path) -> None:
    other = reopen(project)
    try:
        save_topics(service)
        for title, content in TOPICS[:3]:
            other.save(content + " Second writer.", title=title + " too")
        assert answers(service) == answers(other) == fresh_answers(project)
    finally:
        other.close()


def test_a_segment_truncated_to_an_earlier_line_is_detected(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    other = reopen(project)
    try:
        assert len(other.recall("cache", limit=10)) > 0
        path = segment_of(project)
        data = path.read_bytes()
        with open(path, "r+b") as handle:  # as a checkout of an older revision leaves it
            handle.truncate(line_ends(data)[3])
        got = answers(other)
        assert other.project.rebuilds == 1
        assert got == fresh_answers(project)
        assert got[1]["memories"] == 4
        assert ids[5] not in ids_of(other.recall("ruff check format CI", limit=10))
    finally:
        other.close()


def test_a_segment_replaced_by_an_older_copy_is_detected(service: MemoryService, project: Path) -> None:
    save_topics(service)
    other = reopen(project)
    try:
        answers(other)
        path = segment_of(project)
        data = path.read_bytes()
        path.unlink()  # git writes a new file, which may well reuse the inode
        path.write_bytes(data[: line_ends(data)[2]])
        assert answers(other) == fresh_answers(project)
        assert other.stats()["memories"] == 3
    finally:
        other.close()


def test_a_line_rewritten_in_place_keeping_the_size_is_detected(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    other = reopen(project)
    try:
        answers(other)
        path = segment_of(project)
        data = path.read_bytes()
        rewritten = data.replace(b"msgspec over pydantic", b"orjson  over  attrs  ")
        assert len(rewritten) == len(data) != 0
        with open(path, "r+b") as handle:  # as a rebase that rewrote one line would, same inode
            handle.write(rewritten)
        got = answers(other)
        assert got == fresh_answers(project)
        assert "orjson" in other.get(ids[2]).content
    finally:
        other.close()


def test_a_line_rewritten_in_a_new_file_of_the_same_size_is_detected(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    other = reopen(project)
    try:
        answers(other)
        path = segment_of(project)
        data = path.read_bytes().replace(b"msgspec over pydantic", b"orjson  over  attrs  ")
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        assert answers(other) == fresh_answers(project)
        assert "orjson" in other.get(ids[2]).content
    finally:
        other.close()


def test_a_deleted_segment_is_detected(service: MemoryService, project: Path) -> None:
    save_topics(service)
    other = reopen(project)
    try:
        answers(other)
        segment_of(project).unlink()
        got = answers(other)
        assert other.project.rebuilds == 1
        assert got == fresh_answers(project)
        assert got[1]["memories"] == 0
        assert all(recall == [] for recall in got[0])
    finally:
        other.close()


def test_a_segment_from_another_clone_is_picked_up(service: MemoryService, project: Path) -> None:
    save_topics(service)
    other = reopen(project)
    try:
        answers(other)
        foreign = [
            MemorySaved(
                id=new_id(),
                ts=now_iso(),
                by="other-clone",
                memory=new_id(),
                title=f"Pool size {i}",
                content=f"The database connection pool on host {i} is sized by traffic.",
                tags=("pool",),
            )
            for i in range(3)
        ]
        incoming = project / ".eventmem" / "journal" / "0ther0ne.main.jsonl"
        incoming.write_bytes(b"".join(encode_event(event) for event in foreign))
        got = answers(other)
        assert got == fresh_answers(project)
        assert got[1]["segments"] == 2 and got[1]["memories"] == len(TOPICS) + 3
        assert {e.memory for e in foreign} <= ids_of(other.recall("database connection pool", limit=10))
        assert {e.memory for e in foreign} <= ids_of(service.recall("database connection pool", limit=10))
    finally:
        other.close()


# -- snapshots ------------------------------------------------------------------------------------


def snapshot_file(project: Path) -> Path:
    return project / ".eventmem" / "cache" / "snapshot.bin"


def loaded(project: Path) -> tuple[MemoryService, bool]:
    service = open_service(RootChoice(project, "test"), load=False)
    ok = service.project.load_snapshot()
    service.catch_up()
    return service, ok


def test_close_writes_a_snapshot_that_the_next_start_loads(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    service.update(ids[0], importance=0.9, tags=["topic", "db"])
    service.delete(ids[1])
    before = answers(service)
    service.close()
    assert snapshot_file(project).is_file()
    later, ok = loaded(project)
    try:
        assert ok
        assert answers(later) == before == fresh_answers(project)
        assert later.recall("pool", filters=Filters(tags=("db",)))[0].id == ids[0]
    finally:
        later.close()


def test_a_snapshot_behind_the_journal_is_loaded_and_the_tail_applied(service: MemoryService, project: Path) -> None:
    save_topics(service)
    service.close()
    older = snapshot_file(project).read_bytes()
    writer = reopen(project)
    extra = writer.save("Snapshots are written on close and loaded at start.", title="Snapshot tail")
    writer.close()
    snapshot_file(project).write_bytes(older)  # a snapshot that covers all but the last save
    later, ok = loaded(project)
    try:
        assert ok
        assert extra.id in ids_of(later.recall("snapshots loaded at start"))
        assert answers(later) == fresh_answers(project)
    finally:
        later.close()


def corrupt_random(data: bytes) -> bytes:
    return np.random.default_rng(0).bytes(len(data))


def corrupt_truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def corrupt_embedder(data: bytes) -> bytes:
    snapshot = msgspec.msgpack.decode(data, type=Snapshot)
    return msgspec.msgpack.encode(msgspec.structs.replace(snapshot, embedder="some-other-model-768"))


def corrupt_format(data: bytes) -> bytes:
    snapshot = msgspec.msgpack.decode(data, type=Snapshot)
    return msgspec.msgpack.encode(msgspec.structs.replace(snapshot, format=snapshot.format + 1))


def corrupt_vectors(data: bytes) -> bytes:
    snapshot = msgspec.msgpack.decode(data, type=Snapshot)
    return msgspec.msgpack.encode(msgspec.structs.replace(snapshot, vectors_file=""))


def missing_vectors_file(data: bytes) -> bytes:
    snapshot = msgspec.msgpack.decode(data, type=Snapshot)
    return msgspec.msgpack.encode(msgspec.structs.replace(snapshot, vectors_file="vectors-gone.faiss"))


def corrupt_empty(data: bytes) -> bytes:
    return b""


@pytest.mark.parametrize(
    "damage",
    [
        corrupt_random,
        corrupt_truncated,
        corrupt_embedder,
        corrupt_format,
        corrupt_vectors,
        missing_vectors_file,
        corrupt_empty,
    ],
)
def test_a_damaged_or_foreign_snapshot_is_ignored(service: MemoryService, project: Path, damage: Any) -> None:
    save_topics(service)
    service.close()
    reference = fresh_answers(project)
    path = snapshot_file(project)
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)
    later, ok = loaded(project)
    try:
        assert not ok
        assert answers(later) == reference
    finally:
        later.close()
    path.write_bytes(damaged)
    opened = reopen(project)  # the normal start path copes too
    try:
        assert answers(opened) == reference
    finally:
        opened.close()


@pytest.mark.parametrize("rewrite", ["truncate", "same-size"])
def test_a_stale_snapshot_is_ignored(service: MemoryService, project: Path, rewrite: str) -> None:
    ids = save_topics(service)
    service.close()
    stale = snapshot_file(project).read_bytes()
    path = segment_of(project)
    data = path.read_bytes()
    if rewrite == "truncate":
        path.write_bytes(data[: line_ends(data)[4]])
        path.write_bytes(path.read_bytes() + data[line_ends(data)[4] : line_ends(data)[5]].replace(b"ruff", b"rufe"))
    else:
        path.write_bytes(data.replace(b"msgspec over pydantic", b"orjson  over  attrs  "))
    reference = fresh_answers(project)
    snapshot_file(project).write_bytes(stale)
    later, ok = loaded(project)
    try:
        assert not ok
        assert answers(later) == reference
        if rewrite == "same-size":
            assert "orjson" in later.get(ids[2]).content
    finally:
        later.close()


def test_deleting_the_whole_cache_gives_the_same_answers(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    service.delete(ids[3])
    before = answers(service)
    service.close()
    shutil.rmtree(project / ".eventmem" / "cache")
    later = reopen(project)
    try:
        assert answers(later) == before
    finally:
        later.close()


def test_a_rebuild_on_the_bulk_paths_writes_a_snapshot_of_the_same_state(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    service.update(ids[2], content="We chose msgspec for the parser.", tags=["parser"])
    service.delete(ids[3])
    before = answers(service)
    store = service.project
    encode = msgspec.msgpack.encode
    store.tuning = SNAPSHOT_AT_EVERY_CATCH_UP
    with mock.patch.object(snapshots_module.msgspec.msgpack, "encode", side_effect=encode) as spy:
        store.rebuild(wait=False)
        assert answers(service) == before  # (while the snapshot may still be written)
        store.wait_snapshot()
    store.tuning = Tuning()
    encoded = [call.args[0] for call in spy.call_args_list if isinstance(call.args[0], State | Snapshot)]
    assert [type(value) for value in encoded] == [State, Snapshot]  # the fold encoded ahead, then used
    assert isinstance(encoded[1].state, msgspec.Raw)
    snapshot = snapshots_module.read_snapshot(snapshot_file(project))
    assert snapshot.state.state() == store.derived.state
    assert snapshot.slot_ids == store.derived.table.ids and snapshot.slot_digests == store.derived.slot_hashes.stored()
    assert bytes(snapshot.columns) == store.derived.columns.snapshot()  # the filter columns and the dedup keys
    restored = ColumnsProjector(SlotTable(list(snapshot.slot_ids)), store.derived.state.visible)
    assert restored.restore(snapshot.columns)
    visible = [r for r in store.derived.state.memories.values() if store.derived.state.visible(r.id) is not None]
    assert len(visible) == len(ids) - 1
    assert all(restored.duplicates(r.content) == [r.id] for r in visible)
    service.close()
    later, ok = loaded(project)
    try:
        assert ok
        assert answers(later) == before == fresh_answers(project)
    finally:
        later.close()


def test_a_fold_encoded_ahead_is_not_used_once_the_fold_changed(service: MemoryService, project: Path) -> None:
    save_topics(service)
    store = service.project
    with store.read() as view:
        fold = view.fold
        ahead = (fold, len(fold.seen), b"stale")
        assert snapshots_module.encoded_fold(fold, ahead) == b"stale"  # unchanged: the encoding made ahead
    added = service.save("A memory saved after the fold was encoded.", title="Late").id
    with store.read() as view:
        encoded = snapshots_module.encoded_fold(view.fold, ahead)
        assert encoded != b"stale"
        assert added in msgspec.msgpack.decode(encoded, type=StoredState).memories
    assert store.save_snapshot()
    snapshot = snapshots_module.read_snapshot(snapshot_file(project))
    assert added in snapshot.state.memories


def test_the_first_read_of_the_embedding_cache_keeps_the_first_of_equal_hashes(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings", "model", 4)
    first, second, other = np.full(4, 1.0, np.float32), np.full(4, 2.0, np.float32), np.full(4, 3.0, np.float32)
    cache.store([b"a" * 16, b"b" * 16], np.stack([first, other]))
    EmbeddingCache(tmp_path / "embeddings", "model", 4).store([b"a" * 16], second[None])  # another process
    reader = EmbeddingCache(tmp_path / "embeddings", "model", 4)
    reader.refresh()
    vectors, missing = reader.lookup([b"b" * 16, b"a" * 16, b"c" * 16])
    assert missing == [2] and len(reader) == 2
    assert vectors[0].tolist() == other.tolist() and vectors[1].tolist() == first.tolist()
    cache.store([b"c" * 16, b"a" * 16], np.stack([other, second]))  # later records: read on the next refresh
    reader.refresh()
    vectors, missing = reader.lookup([b"c" * 16, b"a" * 16])
    assert missing == [] and len(reader) == 3
    assert vectors[0].tolist() == other.tolist() and vectors[1].tolist() == first.tolist()


def test_the_embedding_cache_reads_the_records_another_process_appended_between_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "embeddings"
    cache, other = EmbeddingCache(folder, "model", 4), EmbeddingCache(folder, "model", 4)
    mine, theirs, later = (np.full((1, 4), value, np.float32) for value in (1.0, 2.0, 3.0))
    cache.store([b"a" * 16], mine)  # (its own records, at the end it had read to: not read again)
    other.store([b"b" * 16], theirs)
    cache.store([b"c" * 16], later)  # (after another process's record: that one is read on a refresh)
    cache.refresh()
    vectors, missing = cache.lookup([b"a" * 16, b"b" * 16, b"c" * 16])
    assert missing == [] and len(cache) == 3
    assert vectors.tolist() == [mine[0].tolist(), theirs[0].tolist(), later[0].tolist()]


def test_the_embedding_cache_reads_vectors_from_its_file_and_a_replaced_file_gives_misses_not_other_vectors(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "embeddings"
    cache = EmbeddingCache(folder, "model", 4)
    vectors = np.arange(4 * 300, dtype=np.float32).reshape(300, 4)
    hashes = [i.to_bytes(16, "little") for i in range(300)]
    cache.store(hashes, vectors)
    reader = EmbeddingCache(folder, "model", 4)
    reader.refresh()
    asked = [hashes[299], hashes[0], b"x" * 16, hashes[150], hashes[0]]  # scattered, missing, repeated
    found, missing = reader.lookup(asked)
    assert missing == [2]
    assert found[[0, 1, 3, 4]].tolist() == vectors[[299, 0, 150, 0]].tolist()
    # the file replaced under the reader (the cache deleted, another model's file): its rows now hold
    # other texts, which are never taken for the ones asked
    cache.path.unlink()
    EmbeddingCache(folder, "model", 4).store(hashes[::-1][:200], vectors[:200] + 1)
    found, missing = reader.lookup([hashes[299], hashes[0]])
    assert missing == [0, 1] and found.tolist() == [[0.0] * 4] * 2


def test_vectors_another_process_embedded_after_the_snapshot_are_reused_not_embedded_again(project: Path) -> None:
    first = reopen(project)
    first.save("The deploy pipeline runs the smoke tests before the canary.", title="Deploy pipeline")
    first.close()  # (writes the snapshot)
    merged = [  # lines another clone wrote, come in through git: no vector of them in this clone yet
        MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), title=f"{title} ({side})", content=f"{text} ({side})")
        for side in ("ours", "theirs")
        for title, text in TOPICS
    ]
    assert len(merged) > 8  # (fewer, the built-in embedder embeds them again rather than read the cache)
    write_events(project, merged)
    second = reopen(project)  # catches up, embeds the merged texts, writes no snapshot
    assert second.recall(TOPICS[0][1], limit=2)[0].id in {merged[0].memory, merged[len(TOPICS)].memory}
    second.close()
    (cache_file,) = (project / ".eventmem" / "cache" / "embeddings").glob("*.bin")
    size = cache_file.stat().st_size
    third = reopen(project)  # from the snapshot, then the same tail
    try:
        found = {hit.id for event in merged for hit in third.recall(event.content, limit=2, mode="vector")}
        assert found == {event.memory for event in merged}
        assert third.project.rebuilds == 0
    finally:
        third.close()
    assert cache_file.stat().st_size == size  # every vector was read from the cache, none embedded again


# -- filters apply before the top-k cut -----------------------------------------------------------

CROWD = "The retry policy for the payment service uses exponential backoff with jitter."


def crowd(service: MemoryService, count: int = 200, **fields: Any) -> None:
    events = [
        MemorySaved(
            id=new_id(), ts=now_iso(), memory=new_id(), title="Retry policy", content=f"{CROWD} Variant {i}.", **fields
        )
        for i in range(count)
    ]
    service.project.append(events)


def test_a_kind_filter_returns_the_few_matching_memories_past_many_better_ones(service: MemoryService) -> None:
    crowd(service)
    wanted = {
        service.save(f"Retry decisions, round {i}: keep jitter.", title=f"Decision {i}", kind="decision").id
        for i in range(3)
    }
    assert not wanted & ids_of(service.recall("retry policy payment backoff", limit=10))
    hits = service.recall("retry policy payment backoff", limit=3, filters=Filters(kinds=("decision",)))
    assert ids_of(hits) == wanted
    for mode in ("vector", "keyword"):
        filtered = service.recall("retry policy backoff", limit=3, filters=Filters(kinds=("decision",)), mode=mode)
        assert ids_of(filtered) == wanted


def test_a_tag_filter_applies_before_the_cut(service: MemoryService) -> None:
    crowd(service, tags=("payments",))
    wanted = {
        service.save(f"Retry note {i}: keep jitter.", title=f"Note {i}", tags=["payments", "sre"]).id for i in range(3)
    }
    hits = service.recall("retry policy payment backoff", limit=3, filters=Filters(tags=("sre",)))
    assert ids_of(hits) == wanted
    both = service.recall("retry policy", limit=3, filters=Filters(tags=("payments", "sre")))
    assert ids_of(both) == wanted


def test_a_minimum_importance_applies_before_the_cut(service: MemoryService) -> None:
    crowd(service, importance=0.3)
    wanted = {service.save(f"Retry rule {i}: keep jitter.", title=f"Rule {i}", importance=0.9).id for i in range(3)}
    hits = service.recall("retry policy payment backoff", limit=3, filters=Filters(min_importance=0.8))
    assert ids_of(hits) == wanted


def test_a_scope_filter_applies_before_the_cut(service: MemoryService) -> None:
    crowd(service)
    wanted = {service.save(f"Retry habit {i}: keep jitter.", title=f"Habit {i}", scope="global").id for i in range(3)}
    assert not wanted & ids_of(service.recall("retry policy payment backoff", limit=3))
    hits = service.recall("retry policy payment backoff", limit=3, filters=Filters(scope="global"))
    assert ids_of(hits) == wanted
    project_only = service.recall("retry habit jitter", limit=10, filters=Filters(scope="project"))
    assert not wanted & ids_of(project_only)


# -- expired and superseded memories --------------------------------------------------------------


def test_an_expired_memory_is_never_returned(service: MemoryService, project: Path) -> None:
    expired = MemorySaved(
        id=new_id(),
        ts=old_ts(days=2),
        memory=new_id(),
        kind="decision",
        title="Retry policy",
        content=CROWD,
        tags=("payments",),
        importance=1.0,
        ttl_seconds=3600,
    )
    service.project.append([expired])
    live = service.save("Payment retries back off exponentially.", title="Retry policy", ttl_seconds=3600)
    for filters in (Filters(), Filters(kinds=("decision",)), Filters(tags=("payments",)), Filters(min_importance=0.9)):
        for mode in ("hybrid", "vector", "keyword"):
            hits = service.recall(CROWD, limit=10, filters=filters, mode=mode)
            assert expired.memory not in ids_of(hits)
    assert live.id in ids_of(service.recall("payment retries", limit=10))
    with pytest.raises(InvalidInput, match="expired"):  # by id too, before compaction writes `expired`
        service.get(expired.memory)
    service.close()
    later = reopen(project)
    try:
        assert expired.memory not in ids_of(later.recall(CROWD, limit=10))
    finally:
        later.close()


def test_a_superseded_memory_is_never_returned(service: MemoryService, project: Path) -> None:
    old = service.save("We parse the journal with the json module.", title="Journal parser")
    new = service.save("We parse the journal with msgspec now.", title="Journal parser, revised")
    link = LinkAdded(id=new_id(), ts=now_iso(), link=new_id(), source=new.id, target=old.id, relation="supersedes")
    service.project.append([link])
    for mode in ("hybrid", "vector", "keyword"):
        hits = service.recall("json module journal parser", limit=10, mode=mode)
        assert old.id not in ids_of(hits) and new.id in ids_of(hits)
    assert old.id in ids_of(service.recall("json module", limit=10, filters=Filters(include_superseded=True)))
    assert service.get(old.id).superseded
    service.close()
    later = reopen(project)
    try:
        assert later.project.load_snapshot()
        assert old.id not in ids_of(later.recall("json module journal parser", limit=10))
        later.delete(new.id)  # a dead superseder no longer hides the memory it replaced
        assert old.id in ids_of(later.recall("json module journal parser", limit=10))
    finally:
        later.close()


def test_a_tag_filter_after_a_snapshot_load_sees_tags_saved_before_and_after_it(project: Path) -> None:
    first = reopen(project)
    tagged = first.save("The release checklist lives in docs/release.md", tags=["release"])
    first.save("Unrelated note about the release of the cache", tags=["cache"])
    first.project.save_snapshot()
    first.close()
    second = reopen(project)
    assert second.project.load_snapshot()
    later = second.save("Tag the release commit before pushing it", tags=["release"])
    removed = second.save("A release note that is deleted", tags=["release"])
    second.delete(removed.id)
    hits = second.recall("release", limit=10, filters=Filters(tags=("release",)))
    assert sorted(h.id for h in hits) == sorted([tagged.id, later.id])
    second.close()


# -- memories of a loaded snapshot are decoded when first used ------------------------------------


def stored_memories(service: MemoryService) -> MemoryRecords:
    memories = service.project.derived.state.memories
    assert isinstance(memories, MemoryRecords)
    return memories


def test_a_loaded_snapshot_decodes_only_the_memories_a_call_reads(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    crowd(service, 60)
    service.delete(ids[1])
    decisions = [
        service.save(f"We chose option {i} for the cache layer.", title=f"Cache decision {i}", kind="decision").id
        for i in range(6)
    ]
    before = answers(service)
    service.close()
    later, ok = loaded(project)
    try:
        assert ok
        memories = stored_memories(later)
        total = memories.encoded
        assert total == len(ids) + 60 + len(decisions)
        hits = later.recall("parser library choice", limit=3)
        assert hits[0].id == ids[2]
        assert 0 < total - memories.encoded <= 3 + 1  # the hits (and the query's own bookkeeping)
        later.compact()  # the expiry and archive scans look at dead memories, not at live ones
        assert total - memories.encoded <= 3 + 1 + 1
        decoded = total - memories.encoded
        sections = ProjectContext(later).sections()  # (what a server renders into its .ai view at start)
        assert [entry.id for entry in sections["decisions"]] == decisions
        assert total - memories.encoded == decoded  # read once, not kept decoded for the life of the process
        assert answers(later) == before == fresh_answers(project)
    finally:
        later.close()


def journal_for_a_server_to_fold(service: MemoryService, project: Path) -> list[str]:
    """The topics and a crowd saved, one topic deleted, the cache removed: the server opened next folds
    the journal itself. Returns the topics' ids."""
    ids = save_topics(service)
    crowd(service, 60)
    service.delete(ids[1])
    service.close()
    shutil.rmtree(project / ".eventmem" / "cache")
    return ids


def test_a_server_that_folded_its_journal_keeps_its_records_in_the_snapshot_it_wrote(
    service: MemoryService, project: Path
) -> None:
    ids = journal_for_a_server_to_fold(service, project)
    server = open_service(RootChoice(project, "test"), background_vectors=True)
    try:
        assert server.project.save_snapshot()
        server.project.wait_snapshot()
        memories = stored_memories(server)  # swapped for the encodings in the file it wrote
        assert memories.encoded == len(ids) + 60
        assert answers(server) == fresh_answers(project)
        server.update(ids[0], importance=0.95)  # the fold goes on from the encoded records
        assert server.get(ids[0]).importance == 0.95
        assert server.project.started_again == 0  # (a journal this small: see the test below)
    finally:
        server.close()


def test_a_server_started_from_its_snapshot_gives_memory_back_once_the_threads_its_load_started_are_done(
    service: MemoryService, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(the segments' digests, the vector index copied out of its map, the keyword postings made
    from the snapshot's: each frees what it made its copy with, after the load's own give-back)"""
    save_topics(service)
    crowd(service, 60)
    assert service.project.save_snapshot()
    service.close()
    load_threads = ("eventmem-digests", "eventmem-vectors-own")
    given_back: list[tuple[str, list[str]]] = []

    def give_back() -> None:
        alive = sorted(t.name for t in threading.enumerate() if t.name in load_threads)
        given_back.append((threading.current_thread().name, alive))

    monkeypatch.setattr(runner_module, "give_back_freed_memory", give_back)
    server = open_service(RootChoice(project, "test"), background_vectors=True)
    try:
        deadline = time.monotonic() + 60
        while ("eventmem-give-back", []) not in given_back and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ("eventmem-give-back", []) in given_back, given_back
        assert stored_memories(server).encoded > 0  # (a start from the snapshot, not a fold)
        assert not any(t.name in load_threads for t in threading.enumerate())
    finally:
        server.close()


def test_a_server_that_folded_a_large_journal_starts_again_from_its_snapshot_and_answers_the_same(
    service: MemoryService, project: Path
) -> None:
    ids = journal_for_a_server_to_fold(service, project)
    server = open_service(RootChoice(project, "test"), background_vectors=True, tuning=Tuning(start_again_from=50))
    try:
        before = answers(server)  # (while it folds and embeds: keyword answers, then hybrid ones)
        store = server.project
        assert store.wait_vectors(60)
        assert store.save_snapshot()  # (a server writes one when due: a large catch-up's vectors made)
        store.wait_snapshot()
        store.wait_settled(60)
        assert store.started_again == 1
        memories = stored_memories(server)  # what a start from the snapshot holds: records still encoded
        assert memories.encoded == len(ids) + 60
        after = answers(server)
        assert after == fresh_answers(project)  # (a fold of the journal alone, beside the running server)
        assert len(before[0]) == len(after[0])
        server.update(ids[0], importance=0.95)  # the fold goes on from the snapshot's records
        assert server.get(ids[0]).importance == 0.95
        added = server.save("A memory saved after the server started again.", title="Afterwards").id
        assert server.recall("saved after the server started again", limit=1)[0].id == added
    finally:
        server.close()


def test_two_threads_reading_one_encoded_memory_get_the_same_record(service: MemoryService, project: Path) -> None:
    ids = save_topics(service)
    service.close()
    later, ok = loaded(project)
    try:
        assert ok
        memories = stored_memories(later)
        with ThreadPoolExecutor(8) as pool:
            records = list(pool.map(lambda _: memories[ids[0]], range(64)))
        assert all(record is records[0] for record in records)
        later.update(ids[0], importance=0.95)  # the fold changes the one record every reader holds
        assert memories[ids[0]].importance == 0.95 and records[0].importance == 0.95
    finally:
        later.close()


def test_a_memory_damaged_inside_a_snapshot_fails_one_call_clearly_then_everything_is_rebuilt(
    service: MemoryService, project: Path
) -> None:
    ids = save_topics(service)
    service.close()
    reference = fresh_answers(project)
    path = snapshot_file(project)
    stored = msgspec.msgpack.decode(path.read_bytes(), type=StoredSnapshot)
    stored.state.memories[ids[2]] = msgspec.Raw(msgspec.msgpack.encode({"id": ids[2], "importance": "high"}))
    path.write_bytes(msgspec.msgpack.encode(stored))
    later, ok = loaded(project)
    try:
        assert ok  # the damage is inside one memory: found when that memory is read
        with pytest.raises(SnapshotDamaged, match="rebuilt from the journal"):
            later.get(ids[2])
        assert later.get(ids[2]).title == "Parser choice"
        assert not path.exists()  # the damaged snapshot is dropped
        assert answers(later) == reference
    finally:
        later.close()
    again, ok = loaded(project)
    try:
        assert answers(again) == reference
    finally:
        again.close()


def test_a_damaged_vector_index_file_makes_the_snapshot_ignored(service: MemoryService, project: Path) -> None:
    save_topics(service)
    service.close()
    reference = fresh_answers(project)
    snapshot = msgspec.msgpack.decode(snapshot_file(project).read_bytes(), type=Snapshot)
    (project / ".eventmem" / "cache" / snapshot.vectors_file).write_bytes(b"not a faiss index" * 100)
    for map_vectors in (False, True):
        later = open_service(RootChoice(project, "test"), load=False)
        try:
            assert not later.project.load_snapshot(map_vectors=map_vectors)
            later.catch_up()
            assert answers(later) == reference
        finally:
            later.close()


def test_a_mapped_vector_index_answers_at_once_and_is_copied_on_the_first_change(
    service: MemoryService, project: Path
) -> None:
    ids = save_topics(service)
    service.close()
    reference = fresh_answers(project)
    later = open_service(RootChoice(project, "test"), load=False)
    try:
        assert later.project.load_snapshot(map_vectors=True)
        later.catch_up()
        assert later.project.derived.vectors.mapped
        assert answers(later) == reference
        later.delete(ids[0])
        added = later.save("Mapped vector indexes are copied into memory before their first change.")
        assert not later.project.derived.vectors.mapped
        assert added.id in ids_of(later.recall("mapped vector index copied"))
        assert ids[0] not in ids_of(later.recall("database connection pool", limit=10))
        assert answers(later) == fresh_answers(project)
    finally:
        later.close()


def test_old_vector_index_files_are_pruned_but_the_previous_one_is_kept(service: MemoryService, project: Path) -> None:
    for round_ in range(4):
        service.save(f"Snapshot round {round_} writes one more vector index file.")
        assert service.project.save_snapshot()
    files = sorted((project / ".eventmem" / "cache").glob("vectors-*.faiss"))
    current = msgspec.msgpack.decode(snapshot_file(project).read_bytes(), type=Snapshot).vectors_file
    assert len(files) == 2 and current in {f.name for f in files}


def test_a_large_store_searches_keywords_beside_the_vector_scan_with_the_same_answers(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_topics(service)
    crowd(service, 40)
    serial = answers(service)
    monkeypatch.setattr(query, "PARALLEL_FROM", 1)
    assert answers(service) == serial


@pytest.mark.parametrize("damaged", [False, True])
def test_a_duplicate_saved_after_a_snapshot_load_is_recognised(
    service: MemoryService, project: Path, damaged: bool
) -> None:
    ids = save_topics(service)
    service.close()
    if damaged:  # the dedup keys only: made again from the memories
        path = snapshot_file(project)
        stored = msgspec.msgpack.decode(path.read_bytes(), type=StoredSnapshot)
        count, columns, _dedup = msgspec.msgpack.decode(bytes(stored.columns))  # (the columns projector's own)
        damaged_columns = msgspec.msgpack.encode([count, columns, msgspec.Raw(b"\x81\xa1x\x05")])
        path.write_bytes(msgspec.msgpack.encode(msgspec.structs.replace(stored, columns=memoryview(damaged_columns))))
    later, ok = loaded(project)
    try:
        assert ok
        again = later.save_result(TOPICS[3][1], title="Flaky tests again")
        assert again.deduplicated and again.memory.id == ids[3]
        fresh = later.save_result("A new memory after the load.", title="New")
        assert not fresh.deduplicated and fresh.memory.id not in ids
    finally:
        later.close()


def test_a_made_up_identifier_finds_the_one_memory_that_holds_it_first(service: MemoryService) -> None:
    """An error code or ticket number means nothing to an embedder; the few exact keyword matches
    must then count as much as the vectors (a long memory dilutes the identifier's own features)."""
    rng = np.random.default_rng(7)
    words = [w for _, text in TOPICS for w in text.lower().rstrip(".").split()] + [
        f"src/{a}/{b}.py" for a in ("cache", "layout", "billing") for b in ("flag", "retry", "io")
    ]
    saved: dict[str, str] = {}
    for i in range(30):
        token = f"qzx{i}marker{rng.integers(10**6)}"
        body = list(rng.choice(words, size=45))
        body.insert(20, f"the {token} flag is on")
        saved[token] = service.save(" ".join(body), title=f"note {i}").id
    for token, memory_id in saved.items():
        assert service.recall(token, limit=1)[0].id == memory_id, token


# -- causal order and conflicting copies in the store -----------------------------------------------


def test_a_line_brought_in_twice_costs_one_rebuild_and_then_none(service: MemoryService, project: Path) -> None:
    memory_id = service.save("Releases are tagged from main.").id
    line = segment_of(project).read_bytes()
    other = reopen(project)
    try:
        journal = project / ".eventmem" / "journal"
        (journal / "0.main.jsonl").write_bytes(line)  # the same line, cherry-picked into another segment
        other.catch_up()
        assert other.project.rebuilds == 1  # which copy is folded is settled once, from the journal
        (journal / "1.main.jsonl").write_bytes(line)
        service.update(memory_id, title="Releases")
        other.catch_up()
        assert other.project.rebuilds == 1
        assert other.get(memory_id).title == "Releases"
    finally:
        other.close()


def test_an_event_whose_prev_arrives_later_is_folded_again_from_the_journal(
    service: MemoryService, project: Path
) -> None:
    memory_id = service.save("The cache is Redis.").id
    head = service.project.derived.state.head_of(memory_id)
    first = MemoryUpdated(id=new_id(), ts="9899-12-31T23:59:59Z", by="mallory", prev=head, memory=memory_id, title="1")
    second = MemoryUpdated(id=new_id(), ts=now_iso(), by="alice", prev=first.id, memory=memory_id, title="2")
    journal = project / ".eventmem" / "journal"
    (journal / "b.main.jsonl").write_bytes(encode_event(second))  # merged before the line it names
    assert service.get(memory_id).title == "2"
    (journal / "a.main.jsonl").write_bytes(encode_event(first))
    assert service.get(memory_id).title == "2"  # written after "1", so it wins over its far stamp
    assert service.project.rebuilds == 1
    assert fresh_answers(project) == answers(service)


def test_dedup_keys_a_load_leaves_to_make_answer_as_if_made_at_once_with_the_changes_since() -> None:
    def record(memory_id: str, content: str) -> MemoryRecord:
        stamp = key_of(0, "2026-01-01T00:00:00.000000Z", new_id())
        return MemoryRecord(id=memory_id, exists=True, content=content, created_stamp=stamp)

    def batch(*records: MemoryRecord, removals: tuple[str, ...] = ()) -> Batch:
        return Batch(upserts=tuple(Projected(r, False, math.inf) for r in records), removals=removals)

    loaded = [record(f"m{i}", f"Note number {i}.") for i in range(6)]
    table = SlotTable([r.id for r in loaded])
    by_id = {r.id: r for r in loaded}
    for made_later in (True, False):
        columns = ColumnsProjector(table, by_id.get)
        columns.load(batch(*loaded))
        records = columns.unmade_keys()
        assert records is not None and len(records) == len(loaded)  # (a load leaves them)
        columns.apply(batch(record("m1", "Changed text."), removals=("m2",)))  # changes before they are made
        if made_later:  # (as a server's thread does, off the lock)
            columns.install_keys(records, make_dedup_keys(records))
            assert columns.unmade_keys() is None
        assert columns.duplicates("  NOTE number 0. ") == ["m0"]
        assert columns.duplicates("note number 1.") == []  # (its text changed)
        assert columns.duplicates("changed TEXT.") == ["m1"]
        assert columns.duplicates("Note number 2.") == []  # (removed)
        columns.install_keys(records, {})  # (too late: made already, nothing taken)
        assert columns.duplicates("Note number 5.") == ["m5"]


def test_a_snapshots_copies_are_freed_before_the_server_gives_memory_back_and_the_postings_it_starts_after(
    service: MemoryService, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a thread's arguments live until it ends: the snapshot's copies, the encoded fold and the
    frozen postings, were still held when the writer gave freed memory back; and the in-memory
    postings that taking a snapshot starts after a build freed as much again, with nothing after)"""
    save_topics(service)
    crowd(service, 60)
    service.close()
    shutil.rmtree(project / ".eventmem" / "cache")
    given_back: list[tuple[str, int]] = []
    taken: set[int] = set()  # (the snapshots taken in this test: the process may hold others' garbage)
    take = snapshots_module.take

    def taking(*args: Any, **kwargs: Any) -> snapshots_module.Taken | None:
        copies = take(*args, **kwargs)
        if copies is not None:
            taken.add(id(copies[0]))
        return copies

    def give_back() -> None:
        me = threading.current_thread()
        if any(t.name == "eventmem-snapshot" and t is not me for t in threading.enumerate()):
            held = -1  # (another writer's copies are alive: a snapshot timed by the server, at once)
        else:
            held = sum(isinstance(o, snapshots_module.Snapshot) and id(o) in taken for o in gc.get_objects())
        given_back.append((me.name, held))

    monkeypatch.setattr(snapshots_module, "take", taking)
    monkeypatch.setattr(runner_module, "give_back_freed_memory", give_back)
    server = open_service(RootChoice(project, "test"), background_vectors=True)
    try:
        server.project.wait_vectors(60)
        assert server.project.save_snapshot(background=True)
        server.project.wait_snapshot()
        by_writer = [n for n, (name, held) in enumerate(given_back) if name == "eventmem-snapshot" and held >= 0]
        assert by_writer and all(given_back[n][1] == 0 for n in by_writer), given_back
        deadline = time.monotonic() + 60
        while given_back[-1][0] != "eventmem-give-back" and time.monotonic() < deadline:
            time.sleep(0.05)  # (the thread waits for the postings the snapshot started, then gives back)
        assert given_back[-1][0] == "eventmem-give-back" and len(given_back) > by_writer[-1] + 1, given_back
    finally:
        server.close()
