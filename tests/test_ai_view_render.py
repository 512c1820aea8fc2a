"""The ``.ai`` view of a large project: each file rendered an entry at a time, to the bytes the whole
section renders, compared with the file by hash, and written only when it changed."""

from __future__ import annotations

import hashlib
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from eventmem.context.project_context import ProjectContext
from eventmem.context.render import render_section
from eventmem.core.records import MemoryRecord, MemoryRecords, RecordHead
from eventmem.core.sections import SECTIONS
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService, open_service
from eventmem.service.batches import BatchItem

FILLER = "The parser keeps one buffer per connection and reuses it between frames; "


@pytest.fixture
def service(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
    svc = open_service(RootChoice(project, "test"))
    yield svc
    svc.close()


def decisions(count: int, *, words: int) -> list[BatchItem]:
    """``count`` decisions of about ``words`` x 12 words each, one in seven titled."""
    return [
        BatchItem(
            content=f"Decision {n}: " + FILLER * words + f"\n\nWhy: reason {n}.",
            title=f"Choice {n}" if n % 7 == 0 else "",
            kind="decision",
        )
        for n in range(count)
    ]


def files(project: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((project / ".ai").iterdir())}


def test_a_view_of_many_entries_is_written_as_its_whole_sections_render_and_only_changed_files_again(
    project: Path, service: MemoryService
) -> None:
    saved = service.save_batch(decisions(700, words=4), by="test")
    service.save_batch([BatchItem(content=f"[ ] step {n}\n  detail {n}", kind="todo") for n in range(300)], by="test")
    context = ProjectContext(service)
    context.update_current_task("Stream the view.")

    first = context.render_view()
    sections = context.sections()
    rendered = {s.file: render_section(s, sections[s.key]).encode("utf-8") for s in SECTIONS}
    assert files(project) == rendered  # more than one batch of entries, and more than one piece a file
    assert len(rendered["decisions.md"]) > 3 * 65536 and rendered["decisions.md"].count(b"\n## ") == 700
    assert rendered["todo.md"].startswith(b"# Todo\n\n- [ ] step 0\n    detail 0\n")
    assert first["sha256"] == {name: hashlib.sha256(data).hexdigest() for name, data in rendered.items()}

    assert context.render_view()["written"] == []
    service.delete(saved[350].memory.id, by="test")
    again = context.render_view()
    assert again["written"] == ["decisions.md"]
    assert files(project)["decisions.md"].count(b"\n## ") == 699
    assert sorted(files(project)) == sorted(rendered)  # no temp file left beside them


def test_a_server_started_from_its_snapshot_renders_the_view_its_fold_rendered(project: Path) -> None:
    """Its records are still encoded: the view is ordered by their ids, types, titles and creation
    alone, and each entry decoded as it is written."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
        first = open_service(RootChoice(project, "test"))
        saved = first.save_batch(decisions(600, words=4), by="test")
        first.save_batch([BatchItem(content=f"[ ] step {n}", kind="todo") for n in range(50)], by="test")
        ProjectContext(first).update_current_task("Stream the view.")
        rendered = ProjectContext(first).render_view()
        before = files(project)
        assert first.project.save_snapshot()
        first.close()

        again = open_service(RootChoice(project, "test"))
        try:
            context = ProjectContext(again)
            assert context.render_view() == rendered | {"written": []}
            assert files(project) == before
            again.delete(saved[0].memory.id, by="test")
            assert context.render_view()["written"] == ["decisions.md"]
            sections = context.sections()
            whole = {s.file: render_section(s, sections[s.key]).encode("utf-8") for s in SECTIONS}
            assert files(project) == whole and whole["decisions.md"].count(b"\n## ") == 599
        finally:
            again.close()


def test_a_tracked_view_folder_is_not_touched_by_a_render_that_changes_nothing_and_loses_killed_renders_temp_files(
    project: Path, service: MemoryService
) -> None:
    """(a folder others watch, an editor or git, sees a temp file only when its file changes)"""
    service.save_batch(decisions(300, words=4), by="test")
    context = ProjectContext(service)
    context.render_view()
    folder = project / ".ai"
    before = folder.stat().st_mtime_ns
    time.sleep(0.01)
    assert context.render_view()["written"] == []
    assert folder.stat().st_mtime_ns == before

    left = [folder / ".decisions.md.k1ll3d0x.tmp", project / ".eventmem" / "cache" / ".todo.md.k1ll3d0x.tmp"]
    for path in left:
        path.write_bytes(b"half of a render killed with SIGKILL")
    kept = folder / ".notes.md.k1ll3d0x.tmp"  # (not a view file's: someone else's)
    kept.write_bytes(b"not ours")
    assert context.render_view()["written"] == []
    assert not any(path.exists() for path in left) and kept.exists()


def test_a_record_head_reads_the_fields_of_an_encoded_record_and_their_defaults() -> None:
    full = MemoryRecord(
        id="m1",
        exists=True,
        kind="decision",
        title="Pool size",
        content="Twenty connections. " * 100,
        created_stamp="0000000000001-0000-aaaa",
        deleted_stamp="0000000000003-0000-aaaa",
        restored_stamp="0000000000004-0000-aaaa",
    )
    for record in (full, MemoryRecord(id="m1")):
        encoded = msgspec.Raw(msgspec.msgpack.encode(record))
        head = MemoryRecords({"m1": encoded}).read_head("m1", encoded)
        assert isinstance(head, RecordHead)
        assert {name: getattr(head, name) for name in RecordHead.__struct_fields__} == {
            name: getattr(record, name) for name in RecordHead.__struct_fields__
        }
        assert head.status == record.status


def test_a_hand_edited_file_is_left_alone_unless_it_holds_merge_conflict_markers_anywhere(
    project: Path, service: MemoryService
) -> None:
    service.save_batch(decisions(20, words=1), by="test")
    context = ProjectContext(service)
    context.render_view()
    edited = b"# Decisions\n\n" + b"x" * ((1 << 20) - 16) + b"\n"
    (project / ".ai" / "decisions.md").write_bytes(edited)
    service.save_batch(decisions(1, words=1), by="test")
    assert context.render_view()["skipped"] == ["decisions.md"]
    assert (project / ".ai" / "decisions.md").read_bytes() == edited

    # markers that straddle the first megabyte read of the file are found all the same
    conflicted = edited[:-1] + b"<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n"
    assert conflicted.index(b"<<<<<<< ") < 1 << 20 < conflicted.index(b"<<<<<<< ") + 8
    (project / ".ai" / "decisions.md").write_bytes(conflicted)
    assert context.render_view()["written"] == ["decisions.md"]
    assert b"<<<<<<<" not in (project / ".ai" / "decisions.md").read_bytes()


def test_rendering_a_large_view_holds_a_small_part_of_its_files_at_once(project: Path, service: MemoryService) -> None:
    saved = service.save_batch(decisions(1500, words=24), by="test")
    context = ProjectContext(service)
    context.render_view()
    size = (project / ".ai" / "decisions.md").stat().st_size
    assert size > 2_500_000
    service.delete(saved[0].memory.id, by="test")
    context.store.catch_up()
    context.store.wait_snapshot()  # what a thousand saves start beside the render is not measured:
    for thread in threading.enumerate():  # the snapshot, and the keyword postings made in a thread
        if thread.name == "eventmem-postings":
            thread.join(60)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        assert context.render_view()["written"] == ["decisions.md"]
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    # held whole, the file would be read, rendered and encoded at once: several times its size
    assert peak < size / 5, f"rendering a {size:,}-byte file held {peak:,} bytes at its peak"
