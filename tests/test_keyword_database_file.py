"""A server restores its keyword index's database from the snapshot into a file of the cache folder,
removed from the folder at once (out of the process's memory, see
``eventmem/projectors/keywords_stored.py``): it answers as a server holding it in memory does, before
and after a write, leaves nothing behind when killed, and clears files a killed server left."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ago, eventmem_command, write_events
from mcp import ClientSession
from mcp_client import assert_clean_stderr, call, serve, server_env

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id
from eventmem.projectors.keywords import KeywordIndex
from eventmem.projectors.keywords_stored import ABANDONED_AFTER_SECONDS

pytestmark = pytest.mark.anyio

WORDS = (
    "pool timeout retry celery queue worker hydration bundle staging subnet fixture flaky token cookie "
    "parse_config load_settings x86_64 Café naïve Straße ERR_CONN_RESET k8s v2 deploy deployment deployed"
).split()
QUERIES = ("pool timeout", "parse_config retry", "café deploy", "ERR_CONN_RESET k8s", "deployed worker")


def seed(project: Path, count: int = 300) -> None:
    rng = random.Random(41)
    write_events(
        project,
        [
            MemorySaved(
                id=new_id(),
                ts=ago(days=2000),  # (no recency boost moving between the two servers' answers)
                memory=new_id(),
                title=" ".join(rng.sample(WORDS, 2)),
                content=" ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 30))),
                tags=(f"t{number % 4}",),
            )
            for number in range(count)
        ],
    )


async def keyword_answers(session: ClientSession) -> list[list[tuple[str, float]]]:
    out = []
    for query in QUERIES:
        for arguments in ({}, {"tags": "t1"}):
            found = await call(session, "search_memories", query=query, limit=10, mode="keyword", **arguments)
            out.append([(hit["id"], hit["score"]) for hit in found["results"]])
    return out


def server_pid() -> int:
    """The ``eventmem serve`` process this test's MCP client started."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if parent == os.getpid() and b"eventmem" in command and b"serve" in command:
                return int(entry.name)
    raise AssertionError("no eventmem serve process found")


def open_keyword_files(pid: int) -> list[str]:
    """The keyword databases' files process ``pid`` holds open (removed from their folder)."""
    held = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if "/keywords-" in target and ".sqlite" in target:
            held.append(target)
    return held


