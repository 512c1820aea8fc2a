"""A running server that sees a large branch merged under it with git answers its next call from the
keyword index, with the merge in it, and says that vectors are incomplete while the merged memories
are embedded in the background; once they are, it answers with vectors, as a rebuild would."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from conftest import git, rebuilt_answers, write_events
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import AnyEvent, MemoryDeleted, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso

pytestmark = pytest.mark.anyio

ON_MAIN = 1200
"""Memories before the merge: enough that the keyword index ranks from its in-memory postings."""
SAVED_ON_BRANCH = 2000
"""Memories the branch saves: far more than a call embeds itself (the background worker does)."""
UPDATED = 80
"""Memories of main whose text the branch changes (each then holds a word no other memory holds)."""
SUBJECTS = "invoice webhook queue cache deploy schema token cursor backup migration".split()
VERBS = "retries expires rotates drops splits renames pins throttles".split()
MARKER = "zanzibarquokka"
QUERIES = ("cache expires after seconds", "webhook retries", f"{MARKER} ledger", "backup migration throttles")


def sentence(rng: random.Random, n: int) -> str:
    return f"The {rng.choice(SUBJECTS)} {rng.choice(VERBS)} after {rng.randrange(2, 90)} seconds, case {n}."


def saved(rng: random.Random, n: int) -> MemorySaved:
    return MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=sentence(rng, n), title=f"note {n}")


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def branch_with_many_events(project: Path) -> tuple[list[MemorySaved], list[AnyEvent]]:
    """Main with :data:`ON_MAIN` memories, and a branch ``feature`` that saves :data:`SAVED_ON_BRANCH`
    more (the first titled with :data:`MARKER`), changes the text of :data:`UPDATED` of main's (the
    first ones; each new text holds the word ``quixotrel``) and deletes 100 (from the 300th). Returns
    (main's events, the branch's events)."""
    rng = random.Random(32)
    first = [saved(rng, n) for n in range(ON_MAIN)]
    write_events(project, first)
    commit(project, "memories on main")
    git(project, "checkout", "-q", "-b", "feature")
    events: list[AnyEvent] = [
        MemorySaved(
            id=new_id(), ts=now_iso(), memory=new_id(), title=f"{MARKER} ledger", content="Where the ledger lives."
        )
    ]
    events += [saved(rng, ON_MAIN + n) for n in range(SAVED_ON_BRANCH)]
    events += [
        MemoryUpdated(
            id=new_id(), ts=now_iso(), memory=e.memory, prev=e.id, content=f"{sentence(rng, n)} Renamed quixotrel."
        )
        for n, e in enumerate(first[:UPDATED])
    ]
    events += [MemoryDeleted(id=new_id(), ts=now_iso(), memory=e.memory, prev=e.id) for e in first[300:400]]
    write_events(project, events)
    commit(project, "many events on a branch")
    git(project, "checkout", "-q", "main")
    return first, events


def ranked(answer: dict[str, Any]) -> list[tuple[str, float]]:
    """(id, score) of each result, best first."""
    return [(hit["id"], hit["score"]) for hit in answer["results"]]


async def test_the_next_call_after_a_large_merge_answers_from_keywords_and_later_with_vectors_as_a_rebuild_does(
    project: Path, tmp_path: Path
) -> None:
    on_main, on_branch = branch_with_many_events(project)
    marked, renamed_word, count = on_branch[0].memory, "quixotrel", len(on_branch)
    assert isinstance(on_branch[1], MemorySaved)
    errlog = tmp_path / "serve.log"
    env = server_env(EVENTMEM_RECENCY_BOOST="0")
    async with serve(project, env, errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        await vectors_ready(session)  # (a start embeds what it finds in the background too)
        before = await call(session, "retrieve_context", query=f"{MARKER} ledger", limit=5)
        assert marked not in {hit["id"] for hit in before["results"]}
        assert "warnings" not in before

        git(project, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
        found = await call(session, "retrieve_context", query=f"{MARKER} ledger", limit=5)
        assert found["results"][0]["id"] == marked  # the merge is in the keyword index at once
        (warning,) = found["warnings"]
        assert "still being embedded" in warning and "keyword matches only" in warning, warning
        renamed = await call(session, "search_memories", query=renamed_word, limit=100)
        assert len(renamed["results"]) == UPDATED  # the changed texts too
        # the merge's dedup keys (made by a thread after the call, or by the first save that needs
        # them): a save of a branch memory's text, cased and spaced anew, is that memory; one of a
        # text the branch replaced or deleted is a new memory, and a save of its text again is it
        again = await call(session, "store_memory", content=f"  {on_branch[1].content.upper()}\n")
        assert again["deduplicated"] is True and again["memory"]["id"] == on_branch[1].memory
        for gone in (on_main[0], on_main[300]):  # (updated, deleted on the branch)
            anew = await call(session, "store_memory", content=gone.content)
            assert "deduplicated" not in anew and anew["memory"]["id"] != gone.memory
            twice = await call(session, "store_memory", content=gone.content.upper())
            assert twice["deduplicated"] is True and twice["memory"]["id"] == anew["memory"]["id"]

        await vectors_ready(session)
        done = await call(session, "retrieve_context", query=f"{MARKER} ledger", limit=5)
        assert "warnings" not in done
        assert done["results"][0]["id"] == marked
        by_vector = await call(session, "search_memories", query="where the ledger lives", mode="vector", limit=3)
        assert "warnings" not in by_vector  # (the vector index answered, not the keyword fallback)
        assert by_vector["results"][0]["id"] == marked
        served = {
            (query, mode): ranked(await call(session, "search_memories", query=query, mode=mode, limit=8))
            for query in QUERIES
            for mode in ("vector", "keyword")
        }
    assert_clean_stderr(errlog)

    # a clone of the merged project, its derived state rebuilt from the journal, answers alike
    memories, rebuilt = rebuilt_answers(project, tmp_path / "rebuilt", QUERIES, EVENTMEM_RECENCY_BOOST="0")
    assert memories == ON_MAIN + SAVED_ON_BRANCH + 1 - 100 + 2  # (and the two saved after the merge)
    for query in QUERIES:  # the same vectors, as a rebuild embeds them
        assert served[query, "vector"] == rebuilt[query, "vector"]
        # the same keyword scores (memories of equal score may be ranked in another order: slots
        # are given in the order memories reach a process, and ties go by slot)
        assert sorted(score for _, score in served[query, "keyword"]) == sorted(
            score for _, score in rebuilt[query, "keyword"]
        )
    assert count == 1 + SAVED_ON_BRANCH + UPDATED + 100
