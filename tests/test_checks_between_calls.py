"""What a call must see, however cheap the catch-up before it is made: a running server still refuses
a segment, the journal folder or the usage folder swapped for a symbolic link after its first calls,
and a memory another process saved just before a call is found by that call."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from cli_runner import save
from conftest import old_memory, reopen, tree, write_events
from mcp_client import call, connect, serve, server_env

from eventmem.core.errors import UnsafePath
from eventmem.core.ids import iso_to_epoch
from eventmem.journal.files import check_path
from eventmem.journal.project import ProjectPaths

pytestmark = pytest.mark.anyio

SECRET = "The production database password is PURPLE-ELEPHANT-42"
SECRET_QUERY = "PURPLE-ELEPHANT-42 database password"


def secret_elsewhere(tmp_path: Path) -> tuple[str, Path]:
    """A memory holding a secret, saved in another project; its id and that project's segment."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    secret = save(elsewhere, SECRET, "--title", "Database password")
    (segment,) = (elsewhere / ".eventmem" / "journal").glob("*.jsonl")
    return secret["id"], segment


def ids(answer: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in answer["results"]]


async def test_a_segment_swapped_for_a_link_between_two_calls_of_a_running_server_is_not_read(
    tmp_path: Path, project: Path
) -> None:
    secret, outside = secret_elsewhere(tmp_path)
    own = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")
    (segment,) = (project / ".eventmem" / "journal").glob("*.jsonl")
    # the link's target holds the segment's own lines and the secret's: only the link makes it foreign
    combined = tmp_path / "combined.jsonl"
    combined.write_bytes(segment.read_bytes() + outside.read_bytes())

    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
        segment.unlink()
        segment.symlink_to(combined)
        answer = await call(session, "retrieve_context", query=SECRET_QUERY)
        assert secret not in ids(answer)
        assert own["id"] not in ids(answer)  # (its only segment is no longer read either)
        assert any(segment.name in w and "symbolic link" in w for w in answer.get("warnings", [])), answer


async def test_a_new_segment_that_is_a_link_appearing_between_two_calls_is_not_read(
    tmp_path: Path, project: Path
) -> None:
    secret, outside = secret_elsewhere(tmp_path)
    own = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")

    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
        (project / ".eventmem" / "journal" / "teammate.main.jsonl").symlink_to(outside)
        answer = await call(session, "retrieve_context", query=SECRET_QUERY)
        assert secret not in ids(answer)
        assert any("journal/teammate.main.jsonl" in w for w in answer.get("warnings", [])), answer
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]


async def test_the_journal_folder_swapped_for_a_link_between_two_calls_is_not_read(
    tmp_path: Path, project: Path
) -> None:
    secret, outside = secret_elsewhere(tmp_path)
    own = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")
    journal = project / ".eventmem" / "journal"

    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
        os.rename(journal, tmp_path / "journal-moved-away")
        journal.symlink_to(outside.parent, target_is_directory=True)
        answer = await call(session, "retrieve_context", query=SECRET_QUERY)
        assert secret not in ids(answer)
        assert any("journal" in w and "symbolic link" in w for w in answer.get("warnings", [])), answer


async def test_accesses_are_not_written_through_a_usage_folder_swapped_for_a_link_between_two_calls(
    tmp_path: Path, project: Path
) -> None:
    own = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")
    target = tmp_path / "outside"
    target.mkdir()
    (target / "usage.jsonl").write_text("not eventmem's\n", encoding="utf-8")
    before = tree(target)
    local = project / ".eventmem" / "local"

    # (a server process: in process, the access written after the first calls' replies can race the swap)
    async with serve(project, server_env(), tmp_path / "server.log") as session:
        await session.initialize()
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
        assert (local / "usage.jsonl").read_bytes().count(own["id"].encode()) >= 1  # (the first call's access)
        swap_for_a_link(local, target, tmp_path / "moved-away")
        for _ in range(3):  # each call runs what the one before it left for after its reply
            assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [own["id"]]
    assert tree(target) == before


