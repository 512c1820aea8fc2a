"""Later edits win, and one state everywhere: hostile stamps and conflicting event ids, end to end.

A line merged from another branch may carry a stamp far in the future (the latest the decoder
accepts is in the year 9899: a later one is reported and left out), or reuse an event id with
other content. An edit made after it must still win, and every process (a running server, a fresh
command, a rebuild) must fold the same state, with the oddity reported by ``eventmem doctor``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem, ok_json, only_segment, save
from conftest import git
from mcp_client import call, connect

from eventmem.core.codec import decode_line, encode_event
from eventmem.core.events import AnyEvent, MemoryDeleted, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso
from eventmem.core.stamps import event_digest

pytestmark = pytest.mark.anyio

FAR_STAMPS = [
    ("9899-12-31T23:59:59Z", None),
    ("9899-12-31T23:59:59.999999Z", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"),  # the greatest stamp and id a line may hold
]


def merge_segment(project: Path, name: str, *events: AnyEvent) -> Path:
    """A segment as another writer's branch brings it in with a merge."""
    path = project / ".eventmem" / "journal" / name
    path.write_bytes(b"".join(encode_event(event) for event in events))
    return path


def shown(project: Path, memory_id: str) -> dict[str, Any]:
    memory: dict[str, Any] = ok_json(project, "show", memory_id)["memory"]
    return memory


@pytest.mark.parametrize(("stamp", "event_id"), FAR_STAMPS)
async def test_an_update_made_after_a_line_stamped_at_the_end_of_time_wins_everywhere(
    project: Path, stamp: str, event_id: str | None
) -> None:
    memory_id = save(project, "The queue is Redis.", "--title", "old")["id"]
    hostile = MemoryUpdated(id=event_id or new_id(), ts=stamp, by="mallory", memory=memory_id, title="hostile")
    merge_segment(project, "mallory.main.jsonl", hostile)
    assert shown(project, memory_id)["title"] == "hostile"  # the far stamp wins over what was before it
    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        before = await call(session, "get_memory", memory_id=memory_id)
        assert before["memory"]["title"] == "hostile"
        updated = ok_json(project, "update", memory_id, "--title", "new")
        assert updated["memory"]["title"] == "new"
        running = await call(session, "get_memory", memory_id=memory_id)
        assert running["memory"]["title"] == "new"
    assert shown(project, memory_id)["title"] == "new"
    assert eventmem(project, "rebuild").returncode == 0
    assert shown(project, memory_id)["title"] == "new"
    last = json.loads(own_segment(project).read_bytes().splitlines()[-1])
    assert last["prev"] == hostile.id  # the edit names what it was made after


MERGED = ("mallory.main.jsonl", "0.main.jsonl")


def own_segment(project: Path) -> Path:
    """This clone's segment (not one merged in by a test)."""
    (own,) = (p for p in (project / ".eventmem" / "journal").glob("*.jsonl") if p.name not in MERGED)
    return own


def test_a_restore_made_after_a_future_stamped_delete_from_another_writer_brings_the_memory_back(
    project: Path,
) -> None:
    memory_id = save(project, "Deploys go through the staging cluster first.")["id"]
    merge_segment(
        project, "mallory.main.jsonl", MemoryDeleted(id=new_id(), ts=FAR_STAMPS[1][0], by="mallory", memory=memory_id)
    )
    assert eventmem(project, "show", memory_id).returncode != 0
    restored = eventmem(project, "restore", memory_id, "--reason", "deleted by mistake")
    assert restored.returncode == 0, restored.stderr
    last = json.loads(own_segment(project).read_bytes().splitlines()[-1])
    assert last["type"] == "restored" and last["prev"] != ""  # named the far delete: sorts after it
    assert shown(project, memory_id)["status"] == "live"
    assert eventmem(project, "rebuild").returncode == 0
    assert shown(project, memory_id)["status"] == "live"


