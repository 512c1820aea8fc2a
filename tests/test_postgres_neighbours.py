"""Sitting neighbours answered from PostgreSQL: ``eventmem serve --store`` lends the memories saved just
before and after a hybrid answer's best candidates their share as the in-process store does, read
in the journal's own order (the save times) from the database's index, within the query's filters;
and a dated note rises for the day it names, as in process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import write_events
from mcp import ClientSession
from test_fusion import ASKED, FILLERS, QUESTION, REPLY, saved
from test_postgres_serve import recall, served, store
from test_postgres_sync import new_project

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, to_iso

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


def tagged(event: MemorySaved) -> MemorySaved:
    return MemorySaved(id=event.id, ts=event.ts, memory=event.memory, content=event.content, tags=("chat",))


async def answers(session: ClientSession, **arguments: Any) -> list[tuple[str, float]]:
    found = await recall(session, ASKED, limit=10, **arguments)
    return [(hit["id"], round(hit["score"], 3)) for hit in found["results"]]


async def test_a_reply_saved_just_after_a_matching_memory_is_lifted_from_the_database_exactly_as_in_process(
    tmp_path: Path, pg_uri: str
) -> None:
    """The reply shares no word with the question asked; it was saved 10 seconds after a turn that
    does, by another writer whose line came last in the journal, and comes back with that turn, at
    the same score from both stores (to the third decimal). A tag filter that leaves the reply out
    lends its place to the next memory of the sitting that passes it, in both alike."""
    root = new_project(tmp_path, "alpha")
    start = datetime.now(UTC) - timedelta(hours=3)
    fillers = [tagged(saved(text, start + timedelta(seconds=30 * i))) for i, text in enumerate(FILLERS)]
    question = tagged(saved(QUESTION, start + timedelta(seconds=30 * 8 - 15)))
    reply = saved(REPLY, start + timedelta(seconds=30 * 8 - 5))
    later = MemorySaved(
        id=new_id(),
        ts=to_iso(start + timedelta(hours=1)),
        memory=new_id(),
        content="Ben: my grandmother taught me the tango last winter.",
    )
    write_events(root, [*fillers, question, later, reply])
    async with (
        served(root, tmp_path / "database.log", "--store", pg_uri) as database,
        served(root, tmp_path / "local.log") as local,
    ):
        from_database, in_process = await answers(database), await answers(local)
        # (the database's cosines are of float32 vectors, the store's of float16 codes: equal to the
        # third decimal; memories of equal scores but for that may come in another order)
        assert from_database[:5] == in_process[:5] and set(from_database) == set(in_process)
        top = [memory for memory, _ in from_database[:5]]
        assert question.memory in top and reply.memory in top
        assert later.memory not in [memory for memory, _ in from_database]
        filtered = await answers(database, tags=["chat"])
        assert set(filtered) == set(await answers(local, tags=["chat"]))
        assert question.memory in [memory for memory, _ in filtered]
        assert reply.memory not in [memory for memory, _ in filtered]


async def test_a_note_dated_the_day_a_question_names_rises_from_the_database_exactly_as_in_process(
    tmp_path: Path, pg_uri: str
) -> None:
    root = new_project(tmp_path, "alpha")
    async with (
        served(root, tmp_path / "database.log", "--store", pg_uri) as database,
        served(root, tmp_path / "local.log") as local,
    ):
        earlier = await store(
            database, "2024-01-09: the billing worker crashed because the disk of the billing worker was full", "crash"
        )
        dated = await store(database, "2024-03-14: billing down again", "down")
        for number, text in enumerate(FILLERS):
            await store(database, text, f"filler {number}")
        asked = "what happened to the billing worker's disk on 14 March, 2024?"
        found = await recall(database, asked, limit=2)
        assert [hit["id"] for hit in found["results"]] == [dated, earlier]
        here = await recall(local, asked, limit=2)
        assert [(h["id"], round(h["score"], 3)) for h in found["results"]] == [
            (h["id"], round(h["score"], 3)) for h in here["results"]
        ]
