"""A server started from a snapshot reads the memories it shows from the snapshot's file, not through
its memory map: recalls that decode a hundred records leave the map's pages out of the process's
memory (touching a map faults in the page cache's whole folio around each record, 2 MB on a kernel
with large folios, so a server held every page of its snapshot within tens of recalls)."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from conftest import run_tool_as_a_user, write_events
from mcp import ClientSession
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.project import ProjectPaths

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

MEMORIES = 3000
SUBJECTS = "invoice webhook queue cache deploy schema token cursor backup migration".split()
VERBS = "retries expires rotates drops splits renames pins throttles".split()


def served_by_this_process() -> int:
    """The pid of the ``eventmem serve`` this test process started."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if parent == os.getpid() and b"serve" in command:
                return int(entry.name)
    raise AssertionError("no eventmem serve started by this test")


def resident_kb_of(pid: int, name: str) -> int:
    """Kilobytes of the process's maps of files named ``name`` that are in its memory (smaps ``Rss``)."""
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            inside = fields[-1].endswith(name)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


async def snapshot_written(cache: Path) -> None:
    for _ in range(600):
        if (cache / "snapshot.bin").is_file():
            return
        await anyio.sleep(0.05)
    raise AssertionError("the server wrote no snapshot")


@asynccontextmanager
async def started_from_its_snapshot(project: Path, tmp_path: Path) -> AsyncIterator[tuple[ClientSession, Path]]:
    """A real server on ``project`` that builds its cache and writes a snapshot, stopped; then one
    started from that snapshot: its initialized session and its log."""
    cache = ProjectPaths(project).cache_dir
    env = server_env(EVENTMEM_LOG_LEVEL="INFO")
    async with serve(project, env, tmp_path / "first.log") as session:
        await session.initialize()
        await vectors_ready(session)
        await snapshot_written(cache)
    errlog = tmp_path / "again.log"
    async with serve(project, env, errlog) as session:
        await session.initialize()
        yield session, errlog


async def test_recalls_after_a_start_from_a_snapshot_leave_its_pages_out_of_the_servers_memory(
    project: Path, tmp_path: Path
) -> None:
    rng = random.Random(7)
    events = [
        MemorySaved(
            id=new_id(),
            ts=now_iso(),
            memory=new_id(),
            title=f"note {n}",
            content=f"The {rng.choice(SUBJECTS)} {rng.choice(VERBS)} after {rng.randrange(2, 90)} seconds, case {n}.",
        )
        for n in range(MEMORIES)
    ]
    write_events(project, events)
    async with started_from_its_snapshot(project, tmp_path) as (session, errlog):
        await call(session, "retrieve_context", query="qqxwarmupqqx", limit=1)
        pid = served_by_this_process()
        assert "loaded snapshot" in errlog.read_text(encoding="utf-8")
        await anyio.sleep(1.0)  # (the threads a start leaves: keyword postings, the vectors' copy)
        before = resident_kb_of(pid, "snapshot.bin")
        shown: set[str] = set()
        for subject in SUBJECTS:
            for verb in VERBS[:3]:
                answer = await call(session, "retrieve_context", query=f"{subject} {verb}", limit=5)
                shown.update(hit["id"] for hit in answer["results"])
        after = resident_kb_of(pid, "snapshot.bin")
    assert len(shown) >= 100  # the recalls decoded that many records of the snapshot
    assert after - before <= 16, (before, after)
    assert_clean_stderr(errlog)


async def test_a_server_started_from_a_snapshot_lets_its_vector_file_go_once_it_copied_the_vectors_into_memory(
    project: Path, tmp_path: Path
) -> None:
    """A start maps the snapshot's vector file and copies it into memory a moment later: the map goes
    then, not at the next vector search (a server idle after its start held the file's pages beside
    the copy: 0.77 KB a memory at 384 dimensions)."""
    rng = random.Random(3)
    events = [
        MemorySaved(
            id=new_id(), ts=now_iso(), memory=new_id(), title=f"note {n}", content=f"{rng.choice(SUBJECTS)} {n}"
        )
        for n in range(MEMORIES)
    ]
    write_events(project, events)
    async with started_from_its_snapshot(project, tmp_path) as (session, errlog):
        await call(session, "retrieve_context", query="invoice webhook", limit=5)  # (a vector search, mapped)
        pid = served_by_this_process()
        assert "loaded snapshot" in errlog.read_text(encoding="utf-8")
        assert resident_kb_of(pid, ".faiss") > 0
        for _ in range(600):  # (copied into memory a second after the start, by a thread)
            if not any(line.endswith(".faiss") for line in Path(f"/proc/{pid}/maps").read_text().splitlines()):
                break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("the server still maps its vector file")
        answer = await call(session, "retrieve_context", query="invoice webhook", limit=5)
        assert answer["results"]
    assert_clean_stderr(errlog)


def test_the_memory_tool_reads_a_real_stdio_servers_rss_after_a_build_from_its_snapshot_and_when_empty() -> None:
    data = run_tool_as_a_user(
        "serving_memory.py", "--memories", "300", "--stdio", "--seconds", "2", "--queries", "3", timeout=600
    )
    side = data["this"]
    assert side["empty_project"]["rss"] > 0
    for mode in ("build", "snapshot"):
        run = side[mode]
        assert len(run["rss_each_second"]) == 2 and run["rss"] == run["rss_each_second"][-1] > 0
        assert run["rss_peak"] >= run["rss"]
        assert run["per_memory"]["rss"] == round(run["rss"] / 300, 1)
        assert run["first_call_s"] > 0
