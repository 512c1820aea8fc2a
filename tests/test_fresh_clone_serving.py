"""A server started on a fresh clone (the journal, no cache) answers its first call from the keyword
index at once, saying that vectors are incomplete, while its memories are embedded in the background
(and its dedup keys made); then it answers with vectors as a rebuild does, its approximate vector
index built once, over them all."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import rebuilt_answers, write_events
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.project import ProjectPaths

pytestmark = pytest.mark.anyio

MEMORIES = 3000
"""Far more than a call embeds itself: the background worker embeds them."""
ANN_FROM = 1000
"""The approximate vector index's threshold for this test (50,000 by default)."""
MARKER = "zanzibarquokka"
SUBJECTS = "invoice webhook queue cache deploy schema token cursor backup migration".split()
VERBS = "retries expires rotates drops splits renames pins throttles".split()
QUERIES = ("cache expires after seconds", "webhook retries", f"{MARKER} ledger", "backup migration throttles")


BUILT = r"approximate vector index of (\d+) built in [0-9.]+s, trained on (\d+) of them"


EMBEDDED = f"embedded {MEMORIES + 1} memories with hashing-v4-384: every vector is in"
POSTINGS = f"keyword postings of {MEMORIES + 1} memories made"


async def logged(errlog: Path, pattern: str) -> list[Any]:
    """What ``pattern`` finds in the server's log, once it finds something (the server logs the
    work of its threads as it ends: vectors, the approximate index, the keyword postings)."""
    for _ in range(1200):
        found = re.findall(pattern, errlog.read_text(encoding="utf-8"))
        if found:
            return found
        await anyio.sleep(0.05)
    raise AssertionError(f"the server never logged {pattern!r}")


def saved(rng: random.Random, n: int) -> MemorySaved:
    content = f"The {rng.choice(SUBJECTS)} {rng.choice(VERBS)} after {rng.randrange(2, 90)} seconds, case {n}."
    return MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=content, title=f"note {n}")


async def test_a_fresh_clone_answers_its_first_call_from_keywords_and_later_with_vectors_as_a_rebuild_does(
    project: Path, tmp_path: Path
) -> None:
    rng = random.Random(41)
    marked = MemorySaved(
        id=new_id(), ts=now_iso(), memory=new_id(), title=f"{MARKER} ledger", content="Where it lives."
    )
    events = [marked, *(saved(rng, n) for n in range(MEMORIES))]
    write_events(project, events)
    shutil.rmtree(ProjectPaths(project).cache_dir, ignore_errors=True)  # (a clone holds the journal only)
    errlog = tmp_path / "serve.log"
    env = server_env(EVENTMEM_RECENCY_BOOST="0", EVENTMEM_ANN_FROM=str(ANN_FROM), EVENTMEM_LOG_LEVEL="INFO")
    async with serve(project, env, errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        first = await call(session, "retrieve_context", query=f"{MARKER} ledger", limit=5)
        assert first["results"][0]["id"] == marked.memory  # the keyword index answers the first call
        (warning,) = first["warnings"]
        assert "still being embedded" in warning and "keyword matches only" in warning, warning
        # a save of a memory's text (cased and spaced anew) is that memory, as soon as the server answers
        again = await call(session, "store_memory", content=f"  {events[7].content.upper()}\n")
        assert again["deduplicated"] is True and again["memory"]["id"] == events[7].memory

        await vectors_ready(session)
        builds = await logged(errlog, BUILT)
        await logged(errlog, POSTINGS)
        by_vector = await call(session, "search_memories", query="where it lives", mode="vector", limit=3)
        assert "warnings" not in by_vector  # (the vector index answered, not the keyword fallback)
        assert by_vector["results"][0]["id"] == marked.memory
        served = {
            (query, mode): [
                (hit["id"], hit["score"])
                for hit in (await call(session, "search_memories", query=query, mode=mode, limit=8))["results"]
            ]
            for query in QUERIES
            for mode in ("vector", "keyword")
        }
    assert_clean_stderr(errlog)
    # one approximate index, trained on every vector (not on the first batches, then again)
    said = errlog.read_text(encoding="utf-8")
    assert builds == re.findall(BUILT, said) == [(str(MEMORIES + 1), str(MEMORIES + 1))]
    # the keyword postings were made once the vectors were (threads that share the interpreter)
    assert said.index(EMBEDDED) < said.index(POSTINGS)

    # a clone whose derived state is rebuilt from the journal (embedding before it answers) answers alike
    environ = {"EVENTMEM_RECENCY_BOOST": "0", "EVENTMEM_ANN_FROM": str(ANN_FROM)}
    memories, rebuilt = rebuilt_answers(project, tmp_path / "rebuilt", QUERIES, **environ)
    assert memories == MEMORIES + 1
    assert served == rebuilt


WORDS = "café naïve Straße İstanbul 数据库 缓存 parse_config retry_after webhook invoice ledger quokka".split()
MIXED_QUERIES = ("café webhook", "parse_config retry", "数据库 缓存", "straße ledger", "naïve quokka invoice")


def mixed(rng: random.Random, n: int) -> MemorySaved:
    """A memory whose text may hold accents, other scripts and identifiers, and now and then is long
    enough (past 32,768 characters) for its words to be counted apart from FTS5's."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
    filler = " ledger entry" * 2800 if n % 500 == 0 else ""
    return MemorySaved(
        id=new_id(), ts=now_iso(), memory=new_id(), content=f"{words}, case {n}.{filler}", title=rng.choice(WORDS)
    )


async def test_a_fresh_clone_of_texts_in_many_scripts_answers_its_first_keyword_searches_as_a_rebuild_does(
    project: Path, tmp_path: Path
) -> None:
    # (more memories than a start indexes in one thread: the rows are filled by one thread and their
    # words counted by another, ASCII texts by FTS5 and the others in Python)
    rng = random.Random(43)
    write_events(project, [mixed(rng, n) for n in range(MEMORIES)])
    shutil.rmtree(ProjectPaths(project).cache_dir, ignore_errors=True)  # (a clone holds the journal only)
    errlog = tmp_path / "serve.log"
    async with serve(
        project, server_env(EVENTMEM_RECENCY_BOOST="0"), errlog, args=["--tools", "core,memory"]
    ) as session:
        await session.initialize()
        served = {}
        for query in MIXED_QUERIES:  # (the first ones while the vectors are still being made)
            answer = await call(session, "search_memories", query=query, mode="keyword", limit=8)
            served[(query, "keyword")] = [(hit["id"], hit["score"]) for hit in answer["results"]]
        await vectors_ready(session)  # (its cache then written as it closes)
    assert_clean_stderr(errlog)
    assert all(served.values())
    memories, rebuilt = rebuilt_answers(project, tmp_path / "rebuilt", MIXED_QUERIES, EVENTMEM_RECENCY_BOOST="0")
    assert memories == MEMORIES
    assert served == {key: hits for key, hits in rebuilt.items() if key[1] == "keyword"}
