"""What a tool says it did is what it did: singleton types saved through any path update their one
section, a tracked ``.ai`` file is on disk when the tool answers (or the answer says why not), and
compaction never stamps the journal in the future.

Through ``eventmem serve`` driven by the SDK's stdio client, and the ``eventmem`` command.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_runner import eventmem, ok_json
from conftest import ago, old_memory, write_events
from mcp_client import call, call_error, connect

from eventmem.core.errors import InvalidInput
from eventmem.core.events import MemoryDeleted, MemorySaved
from eventmem.core.ids import new_id, to_iso
from eventmem.service import MemoryService

pytestmark = pytest.mark.anyio

SINGLETONS = {
    "project": ("project", "section:project"),
    "architecture": ("architecture", "section:architecture"),
    "current_task": ("currentTask", "section:current-task"),
    "coding_style": ("codingStyle", "section:coding-style"),
}


def live_of_kind(project: Path, kind: str) -> list[str]:
    """The live memories of one type: those the log ever gave that type, shown one by one, and as
    many as the stats count (so a memory of the type the log missed would show as a mismatch)."""
    events = ok_json(project, "log", "--limit", "10000")
    ids = dict.fromkeys(event["memory"] for event in events if event.get("kind") == kind)
    shown = [eventmem(project, "--json", "show", memory_id) for memory_id in ids]  # (a deleted one: exit 2)
    found = [json.loads(result.stdout)["memory"] for result in shown if result.returncode == 0]
    live = [memory["id"] for memory in found if memory["kind"] == kind and memory["status"] == "live"]
    assert len(live) == ok_json(project, "stats")["by_kind"].get(kind, 0), kind
    return live


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every tracked file eventmem may write: the journal and the archive."""
    return {str(p): p.read_bytes() for p in sorted((root / ".eventmem").glob("*/*.jsonl"))}


# -- singleton types -----------------------------------------------------------------------------------


def assert_no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The server (run in this process) logged no traceback, as a server's clean stderr shows."""
    assert not [record for record in caplog.records if record.exc_info], caplog.text


