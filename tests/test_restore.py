"""Restoring deleted and expired memories, and what every id-taking call says about one.

Through ``eventmem serve`` driven by the SDK's stdio client, and the ``eventmem`` command.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem, ok_json, save, search_ids
from conftest import ago, journal_files, old_memory, write_events
from mcp_client import STDIO_CLIENT, call, call_error, connect

from eventmem.core.events import MemoryDeleted, MemoryExpired
from eventmem.core.ids import new_id

pytestmark = pytest.mark.anyio

UNKNOWN = "01JZZZZZZZZZZZZZZZZZZZZZZZ"


def assert_no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The server (run in this process) logged no traceback, as a server's clean stderr shows."""
    assert not [record for record in caplog.records if record.exc_info], caplog.text


def history_types(project: Path, memory_id: str) -> list[str]:
    return [event["type"] for event in ok_json(project, "log", memory_id)]


def id_taking_calls(memory_id: str, other: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool that takes a memory id, called on ``memory_id`` (``other`` is a live memory)."""
    return [
        ("get_memory", {"memory_id": memory_id}),
        ("update_memory", {"memory_id": memory_id, "importance": 0.7}),
        ("delete_memory", {"memory_id": memory_id}),
        ("promote_memory", {"memory_id": memory_id}),
        ("get_related_memories", {"memory_id": memory_id}),
        ("supersede", {"memory_id": memory_id, "content": "The corrected text."}),
        ("create_relationship", {"source_id": memory_id, "target_id": other}),
        ("create_relationship", {"source_id": other, "target_id": memory_id}),
    ]


async def test_a_deleted_memory_restored_through_the_tool_is_found_again_with_its_history_and_links(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connect(project, tools="all", client_info=STDIO_CLIENT) as session:  # (in process)
        cause = await call(session, "store_memory", content="The cache key omits the locale.", type="error")
        fix = await call(session, "store_memory", content="Add the locale to the cache key.", type="fix")
        a, b = cause["memory"]["id"], fix["memory"]["id"]
        await call(session, "create_relationship", source_id=b, target_id=a, relation="SOLVES", strength=0.6)
        await call(session, "delete_memory", memory_id=a, reason="looked wrong")
        assert (await call(session, "get_related_memories", memory_id=b))["related"] == []

        out = await call(session, "restore_memory", memory_id=a, reason="it was right after all")
        assert out["restored"] is True and out["memory"]["status"] == "live"
        recalled = await call(session, "recall_memories", query="cache key locale", limit=5)
        assert a in {hit["id"] for hit in recalled["results"]}
        related = (await call(session, "get_related_memories", memory_id=b))["related"]
        assert [(r["id"], r["relation"], r["strength"]) for r in related] == [(a, "solves", 0.6)]
    assert history_types(project, a) == ["saved", "linked", "deleted", "unlinked", "restored", "linked"]
    assert ok_json(project, "log", a)[4]["reason"] == "it was right after all"
    assert_no_traceback_logged(caplog)


async def test_restoring_a_live_memory_changes_nothing_and_says_so(project: Path) -> None:
    async with connect(project, tools="all", client_info=STDIO_CLIENT) as session:  # (in process)
        memory_id = (await call(session, "store_memory", content="Deploys happen on Tuesdays."))["memory"]["id"]
        before = journal_files(project)
        out = await call(session, "restore_memory", memory_id=memory_id)
        assert out["restored"] is False and out["message"] == f"memory {memory_id} is live: nothing to restore"
        assert journal_files(project) == before
        unknown = await call_error(session, "restore_memory", memory_id=UNKNOWN)
        assert f"no memory with id {UNKNOWN!r}" in unknown


def test_eventmem_restore_brings_a_deleted_memory_back_to_search_and_the_log_shows_both(project: Path) -> None:
    memory = save(project, "Use tabs for indentation")
    ok_json(project, "delete", memory["id"], "--reason", "we switched to spaces")
    assert memory["id"] not in search_ids(project, "tabs indentation")

    restored = eventmem(project, "restore", memory["id"], "--reason", "we switched back")
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == f"restored {memory['id']}: Use tabs for indentation\n"
    assert memory["id"] in search_ids(project, "tabs indentation")
    history = ok_json(project, "log", memory["id"])
    assert [(e["type"], e.get("reason", "")) for e in history] == [
        ("saved", ""),
        ("deleted", "we switched to spaces"),
        ("restored", "we switched back"),
    ]
    again = ok_json(project, "restore", memory["id"])
    assert again["restored"] is False and again["memory"]["status"] == "live"
    assert history_types(project, memory["id"]) == ["saved", "deleted", "restored"]


def test_an_expired_memory_is_restored_with_a_fresh_ttl(project: Path) -> None:
    noticed = old_memory("Temporary: CI uses the backup runners.", days=2, ttl=3600)
    unnoticed = old_memory("Temporary: the staging database is read-only.", days=2, ttl=3600)
    write_events(project, [noticed, unnoticed])
    write_events(project, [MemoryExpired(id=new_id(), ts=ago(days=1), by="eventmem", memory=noticed.memory)])
    for memory_id in (noticed.memory, unnoticed.memory):
        assert eventmem(project, "show", memory_id).returncode == 2
        out = ok_json(project, "restore", memory_id)
        assert out["restored"] is True and out["memory"]["status"] == "live"
        assert out["memory"]["ttl_seconds"] == 3600  # a fresh TTL, counted from the restore
        expires = datetime.fromisoformat(out["memory"]["expires_at"].replace("Z", "+00:00"))
        assert 3000 < (expires - datetime.now(UTC)).total_seconds() <= 3600
        assert ok_json(project, "show", memory_id)["memory"]["content"].startswith("Temporary:")


async def test_every_id_taking_tool_says_when_by_whom_and_why_a_memory_was_deleted_and_how_to_restore_it(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connect(project, tools="all", client_info=STDIO_CLIENT) as session:  # (in process)
        gone = (await call(session, "store_memory", content="Staging lives on host s1."))["memory"]["id"]
        other = (await call(session, "store_memory", content="Production lives on host p1."))["memory"]["id"]
        await call(session, "delete_memory", memory_id=gone, reason="s1 was retired")
        before = journal_files(project)
        for tool, arguments in id_taking_calls(gone, other):
            message = await call_error(session, tool, **arguments)
            assert f"memory {gone!r} was deleted at " in message, (tool, message)
            assert f"by {STDIO_CLIENT.name} (reason: s1 was retired)" in message, (tool, message)
            assert f"restore it with restore_memory or `eventmem restore {gone}`" in message, (tool, message)
        for tool, arguments in id_taking_calls(UNKNOWN, other)[:2]:
            assert f"no memory with id {UNKNOWN!r}" in await call_error(session, tool, **arguments)
        assert journal_files(project) == before
    for command in (["show", gone], ["update", gone, "--importance", "0.7"], ["delete", gone]):
        result = eventmem(project, *command)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "was deleted at " in result.stderr
        assert "(reason: s1 was retired)" in result.stderr and f"eventmem restore {gone}" in result.stderr
    assert_no_traceback_logged(caplog)


async def test_every_id_taking_tool_says_when_a_memory_expired_and_how_to_restore_it(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    noticed = old_memory("Temporary: the feature flag is on.", days=2, ttl=3600)
    unnoticed = old_memory("Temporary: the mirror is down.", days=2, ttl=60)
    live = old_memory("The mirror is at mirror.example.invalid.", days=2, ttl=None)
    write_events(project, [noticed, unnoticed, live])
    expired_at = ago(days=1)
    write_events(
        project,
        [MemoryExpired(id=new_id(), ts=ago(days=1), by="eventmem", memory=noticed.memory, expires_at=expired_at)],
    )
    async with connect(project, tools="all", client_info=STDIO_CLIENT) as session:  # (in process)
        for memory_id, ttl in ((noticed.memory, 3600), (unnoticed.memory, 60)):
            for tool, arguments in id_taking_calls(memory_id, live.memory):
                message = await call_error(session, tool, **arguments)
                assert f"memory {memory_id!r} expired at " in message, (tool, message)
                assert f"its TTL of {ttl} seconds ran out" in message, (tool, message)
                assert "restore it with restore_memory" in message, (tool, message)
        noticed_message = await call_error(session, "get_memory", memory_id=noticed.memory)
        assert f"expired at {expired_at} (its TTL of 3600 seconds ran out; recorded by eventmem)" in noticed_message
    shown = eventmem(project, "show", unnoticed.memory)
    assert shown.returncode == 2 and f"eventmem restore {unnoticed.memory}" in shown.stderr
    assert_no_traceback_logged(caplog)


def test_a_long_many_line_reason_in_a_merged_journal_is_explained_on_one_line(project: Path) -> None:
    saved = old_memory("The release branch is cut on Fridays.", days=3, ttl=None)
    reason = "first line\nsecond line\tafter a tab\r\n" + "x" * 1500
    write_events(project, [saved, MemoryDeleted(id=new_id(), ts=ago(days=1), memory=saved.memory, reason=reason)])
    shown = eventmem(project, "show", saved.memory)
    assert shown.returncode == 2 and shown.stderr.count("\n") == 1
    assert "(reason: first line second line after a tab xxx" in shown.stderr
    assert "x…) and is no longer returned" in shown.stderr and len(shown.stderr) < 600
    assert f"eventmem restore {saved.memory}" in shown.stderr
    assert ok_json(project, "restore", saved.memory)["restored"] is True