def swap_for_a_link(folder: Path, target: Path, away: Path) -> None:
    """Move a folder away and put a link to `target` in its place, again if the server made it anew in between."""
    for attempt in range(100):
        with contextlib.suppress(FileNotFoundError):
            os.rename(folder, away.with_name(f"{away.name}-{attempt}"))
        try:
            folder.symlink_to(target, target_is_directory=True)
            return
        except FileExistsError:  # the server's access of the call before made the folder again
            continue
    raise AssertionError(f"{folder} kept being made again")


async def test_a_memory_saved_by_another_process_just_before_a_call_is_retrieved_by_it(
    tmp_path: Path, project: Path
) -> None:
    first = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")
    async with connect(project) as session:  # (in process: the same server, without a process's start-up)
        assert ids(await call(session, "retrieve_context", query="scheduler retries")) == [first["id"]]
        for n in range(3):
            other = save(project, f"Deploys are frozen on Fridays, rule {n}.", "--title", "Deploy freeze")
            answer = await call(session, "retrieve_context", query=f"deploys frozen Fridays rule {n}", limit=10)
            assert other["id"] in ids(answer)


def test_a_path_checked_once_is_refused_once_one_of_its_folders_became_a_link(tmp_path: Path) -> None:
    paths = ProjectPaths(tmp_path / "project")
    usage = paths.local_dir / "usage.jsonl"
    paths.inside(paths.local_dir, kind="folder", create=True)
    usage.write_text("", encoding="utf-8")
    for _ in range(2):
        assert paths.inside(usage) == usage
        assert check_path(usage) == usage
    os.rename(paths.local_dir, tmp_path / "moved-away")
    paths.local_dir.symlink_to(tmp_path / "moved-away", target_is_directory=True)
    with pytest.raises(UnsafePath, match=r"\.eventmem/local .*symbolic link"):
        paths.inside(usage)
    with pytest.raises(UnsafePath, match=r"\.eventmem/local .*symbolic link"):
        check_path(usage)


def test_a_path_looked_up_before_its_project_was_known_is_checked_once_it_is(tmp_path: Path) -> None:
    root = tmp_path / "later"
    (tmp_path / "target").mkdir()
    (root / ".eventmem").mkdir(parents=True)
    (root / ".eventmem" / "local").symlink_to(tmp_path / "target", target_is_directory=True)
    usage = root / ".eventmem" / "local" / "usage.jsonl"
    assert check_path(usage) == usage  # outside every project known so far: not checked
    ProjectPaths(root)
    with pytest.raises(UnsafePath, match="symbolic link"):
        check_path(usage)


def test_recalls_at_moments_back_and_forth_see_each_ttl_run_out_and_each_change_between_them(project: Path) -> None:
    short = old_memory("Temporary: the staging mirror is down.", days=0, ttl=100)
    longer = old_memory("Temporary: the staging freeze lasts a while.", days=0, ttl=1000)
    forever = old_memory("The staging cluster runs in the second region.", days=0, ttl=None)
    write_events(project, [short, longer, forever])
    start = iso_to_epoch(short.ts)
    service = reopen(project)
    try:

        def found(after: float) -> set[str]:
            return {hit.id for hit in service.recall("staging", limit=10, now=start + after)}

        every = {short.memory, longer.memory, forever.memory}
        assert found(50) == every
        assert found(500) == {longer.memory, forever.memory}
        assert found(60) == every  # (a question asked earlier again)
        assert found(2000) == {forever.memory}
        assert found(99.5) == every
        assert found(100) == {longer.memory, forever.memory}  # (an expiry is exclusive)
        service.delete(forever.memory)
        assert found(50) == {short.memory, longer.memory}
        assert {hit.id for hit in service.search(limit=10)} <= {short.memory, longer.memory}
    finally:
        service.close()