async def test_a_singleton_type_saved_through_every_path_updates_its_one_section_memory(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connect(project, tools="all") as session:  # (in process)
        await call(session, "update_current_task", task="Write the CSV export.")
        stored = await call(session, "store_memory", content="Write the JSON export.", type="current_task")
        assert stored["memory"]["id"] == "section:current-task" and stored["section"] == "currentTask"
        assert "no second one was made" in stored["message"]
        saved = await call(session, "save_context", context_text="Write the XML export.", kind="current_task")
        assert saved["id"] == "section:current-task" and saved["section"] == "currentTask"
        assert (await call(session, "get_current_task"))["currentTask"] == "Write the XML export."
        for kind, (section, memory_id) in SINGLETONS.items():
            if kind != "current_task":
                out = await call(session, "store_memory", content=f"The {kind} as written by store_memory.", type=kind)
                assert (out["memory"]["id"], out["section"]) == (memory_id, section)
        refused = await call_error(
            session, "store_memory", content="Short-lived task.", type="current_task", ttl_seconds=60
        )
        assert "long-term: leave ttl_seconds out" in refused
    cli = eventmem(project, "save", "Write the YAML export.", "--type", "current_task")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == (
        "updated the project-context section currentTask (section:current-task): Write the YAML export.\n"
    )
    assert ok_json(project, "save", "Layers: api, service, store.", "--type", "architecture")["section"] == (
        "architecture"
    )
    for kind, (_, memory_id) in SINGLETONS.items():
        assert live_of_kind(project, kind) == [memory_id], kind
    assert ok_json(project, "show", "section:current-task")["memory"]["content"] == "Write the YAML export."
    assert ok_json(project, "show", "section:architecture")["memory"]["content"] == "Layers: api, service, store."
    view = project / ".eventmem" / "cache" / "ai" / "current-task.md"
    assert view.read_text(encoding="utf-8") == "# Current task\n\nWrite the YAML export.\n"
    assert_no_traceback_logged(caplog)


def test_a_singleton_save_after_the_section_was_deleted_brings_the_section_back(project: Path) -> None:
    ok_json(project, "save", "The project is a CSV tool.", "--type", "project")
    ok_json(project, "delete", "section:project", "--reason", "out of date")
    out = ok_json(project, "save", "The project is a JSON tool.", "--type", "project")
    assert out["memory"]["id"] == "section:project" and out["memory"]["status"] == "live"
    assert live_of_kind(project, "project") == ["section:project"]


async def test_no_other_memory_may_take_on_a_singleton_type(project: Path) -> None:
    async with connect(project, tools="all") as session:  # (in process)
        await call(session, "update_current_task", task="Write the CSV export.")
        note = (await call(session, "store_memory", content="Exports are streamed."))["memory"]["id"]
        changed = await call_error(session, "update_memory", memory_id=note, type="current_task")
        assert "is the project-context section currentTask, one memory (section:current-task)" in changed
        replaced = await call_error(session, "supersede", memory_id="section:current-task", content="Another task.")
        assert "section:current-task" in replaced
    assert live_of_kind(project, "current_task") == ["section:current-task"]


# -- the tracked .ai view ----------------------------------------------------------------------------------


async def test_with_a_tracked_view_the_files_hold_the_new_task_and_decision_when_the_tools_answer(
    project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ai = project / ".ai"
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
    async with connect(project, tools="all") as session:  # (in process)
        task = await call(session, "update_current_task", task="Stream the CSV rows.")
        assert (task["file"], task["fileWritten"]) == (".ai/current-task.md", True)
        assert (ai / "current-task.md").read_text(encoding="utf-8") == "# Current task\n\nStream the CSV rows.\n"
        decision = await call(session, "add_decision", decision="Use the csv module, not pandas.")
        assert (decision["file"], decision["fileWritten"]) == (".ai/decisions.md", True)
        assert "Use the csv module, not pandas." in (ai / "decisions.md").read_text(encoding="utf-8")
    # a fresh clone has the tracked files but not this clone's memo of what eventmem wrote
    (project / ".eventmem" / "cache" / "ai-view.json").unlink()
    async with connect(project, tools="all") as session:
        task = await call(session, "update_current_task", task="Document the CSV columns.")
        assert task["fileWritten"] is True
        assert (ai / "current-task.md").read_text(encoding="utf-8") == "# Current task\n\nDocument the CSV columns.\n"
        decision = await call(session, "add_decision", decision="Columns are documented in docs/export.md.")
        assert decision["fileWritten"] is True
        assert "Columns are documented in docs/export.md." in (ai / "decisions.md").read_text(encoding="utf-8")
    assert_no_traceback_logged(caplog)


async def test_a_hand_edited_tracked_file_is_left_alone_and_the_answer_says_why_and_what_to_do(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ai = project / ".ai"
    ai.mkdir()
    (ai / "current-task.md").write_text("# Current task\n\nWritten by hand.\n", encoding="utf-8")
    (ai / "decisions.md").write_text("# Decisions\n\n## 2026-01-01 — By hand\n\nKept.\n", encoding="utf-8")
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
    async with connect(project, tools="all") as session:  # (in process)
        task = await call(session, "update_current_task", task="Stream the CSV rows.")
        assert task["fileWritten"] is False
        assert task["fileNote"].startswith(".ai/current-task.md was left alone: it was edited by hand")
        assert "eventmem import pmp .ai" in task["fileNote"]
        decision = await call(session, "add_decision", decision="Use the csv module.")
        assert decision["fileWritten"] is False and "edited by hand" in decision["fileNote"]
        assert (await call(session, "get_current_task"))["currentTask"] == "Stream the CSV rows."
    assert (ai / "current-task.md").read_text(encoding="utf-8") == "# Current task\n\nWritten by hand.\n"
    assert (ai / "decisions.md").read_text(encoding="utf-8") == "# Decisions\n\n## 2026-01-01 — By hand\n\nKept.\n"


async def test_a_view_folder_outside_the_project_is_refused_before_anything_is_written(
    project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", "../outside")
    async with connect(project, tools="all") as session:  # (in process)
        for _ in range(2):  # the same answer before and after the journal exists
            refused = await call_error(session, "update_current_task", task="Stream the CSV rows.")
            assert "render_ai_dir must be a folder inside the project" in refused
    assert tree_bytes(project) == {}
    assert not (project.parent / "outside").exists()
    assert_no_traceback_logged(caplog)


# -- compact --now -----------------------------------------------------------------------------------------


def seed_compaction(project: Path) -> dict[str, str]:
    """A memory that expires within the hour, and one deleted 40 days ago (its history archivable)."""
    fading = old_memory("Temporary: the mirror is slow today.", days=0, ttl=3600)
    dead = MemorySaved(id=new_id(), ts=ago(days=45), memory=new_id(), content="Use Jenkins for CI.")
    write_events(project, [fading, dead, MemoryDeleted(id=new_id(), ts=ago(days=40), memory=dead.memory)])
    return {"fading": fading.memory, "dead": dead.memory}


def test_compact_at_a_time_later_than_the_clock_is_refused_and_writes_nothing(
    project: Path, service: MemoryService
) -> None:
    seed_compaction(project)
    before = tree_bytes(project)
    later = to_iso(datetime.now(UTC) + timedelta(hours=2))
    result = eventmem(project, "compact", "--now", later)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "later than the clock" in result.stderr and "--dry-run" in result.stderr
    with pytest.raises(InvalidInput, match="only a dry run may look ahead"):
        service.compact(now=datetime.now(UTC).timestamp() + 7200)
    assert tree_bytes(project) == before
    assert not (project / ".eventmem" / "archive").exists() or not any((project / ".eventmem" / "archive").iterdir())


def test_a_dry_run_may_look_ahead_and_lists_what_would_expire_and_be_archived_writing_nothing(project: Path) -> None:
    seeded = seed_compaction(project)
    before = tree_bytes(project)
    later = to_iso(datetime.now(UTC) + timedelta(hours=2))
    report = ok_json(project, "compact", "--now", later, "--dry-run")
    assert report == {
        "status": "success",
        "dry_run": True,
        "now": later,
        "would_expire": [seeded["fading"]],
        "would_archive": [seeded["dead"]],
    }
    human = eventmem(project, "compact", "--dry-run")
    assert human.returncode == 0, human.stderr
    assert human.stdout.splitlines()[1:] == ["would expire 0: -", f"would archive the history of 1: {seeded['dead']}"]
    assert tree_bytes(project) == before
    assert ok_json(project, "show", seeded["fading"])["memory"]["status"] == "live"


@pytest.mark.parametrize("value", ["garbage", "2026-13-45", "9" * 40])
def test_a_bad_now_is_a_one_line_error_with_exit_code_2(project: Path, value: str) -> None:
    seed_compaction(project)
    before = tree_bytes(project)
    result = eventmem(project, "compact", "--now", value, "--dry-run")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"eventmem: --now {value!r} is not an ISO-8601 time: give a date or time such as 2026-03-01T12:00:00Z\n"
    )
    assert tree_bytes(project) == before
    as_json = eventmem(project, "compact", "--now", value, "--json")
    assert as_json.returncode == 2 and as_json.stderr.count("\n") == 1
    assert json.loads(as_json.stdout)["status"] == "error"