def keyword_files(project: Path) -> list[str]:
    return sorted(p.name for p in (project / ".eventmem" / "cache").glob("keywords-*"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads a process's open files from /proc")
async def test_a_server_from_its_snapshot_keeps_the_keyword_database_in_a_removed_file_and_answers_alike(
    project: Path, tmp_path: Path
) -> None:
    seed(project)
    env = server_env()
    # the first server folds the journal itself (no snapshot yet): its keyword database is in memory
    async with serve(project, env, tmp_path / "built.log", args=["--tools", "core,memory"]) as session:
        await session.initialize()
        in_memory = await keyword_answers(session)
        assert not open_keyword_files(server_pid())
    rebuilt = subprocess.run(eventmem_command("rebuild"), cwd=project, env=env, capture_output=True)
    assert rebuilt.returncode == 0, rebuilt.stderr  # (a snapshot, its keyword index made in memory)
    assert sum(len(found) for found in in_memory) > 4 * len(in_memory)

    async with serve(project, env, tmp_path / "restored.log", args=["--tools", "core,memory"]) as session:
        await session.initialize()
        from_file = await keyword_answers(session)
        held = open_keyword_files(server_pid())
        assert len(held) == 1 and held[0].endswith("(deleted)"), held
        assert keyword_files(project) == []
        assert from_file == in_memory

        saved = await call(session, "store_memory", content="quokka_loader broke the Straße deploy", tags=["t1"])
        found = await call(session, "search_memories", query="quokka_loader", limit=3, mode="keyword")
        assert found["results"][0]["id"] == saved["memory"]["id"]
        changed = await keyword_answers(session)
    assert changed != in_memory
    assert_clean_stderr(tmp_path / "restored.log")

    # the same answers from a server folding the journal again, its database in memory
    subprocess.run(["rm", "-rf", str(project / ".eventmem" / "cache")], check=True)
    async with serve(project, env, tmp_path / "again.log", args=["--tools", "core,memory"]) as session:
        await session.initialize()
        assert await keyword_answers(session) == changed
        assert not open_keyword_files(server_pid())


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads a process's open files from /proc")
async def test_a_killed_server_leaves_no_keyword_file_and_one_a_killed_maker_left_is_cleared_later(
    project: Path, tmp_path: Path
) -> None:
    seed(project, 60)
    env = server_env()
    subprocess.run(eventmem_command("rebuild"), cwd=project, env=env, check=True, capture_output=True)
    cache = project / ".eventmem" / "cache"
    # as a server killed between making its file and removing it would leave them: one long ago, one now
    (cache / "keywords-abandon1.sqlite").write_bytes(b"x" * 4096)
    old = time.time() - ABANDONED_AFTER_SECONDS - 60
    os.utime(cache / "keywords-abandon1.sqlite", (old, old))
    (cache / "keywords-justmade.sqlite").write_bytes(b"x" * 4096)

    async with serve(project, env, tmp_path / "killed.log", args=["--tools", "core,memory"]) as session:
        await session.initialize()
        found = await call(session, "search_memories", query="pool timeout", limit=5, mode="keyword")
        assert found["results"]
        pid = server_pid()
        assert len(open_keyword_files(pid)) == 1
        assert keyword_files(project) == ["keywords-justmade.sqlite"]  # (a maker may still be writing it)
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):  # (a dead process, reaped or not, holds no file)
            if not Path(f"/proc/{pid}/fd").exists() or not any(Path(f"/proc/{pid}/fd").iterdir()):
                break
            time.sleep(0.05)
    assert keyword_files(project) == ["keywords-justmade.sqlite"]


def test_an_index_whose_folder_cannot_hold_its_file_is_restored_in_memory_and_answers(tmp_path: Path) -> None:
    index = KeywordIndex()
    index.upsert([(slot, f"note {slot}", "", f"parse_config pool timeout item{slot}", "") for slot in range(50)])
    expected = index.search("parse_config item7", 5)
    stored = index.serialize()

    folder = tmp_path / "cache"
    folder.mkdir()
    in_file = KeywordIndex(stored, folder=folder)
    in_memory = KeywordIndex(stored, folder=tmp_path / "missing")  # (no such folder: no file can be made)
    assert in_file.search("parse_config item7", 5) == expected == in_memory.search("parse_config item7", 5)
    assert list(folder.iterdir()) == []
    in_file.upsert([(50, "new", "", "parse_config item50", "")])
    assert in_file.search("item50", 1)[0][0] == 50


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return mounted.returncode == 0


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte; the filler's path (remove it to make room again)."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as handle:
        while True:
            handle.write(b"x" * 4096)
            handle.flush()
    with contextlib.suppress(OSError), open(filler, "ab") as handle:
        while True:
            handle.write(b"x")
            handle.flush()
    return filler


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads a process's open files from /proc")
async def test_a_full_cache_disk_keeps_the_keyword_database_in_memory_or_rebuilds_it_and_loses_no_memory(
    project: Path, tmp_path: Path
) -> None:
    seed(project, 200)
    cache = project / ".eventmem" / "cache"
    if not _mount_tmpfs(cache, "6m"):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        env = server_env()
        subprocess.run(eventmem_command("rebuild"), cwd=project, env=env, check=True, capture_output=True)
        async with serve(project, env, tmp_path / "before.log", args=["--tools", "core,memory"]) as session:
            await session.initialize()
            expected = await keyword_answers(session)

        filler = _fill(cache)  # the restored database's file cannot be written: it stays in memory
        async with serve(project, env, tmp_path / "full.log", args=["--tools", "core,memory"]) as session:
            await session.initialize()
            assert await keyword_answers(session) == expected
            assert not open_keyword_files(server_pid())
            assert keyword_files(project) == []
        filler.unlink()

        async with serve(project, env, tmp_path / "filling.log", args=["--tools", "core,memory"]) as session:
            await session.initialize()
            assert await keyword_answers(session) == expected
            assert len(open_keyword_files(server_pid())) == 1
            filler = _fill(cache)  # the database's file cannot grow: a save's keyword row fails to go in
            many = " ".join(f"word{number}x" for number in range(3000))  # (new pages of postings)
            saved = await call(session, "store_memory", content=f"quokka_loader broke the deploy: {many}")
            found = await call(session, "search_memories", query="quokka_loader", limit=3, mode="keyword")
            assert [hit["id"] for hit in found["results"]][:1] == [saved["memory"]["id"]]
            filler.unlink()
        assert_clean_stderr(tmp_path / "filling.log")
        assert "the disk is full (database or disk is full)" in (tmp_path / "filling.log").read_text(encoding="utf-8")
    finally:
        subprocess.run(["umount", "-l", str(cache)], check=False)
