"""The keyword index holds the index of the memories' texts, not a copy of them (the fold has them):
the FTS5 database a server keeps in memory, and writes into its snapshot, holds no text of a memory,
and a server that edits and deletes memories, started again from its snapshot, ranks keyword
searches with exactly the scores a rebuild from the journal gives."""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest
from conftest import write_events
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.project import ProjectPaths
from eventmem.runner.snapshots import read_snapshot

pytestmark = pytest.mark.anyio

MEMORIES = 1200
"""Above the in-memory postings' threshold (1,000): they are made from the fold's texts."""
SUBJECTS = "invoice webhook queue cache deploy schema token cursor backup migration".split()
VERBS = "retries expires rotates drops splits renames pins throttles".split()
QUERIES = ("cache expires after seconds", "webhook retries", "quokka ledger", "backup migration throttles", "case 7")
TOOLS = ["--tools", "core,memory"]
POSTINGS = "keyword postings of [0-9]+ memories (made|read from the snapshot)"


def sentence(rng: random.Random, n: int) -> str:
    return f"The {rng.choice(SUBJECTS)} {rng.choice(VERBS)} after {rng.randrange(2, 90)} seconds, case {n}."


def keyword_database(cache: Path) -> bytes:
    """The FTS5 database of the keyword index in the snapshot (after its frame and length)."""
    keywords = bytes(read_snapshot(cache / "snapshot.bin").keywords)
    start = keywords.index(b"\n") + 1 + 8
    return keywords[start : start + int.from_bytes(keywords[start - 8 : start], "little")]


async def snapshot_of(cache: Path) -> None:
    for _ in range(1200):
        if (cache / "snapshot.bin").is_file():
            return
        await anyio.sleep(0.05)
    raise AssertionError("the server wrote no snapshot")


async def logged(errlog: Path, pattern: str) -> None:
    for _ in range(1200):
        if re.search(pattern, errlog.read_text(encoding="utf-8")):
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"the server never logged {pattern!r}")


async def keyword_answers(session: object) -> dict[str, list[tuple[str, float]]]:
    return {
        query: [
            (hit["id"], hit["score"])
            for hit in (await call(session, "search_memories", query=query, mode="keyword", limit=10))["results"]  # type: ignore[arg-type]
        ]
        for query in QUERIES
    }


async def test_the_keyword_index_holds_no_copy_of_the_texts_and_ranks_edits_and_deletes_as_a_rebuild_does(
    project: Path, tmp_path: Path
) -> None:
    rng = random.Random(11)
    events = [
        MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), title=f"note {n}", content=sentence(rng, n))
        for n in range(MEMORIES)
    ]
    write_events(project, events)
    cache = ProjectPaths(project).cache_dir
    env = server_env(EVENTMEM_LOG_LEVEL="INFO")
    # it builds, then writes a snapshot
    async with serve(project, env, tmp_path / "first.log", args=TOOLS) as session:
        await session.initialize()
        await vectors_ready(session)
        await snapshot_of(cache)
        await logged(tmp_path / "first.log", POSTINGS)
    database = keyword_database(cache)
    with contextlib.closing(sqlite3.connect(":memory:")) as held:
        held.deserialize(database)
        assert held.execute("SELECT count(*) FROM docs WHERE docs MATCH 'seconds'").fetchone() == (MEMORIES,)
        assert held.execute("SELECT DISTINCT title, summary, content, tags FROM docs").fetchall() == [(None,) * 4]
    for event in events:  # the index finds the texts, but holds none of them
        assert event.content.encode() not in database

    errlog = tmp_path / "again.log"
    async with serve(project, env, errlog, args=TOOLS) as session:  # from the snapshot: edits and deletes
        await session.initialize()
        await call(session, "retrieve_context", query="warm up", limit=1)
        assert "loaded snapshot" in errlog.read_text(encoding="utf-8")
        for event in events[:40:4]:
            await call(session, "update_memory", memory_id=event.memory, content="A quokka keeps the ledger now.")
        for event in events[1:40:4]:
            await call(session, "delete_memory", memory_id=event.memory, reason="gone")
        for event in events[2:40:4]:
            await call(session, "update_memory", memory_id=event.memory, title="quokka webhook", tags=["ledger"])
        await logged(errlog, POSTINGS)
        served = await keyword_answers(session)
    assert_clean_stderr(errlog)
    assert served["quokka ledger"] and served["webhook retries"]

    # from a snapshot, the edits caught up
    async with serve(project, env, tmp_path / "third.log", args=TOOLS) as session:
        await session.initialize()
        assert await keyword_answers(session) == served
        assert "loaded snapshot" in (tmp_path / "third.log").read_text(encoding="utf-8")

    shutil.rmtree(cache)
    async with serve(project, env, tmp_path / "rebuilt.log", args=TOOLS) as session:  # a rebuild from the journal
        await session.initialize()
        await vectors_ready(session)
        await logged(tmp_path / "rebuilt.log", POSTINGS)
        assert await keyword_answers(session) == served