def test_doctor_reports_a_stamp_far_ahead_of_the_clock_with_its_segment_and_offset(project: Path) -> None:
    save(project, "The docs live in docs/.")
    memory_id = save(project, "Tests run with pytest.")["id"]
    first = MemoryUpdated(id=new_id(), ts=now_iso(), by="mallory", memory=memory_id, title="fine")
    ahead = MemoryUpdated(id=new_id(), ts=FAR_STAMPS[0][0], by="mallory", memory=memory_id, title="far")
    merge_segment(project, "mallory.main.jsonl", first, ahead)
    report = json.loads(eventmem(project, "doctor", "--json").stdout)
    ((found),) = report["future_stamps"]
    assert (found["segment"], found["offset"], found["event"], found["ts"]) == (
        "journal/mallory.main.jsonl",
        len(encode_event(first)),
        ahead.id,
        ahead.ts,
    )
    human = eventmem(project, "doctor").stdout
    assert f"journal/mallory.main.jsonl at byte {len(encode_event(first))}" in human and ahead.ts in human


def other_copy(original: MemorySaved, *, smaller: bool) -> MemorySaved:
    """A copy of ``original`` (same event id) with other content whose digest is smaller or larger."""
    digest = event_digest(original)
    for n in range(1000):
        copy = MemorySaved(
            id=original.id, ts=original.ts, by="mallory", memory=original.memory, content=f"The queue is Kafka ({n})."
        )
        if (event_digest(copy) < digest) == smaller:
            return copy
    raise AssertionError("no copy found")


@pytest.mark.parametrize("copy_wins", [True, False])
async def test_an_event_id_reused_with_other_content_gives_one_state_in_a_server_a_fresh_process_and_a_rebuild(
    project: Path, copy_wins: bool
) -> None:
    memory_id = save(project, "The queue is Redis.")["id"]
    original = decode_line(only_segment(project).read_bytes().splitlines()[0])
    assert isinstance(original, MemorySaved)
    copy = other_copy(original, smaller=copy_wins)
    expected = copy.content if copy_wins else original.content
    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        assert (await call(session, "get_memory", memory_id=memory_id))["memory"]["content"] == original.content
        merge_segment(project, "0.main.jsonl", copy)  # sorts before the original's segment
        running = await call(session, "get_memory", memory_id=memory_id)
        assert running["memory"]["content"] == expected
        assert (await call(session, "get_memory", memory_id=memory_id))["memory"]["content"] == expected
    assert shown(project, memory_id)["content"] == expected
    assert eventmem(project, "rebuild").returncode == 0
    assert shown(project, memory_id)["content"] == expected
    doctor = eventmem(project, "doctor", "--json")
    assert doctor.returncode == 1
    (conflict,) = json.loads(doctor.stdout)["conflicting_ids"]
    assert conflict["id"] == original.id and len(conflict["locations"]) == 2
    folded = "journal/0.main.jsonl" if copy_wins else f"journal/{own_segment(project).name}"
    assert conflict["folded"]["segment"] == folded


def test_an_edit_made_after_a_far_stamped_line_is_not_reported_as_overridden_by_it(project: Path) -> None:
    """The audit, diff and pr-summary list concurrent edits in the fold's own order: the edit that
    named the far-stamped line as prev wins, and had seen it, so no teammate's change was lost."""
    memory_id = save(project, "The queue is Redis.", "--title", "old")["id"]
    commit(project, "a memory")
    hostile = MemoryUpdated(id=new_id(), ts=FAR_STAMPS[1][0], by="mallory", memory=memory_id, title="hostile")
    merge_segment(project, "mallory.main.jsonl", hostile)
    commit(project, "merged from mallory's branch")
    assert ok_json(project, "update", memory_id, "--title", "new")["memory"]["title"] == "new"
    commit(project, "an edit made after the merge")
    audit = json.loads(eventmem(project, "replay", "audit", "--json").stdout)
    assert [edit for edit in audit["concurrent_edits"] if edit["wins"]["event"] == hostile.id] == []
    assert [edit for edit in audit["concurrent_edits"] if edit["field"] == "title"] == []


def commit(project: Path, message: str) -> None:
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", message)
