"""The shared project-memory protocol through a real MCP client: every tool, the workflows and their
prompts, the ``.ai`` view (files and resources), ``eventmem import pmp``, the size guard, the git
diff summary, and the tool profiles.

Most tests connect in-process (``Client(build_server(...))``); one drives ``eventmem serve --tools
project-context`` over stdio, and the import runs the real ``eventmem import pmp`` command.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_runner import eventmem
from conftest import WAIT, eventmem_command, git, journal_events, reopen, wait_until
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import Implementation, ResourceUpdatedNotification
from mcp_client import assert_clean_stderr, call_error, call_tool, serve, server_env
from mcp_client import connect as connect_client

from eventmem.adapters.mcp.server import PROFILES, choose_families
from eventmem.context.project_context import ProjectContext
from eventmem.core.errors import InvalidInput
from eventmem.journal.project import find_root

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "fixtures" / "pmp"
CLIENT = Implementation(name="pmp-agent", version="1.0")
PROTOCOL_TOOLS = {
    "bootstrap_project_context",
    "get_project_context",
    "get_current_task",
    "update_current_task",
    "update_context_section",
    "add_decision",
    "record_conversation_summary",
    "suggest_context_updates",
    "summarize_git_diff",
    "suggest_memory_optimization",
    "apply_memory_optimization",
    "optimize_ai_memory",
    "run_project_open_workflow",
    "run_conversation_end_workflow",
    "get_effective_project_root",
}
CORE_TOOLS = {tool for tools in PROFILES["core"].values() for tool in tools}
FILES = [
    "architecture.md",
    "coding-style.md",
    "conversation-summary.md",
    "current-task.md",
    "decisions.md",
    "project.md",
    "recent-changes.md",
    "todo.md",
]


def connect(project: Path, *, tools: str | None = "all", **options: Any) -> AbstractAsyncContextManager[Client]:
    """A client of a server offering ``tools`` (every tool unless told); ``options`` as for ``mcp_client.connect``."""
    return connect_client(project, client_info=CLIENT, tools=tools, **options)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must not fail (a paused write is not a failure); returns its structured content."""
    return await call_tool(client, tool, arguments, statuses=("success", "paused"))


def journal_bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / ".eventmem").glob("*/*.jsonl"))}


def view(root: Path, name: str) -> str:
    return (root / ".eventmem" / "cache" / "ai" / name).read_text(encoding="utf-8")


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# -- tool profiles ------------------------------------------------------------------------------------


async def tool_names(project: Path, tools: str | None) -> set[str]:
    async with connect(project, tools=tools) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


async def test_the_default_profile_is_short_and_keeps_the_basic_calls_of_every_design(project: Path) -> None:
    default = await tool_names(project, None)
    assert default == CORE_TOOLS
    assert 8 <= len(default) <= 12
    assert {"save_context", "store_memory", "bootstrap_project_context", "record_conversation_summary"} <= default


async def test_families_and_profiles_are_chosen_by_flag_then_environment_then_config(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await tool_names(project, "project-context") == PROTOCOL_TOOLS
    assert await tool_names(project, "context,project-context") == PROTOCOL_TOOLS | {"save_context", "retrieve_context"}
    everything = await tool_names(project, "all")
    assert everything >= PROTOCOL_TOOLS | CORE_TOOLS | {"store_memory", "recall_memories"}

    (project / ".eventmem").mkdir(exist_ok=True)
    (project / ".eventmem" / "config.toml").write_text('tools = "project-context"\n', encoding="utf-8")
    assert await tool_names(project, None) == PROTOCOL_TOOLS  # the config setting
    monkeypatch.setenv("EVENTMEM_TOOLS", "context")
    assert await tool_names(project, None) == {"save_context", "retrieve_context"}  # the environment wins
    assert await tool_names(project, "core") == CORE_TOOLS  # and serve --tools wins over both
    monkeypatch.setenv("EVENTMEM_TOOLS", "${EVENTMEM_TOOLS}")  # an unexpanded client variable is ignored
    assert await tool_names(project, None) == PROTOCOL_TOOLS


async def test_the_server_instructions_name_only_the_tools_it_exposes(project: Path) -> None:
    async with connect(project, tools="project-context", mode="legacy") as client:
        protocol = client.instructions or ""
    async with connect(project, tools="context", mode="legacy") as client:
        context = client.instructions or ""
    assert "run_project_open_workflow or bootstrap_project_context" in protocol
    assert "retrieve_context" not in protocol and "store_memory" not in protocol
    assert "retrieve_context" in context and "save_context" in context
    assert "bootstrap_project_context" not in context and "recall_memories" not in context


def test_an_unknown_family_is_refused_with_the_names_to_choose_from() -> None:
    assert choose_families("core, project-context") == ("core", "project-context")
    assert choose_families("default") == ("core",)
    with pytest.raises(InvalidInput, match="project-context"):
        choose_families("projekt")


async def test_every_protocol_tool_has_a_description_annotations_and_an_output_schema(project: Path) -> None:
    async with connect(project, tools="project-context") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 30, name
        assert tool.title and tool.annotations is not None, name
        assert tool.output_schema is not None and tool.output_schema.get("type") == "object", name
    for name in ("bootstrap_project_context", "get_project_context", "suggest_context_updates"):
        assert tools[name].annotations.read_only_hint is True, name  # type: ignore[union-attr]
    assert tools["apply_memory_optimization"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert set(tools["record_conversation_summary"].input_schema["properties"]) >= {
        "summary",
        "currentTask",
        "recentChanges",
        "decisions",
    }
    assert "writeToRecentChanges" in tools["summarize_git_diff"].input_schema["properties"]


# -- reading ------------------------------------------------------------------------------------------


async def test_bootstrap_on_a_new_project_warns_about_every_core_section_and_writes_nothing(project: Path) -> None:
    async with connect(project) as client:
        out = await call(client, "bootstrap_project_context")
    assert out["coreContext"] == {"project": "", "architecture": "", "currentTask": "", "codingStyle": ""}
    assert set(out["supplementalContext"]) == {"decisions", "recentChanges", "conversationSummary", "todo"}
    assert all(brief["count"] == 0 for brief in out["supplementalContext"].values())
    assert out["recommendedNextFiles"] == []
    assert len(out["warnings"]) == 4
    assert all("missing" in warning for warning in out["warnings"])
    assert not (project / ".eventmem" / "journal").exists()


async def test_bootstrap_gives_core_sections_in_full_and_the_others_in_brief_with_files_to_read(project: Path) -> None:
    async with connect(project) as client:
        await call(client, "update_context_section", section="project", content="Tidewater: tide tables.")
        await call(client, "update_current_task", task="Add CSV export.\n\nNext: stream rows.")
        for i in range(7):
            await call(client, "add_decision", decision=f"Decision number {i} about exports.")
        await call(client, "update_context_section", section="todo", content="[ ] Write docs", mode="append")
        await call(client, "update_context_section", section="todo", content="[x] Set up CI", mode="append")
        out = await call(client, "bootstrap_project_context")
    assert out["coreContext"]["project"] == "Tidewater: tide tables."
    assert out["coreContext"]["currentTask"] == "Add CSV export.\n\nNext: stream rows."
    decisions = out["supplementalContext"]["decisions"]
    assert (decisions["count"], decisions["omitted"], len(decisions["entries"])) == (7, 2, 5)
    assert decisions["entries"][-1].startswith(f"{today()} — Decision number 6 about exports")
    todo = out["supplementalContext"]["todo"]
    assert (todo["count"], todo["open"], todo["entries"]) == (2, 1, ["[ ] Write docs"])
    assert out["recommendedNextFiles"] == [".eventmem/cache/ai/decisions.md"]
    assert (project / out["recommendedNextFiles"][0]).read_text(encoding="utf-8").count("\n## ") == 7
    assert [w.split(" ", 1)[0] for w in out["warnings"]] == ["architecture", "codingStyle"]


async def test_get_project_context_returns_every_section_in_full(project: Path) -> None:
    async with connect(project) as client:
        await call(client, "update_context_section", section="architecture", content="API → model → DB.")
        await call(client, "add_decision", decision="Stream CSV rows.", rationale="One year is 35 000 rows.")
        out = await call(client, "get_project_context")
    assert set(out["sections"]) == {
        "project",
        "architecture",
        "currentTask",
        "codingStyle",
        "decisions",
        "recentChanges",
        "conversationSummary",
        "todo",
    }
    assert out["sections"]["architecture"] == "# Architecture\n\nAPI → model → DB.\n"
    assert out["sections"]["decisions"] == (
        f"# Decisions\n\n## {today()} — Stream CSV rows\n\nStream CSV rows.\n\nRationale: One year is 35 000 rows.\n"
    )
    assert out["files"]["decisions"] == ".eventmem/cache/ai/decisions.md"
    assert view(project, "decisions.md") == out["sections"]["decisions"]


async def test_update_current_task_replaces_or_appends_and_get_current_task_reads_it_back(project: Path) -> None:
    async with connect(project) as client:
        empty = await call(client, "get_current_task")
        first = await call(client, "update_current_task", task="# Current task\n\nAdd CSV export.")
        second = await call(client, "update_current_task", task="Then: docs.", mode="append")
        third = await call(client, "update_current_task", task="Fix the DST bug.")
        got = await call(client, "get_current_task")
    assert empty["currentTask"] == "" and empty["isPlaceholder"] is True
    assert first["currentTask"] == "Add CSV export."  # a heading that only names the section is dropped
    assert second["currentTask"] == "Add CSV export.\n\nThen: docs."
    assert third["previous"] == "Add CSV export.\n\nThen: docs."
    assert got["currentTask"] == "Fix the DST bug." and got["isPlaceholder"] is False
    assert got["updatedBy"] == CLIENT.name
    events = journal_events(project)
    assert [(e["type"], e["memory"]) for e in events] == [
        ("saved", "section:current-task"),
        ("updated", "section:current-task"),
        ("updated", "section:current-task"),
    ]
    assert events[0]["kind"] == "current_task"
    assert view(project, "current-task.md") == "# Current task\n\nFix the DST bug.\n"


async def test_a_list_section_cannot_be_replaced_and_an_unknown_section_is_named(project: Path) -> None:
    async with connect(project) as client:
        replace = await call_error(client, "update_context_section", section="decisions", content="x")
        unknown = await call_error(client, "update_context_section", section="roadmap", content="x")
        empty = await call_error(client, "update_current_task", task="  ")
    assert "mode='append'" in replace
    assert "unknown section 'roadmap'" in unknown and "currentTask" in unknown
    assert "must not be empty" in empty
    assert not (project / ".eventmem" / "journal").exists()


async def test_add_decision_records_a_dated_entry_with_its_rationale(project: Path) -> None:
    async with connect(project) as client:
        out = await call(
            client,
            "add_decision",
            decision="Use PostgreSQL for readings. It replicates per region.",
            title="PostgreSQL over SQLite",
            rationale="Two regions read the same data.",
        )
    assert out["title"] == f"{today()} — PostgreSQL over SQLite"
    assert out["content"].endswith("\n\nRationale: Two regions read the same data.")
    [event] = journal_events(project)
    assert (event["type"], event["memory"], event["kind"], event["title"]) == (
        "saved",
        out["id"],
        "decision",
        out["title"],
    )


async def test_record_conversation_summary_writes_the_summary_task_changes_and_decisions_in_one_call(
    project: Path,
) -> None:
    async with connect(project) as client:
        out = await call(
            client,
            "record_conversation_summary",
            summary="Designed the CSV export and fixed the forecast window.",
            title="CSV export",
            currentTask="Stream the CSV rows.",
            recentChanges=["Added export.py", "2025-03-04: Fixed the forecast window"],
            decisions=["Stream CSV rows with a generator.", "Use ; as the separator."],
        )
    assert out["currentTaskUpdated"] is True
    assert len(out["recentChangeIds"]) == 2 and len(out["decisionIds"]) == 2
    events = journal_events(project)
    assert [(e["type"], e.get("kind")) for e in events] == [
        ("saved", "conversation_summary"),
        ("saved", "current_task"),
        ("saved", "recent_change"),
        ("saved", "recent_change"),
        ("saved", "decision"),
        ("saved", "decision"),
    ]
    assert events[0]["title"].startswith(today()) and events[0]["title"].endswith(" UTC — CSV export")
    assert view(project, "recent-changes.md") == (
        f"# Recent changes\n\n- {today()}: Added export.py\n- 2025-03-04: Fixed the forecast window\n"
    )
    assert view(project, "conversation-summary.md").endswith(
        "\n\nDesigned the CSV export and fixed the forecast window.\n"
    )


async def test_suggest_context_updates_previews_appends_and_replacements_and_writes_nothing(project: Path) -> None:
    async with connect(project) as client:
        await call(client, "update_current_task", task="Add CSV export.")
        await call(client, "add_decision", decision="Stream CSV rows with a generator.")
        before = journal_bytes(project)
        out = await call(
            client,
            "suggest_context_updates",
            summary="Finished the CSV export. We decided to use semicolons. Next step: write the docs.",
            decisions=["Stream CSV rows with a generator.", "Gzip exports over 1 MB."],
            recentChanges=["Added export.py"],
            includeGitDiff=False,
        )
        after = journal_bytes(project)
    assert after == before
    assert out["wroteNothing"] is True
    got = [(s["section"], s["action"], s["tool"]) for s in out["suggestions"]]
    assert got == [
        ("conversationSummary", "append", "record_conversation_summary"),
        ("currentTask", "replace", "update_current_task"),  # "finished": the task may be stale
        ("decisions", "append", "add_decision"),
        ("recentChanges", "append", "record_conversation_summary"),
        ("todo", "append", "update_context_section"),
        ("project", "replace", "update_context_section"),
        ("architecture", "replace", "update_context_section"),
        ("codingStyle", "replace", "update_context_section"),
    ]
    decision = out["suggestions"][2]
    assert decision["arguments"] == {"decision": "Gzip exports over 1 MB."}
    assert decision["preview"] == f"## {today()} — Gzip exports over 1 MB\n\nGzip exports over 1 MB.\n"
    assert out["skipped"] == [
        {"section": "decisions", "text": "Stream CSV rows with a generator.", "reason": "already recorded"}
    ]
    assert out["suggestions"][3]["preview"] == f"- {today()}: Added export.py\n"
    assert out["suggestions"][4]["preview"] == "- [ ] Next step: write the docs.\n"


# -- git ----------------------------------------------------------------------------------------------


async def test_summarize_git_diff_lists_changed_files_and_stats_in_a_real_repo(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("a = 1\nb = 2\nc = 3\n", encoding="utf-8")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    async with connect(project) as client:
        await call(client, "update_current_task", task="Work on the app.")  # .eventmem/ is left out of the diff
        (project / "src" / "app.py").write_text("a = 1\nb = 20\nc = 3\nd = 4\n", encoding="utf-8")
        (project / "src" / "new.py").write_text("x\ny\nz\nw\n", encoding="utf-8")
        (project / "logo.png").write_bytes(b"\x89PNG\0\0binary")
        (project / "docs").mkdir()
        (project / "docs" / "a.md").write_text("# A\n\ntext", encoding="utf-8")
        git(project, "add", "docs/a.md")
        out = await call(client, "summarize_git_diff")
        assert journal_bytes(project)  # only the task so far
        written = await call(client, "summarize_git_diff", writeToRecentChanges=True)
    assert out["available"] is True and out["branch"] == "main"
    assert out["files"] == [
        {"path": "docs/a.md", "status": "added", "added": 3, "deleted": 0},
        {"path": "logo.png", "status": "untracked", "added": None, "deleted": 0},
        {"path": "src/app.py", "status": "modified", "added": 2, "deleted": 1},
        {"path": "src/new.py", "status": "untracked", "added": 4, "deleted": 0},
    ]
    assert out["stats"] == {"files": 4, "insertions": 9, "deletions": 1}
    assert out["summary"] == (
        "4 files changed (+9 −1): docs/a.md (+3 −0), logo.png (new), src/app.py (+2 −1), src/new.py (new)"
    )
    assert "recentChangeId" not in out
    assert written["recentChangeId"]
    assert view(project, "recent-changes.md") == f"# Recent changes\n\n- {today()}: {out['summary']}\n"


async def test_summarize_git_diff_in_a_repo_without_commits_counts_staged_and_untracked_files(project: Path) -> None:
    (project / "one.txt").write_text("1\n2\n", encoding="utf-8")
    (project / "two.txt").write_text("1\n", encoding="utf-8")
    git(project, "add", "one.txt")
    async with connect(project) as client:
        out = await call(client, "summarize_git_diff")
    assert [(f["path"], f["status"], f["added"]) for f in out["files"]] == [
        ("one.txt", "added", 2),
        ("two.txt", "untracked", 1),
    ]


async def test_summarize_git_diff_outside_a_git_repository_is_unavailable_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never find a repository above the test
    async with connect(plain) as client:
        out = await call(client, "summarize_git_diff", writeToRecentChanges=True)
        monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))
        no_git = await call(client, "summarize_git_diff")
    assert out["available"] is False
    assert "not inside a git work tree" in out["reason"]
    assert out["files"] == [] and "recentChangeId" not in out
    assert not (plain / ".eventmem" / "journal").exists()
    assert no_git["available"] is False and "git is not installed" in no_git["reason"]


# -- optimization -------------------------------------------------------------------------------------


async def seed_untidy(client: Client) -> None:
    await call(client, "update_context_section", section="project", content="TBD")
    await call(client, "update_current_task", task="Export.  \n\n\n\nThen docs.")
    for text in ["Use SQLite.", "Use Postgres.", "use  postgres"]:
        await call(client, "update_context_section", section="decisions", content=text, mode="append")
    for i in range(5):
        await call(client, "update_context_section", section="recentChanges", content=f"Change {i}", mode="append")


async def test_suggest_memory_optimization_is_a_dry_run_that_apply_carries_out(project: Path) -> None:
    async with connect(project) as client:
        await seed_untidy(client)
        before = journal_bytes(project)
        suggested = await call(client, "suggest_memory_optimization")
        assert journal_bytes(project) == before
        applied = await call(client, "apply_memory_optimization")
        again = await call(client, "suggest_memory_optimization")
        context = await call(client, "get_project_context")
    plan = suggested["plan"]
    assert plan["needed"] is True
    assert plan["counts"] == {"create": 2, "flagPlaceholder": 1, "removeDuplicate": 1, "tidy": 1, "archive": 2}
    assert applied["applied"] == plan
    assert again["plan"]["needed"] is False
    assert again["plan"]["counts"]["flagPlaceholder"] == 3  # project, and the two created placeholders
    assert context["sections"]["currentTask"] == "# Current task\n\nExport.\n\nThen docs.\n"
    assert context["sections"]["decisions"] == (
        f"# Decisions\n\n## {today()} — Use SQLite\n\nUse SQLite.\n\n## {today()} — Use Postgres\n\nUse Postgres.\n"
    )
    assert context["sections"]["recentChanges"] == "".join(
        ["# Recent changes\n\n", *(f"- {today()}: Change {i}\n" for i in (2, 3, 4))]
    )
    events = journal_events(project)
    deleted = [e for e in events if e["type"] == "deleted"]
    duplicate = next(a for a in plan["actions"] if a["action"] == "remove_duplicate")
    assert [(e["memory"], e["reason"]) for e in deleted] == [
        (duplicate["id"], f"duplicate of {duplicate['duplicateOf']}")
    ]
    assert applied["archiveSegments"] and all(s.startswith("archive/") for s in applied["archiveSegments"])
    archived = [
        json.loads(line)
        for path in (project / ".eventmem" / "archive").glob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    moved = {e["memory"] for e in archived if e["type"] == "saved"}
    assert len(moved) == 2 and all(e["type"] in ("saved", "deleted") for e in archived)
    assert {e["reason"] for e in archived if e["type"] == "deleted"} == {"archived: project-context optimization"}
    assert [e["type"] for e in events if e["type"] == "archived"] == ["archived"]


async def test_optimize_ai_memory_plans_with_dry_run_and_applies_without(project: Path) -> None:
    async with connect(project) as client:
        await seed_untidy(client)
        before = journal_bytes(project)
        dry = await call(client, "optimize_ai_memory", dryRun=True)
        assert journal_bytes(project) == before
        done = await call(client, "optimize_ai_memory")
    assert dry["dryRun"] is True and dry["plan"]["needed"] is True
    assert done["dryRun"] is False and done["applied"] == dry["plan"]
    assert done["remaining"]["needed"] is False


async def test_the_size_guard_pauses_a_write_and_the_same_write_succeeds_after_optimization(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECTION_MAX_BYTES", "4000")
    reason = "because " + "the export must stay fast for a year of readings " * 5
    async with connect(project) as client:
        count = 0
        while True:
            out = await call(client, "add_decision", decision=f"Decision {count} on exports.", rationale=reason)
            if out["status"] == "paused":
                break
            count += 1
        assert 8 <= count <= 16
        before = journal_bytes(project)
        paused = await call(client, "add_decision", decision=f"Decision {count} on exports.", rationale=reason)
        assert journal_bytes(project) == before  # paused, not truncated: nothing was written
        plan = paused["optimizationPlan"]
        applied = await call(client, "apply_memory_optimization")
        retried = await call(client, "add_decision", decision=f"Decision {count} on exports.", rationale=reason)
        decisions = (await call(client, "get_project_context"))["sections"]["decisions"]
    assert paused["status"] == "paused" and paused["written"] is False
    assert paused["over"][0]["section"] == "decisions" and paused["over"][0]["sizeBytes"] > 4000
    assert "apply_memory_optimization" in paused["message"]
    archived = [a["id"] for a in plan["actions"] if a["action"] == "archive"]
    assert archived and applied["applied"]["counts"]["archive"] == len(archived)
    assert retried["status"] == "success"
    assert f"Decision {count} on exports." in decisions and "Decision 0 on exports." not in decisions
    assert len(decisions.encode()) <= 4000


async def test_a_paused_conversation_summary_writes_none_of_its_parts(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECTION_MAX_BYTES", "3000")
    change = "Reworked the ingest retries and their backoff schedule for the national feed " * 3
    async with connect(project) as client:
        while (await call(client, "update_context_section", section="recentChanges", content=change, mode="append"))[
            "status"
        ] == "success":
            pass
        before = journal_bytes(project)
        paused = await call(
            client,
            "run_conversation_end_workflow",
            summary="Reworked the retries.",
            completed=True,
            currentTask="Watch the feed.",
            recentChanges=[change],
            decisions=["Retry three times."],
            includeGitDiff=False,
        )
        assert journal_bytes(project) == before
        await call(client, "apply_memory_optimization")
        done = await call(
            client,
            "record_conversation_summary",
            summary="Reworked the retries.",
            currentTask="Watch the feed.",
            recentChanges=[change],
            decisions=["Retry three times."],
        )
    assert paused["status"] == "paused" and paused["recorded"]["written"] is False
    assert "apply_memory_optimization" in paused["message"]
    assert paused["recorded"]["over"][0]["section"] == "recentChanges"
    assert done["status"] == "success" and done["currentTaskUpdated"] is True
    assert len(done["recentChangeIds"]) == 1 and len(done["decisionIds"]) == 1


async def test_a_write_adding_more_than_a_quarter_of_the_section_limit_is_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECTION_MAX_BYTES", "4000")
    async with connect(project) as client:
        error = await call_error(client, "add_decision", decision="x" * 1200)
    assert "section_max_bytes" in error and "quarter" in error
    assert not (project / ".eventmem" / "journal").exists()


# -- root ---------------------------------------------------------------------------------------------


async def test_get_effective_project_root_reports_the_root_its_memory_and_why(project: Path, tmp_path: Path) -> None:
    sub = project / "src" / "deep"
    sub.mkdir(parents=True)
    chosen = find_root(sub, {"PROJECT_MEMORY_ROOT": str(project)})
    unexpanded = find_root(sub, {"PROJECT_MEMORY_ROOT": "${workspaceFolder}"})
    async with connect(project, root=chosen) as client:
        by_env = await call(client, "get_effective_project_root")
    async with connect(project, root=unexpanded) as client:
        by_marker = await call(client, "get_effective_project_root")
    plain = tmp_path / "plain"
    (plain / ".ai").mkdir(parents=True)
    async with connect(plain, root=find_root(plain, {})) as client:
        by_ai = await call(client, "get_effective_project_root")
    assert by_env["projectRoot"] == str(project) and by_env["projectRootSource"] == "env:PROJECT_MEMORY_ROOT"
    assert by_env["memoryRoot"] == str(project / ".eventmem")
    assert by_env["viewDir"] == str(project / ".eventmem" / "cache" / "ai") and by_env["viewTracked"] is False
    assert by_marker["projectRoot"] == str(project) and by_marker["projectRootSource"] == "marker:.git"
    assert by_ai["projectRoot"] == str(plain) and by_ai["projectRootSource"] == "marker:.ai"


# -- workflows ----------------------------------------------------------------------------------------


async def test_run_project_open_workflow_bundles_root_context_git_changes_and_a_plan(project: Path) -> None:
    (project / "notes.txt").write_text("hello\n", encoding="utf-8")
    async with connect(project) as client:
        fresh = await call(client, "run_project_open_workflow")
        await call(client, "update_context_section", section="project", content="Tidewater.")
        await call(client, "update_context_section", section="architecture", content="API, model, DB.")
        await call(client, "update_context_section", section="codingStyle", content="Type hints.")
        await call(client, "update_current_task", task="Export.")
        tidy = await call(client, "run_project_open_workflow")
    assert fresh["projectRoot"] == str(project) and fresh["projectRootSource"] == "test"
    assert fresh["coreContext"]["project"] == "" and len(fresh["warnings"]) == 4
    assert fresh["gitDiff"]["available"] is True
    assert [f["path"] for f in fresh["gitDiff"]["files"]] == ["notes.txt"]
    assert fresh["optimizationPlan"]["counts"]["create"] == 4
    assert any("apply_memory_optimization" in step for step in fresh["nextSteps"])
    assert "optimizationPlan" not in tidy and tidy["warnings"] == []
    assert tidy["coreContext"]["architecture"] == "API, model, DB."


async def test_run_conversation_end_workflow_suggests_always_and_records_only_when_completed(project: Path) -> None:
    async with connect(project) as client:
        suggested = await call(
            client, "run_conversation_end_workflow", summary="Looked at the export.", includeGitDiff=False
        )
        assert not (project / ".eventmem" / "journal").exists()
        recorded = await call(
            client,
            "run_conversation_end_workflow",
            summary="Built the export.",
            completed=True,
            currentTask="Document the export.",
            recentChanges=["Added export.py"],
            includeGitDiff=False,
        )
    assert suggested["completed"] is False and "recorded" not in suggested
    assert suggested["suggestions"][0]["section"] == "conversationSummary"
    assert suggested["optimizationPlan"]["counts"]["create"] == 4
    assert recorded["recorded"]["status"] == "success"
    assert [(e["type"], e.get("kind")) for e in journal_events(project)] == [
        ("saved", "conversation_summary"),
        ("saved", "current_task"),
        ("saved", "recent_change"),
    ]
    assert recorded["optimizationPlan"]["counts"]["create"] == 3


async def test_the_workflow_prompts_are_listed_and_carry_the_context(project: Path) -> None:
    async with connect(project, tools=None) as client:
        await call(client, "update_current_task", task="Ship the CSV export.")
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        opened = await client.get_prompt("project_open")
        ending = await client.get_prompt("conversation_end", {"summary": "We built the export."})
    assert set(prompts) == {"project_open", "conversation_end"}
    assert [a.name for a in prompts["conversation_end"].arguments or []] == ["summary"]
    open_text = opened.messages[0].content.text  # type: ignore[union-attr]
    end_text = ending.messages[0].content.text  # type: ignore[union-attr]
    assert "## Current task\n\nShip the CSV export." in open_text
    assert "Warnings:" in open_text and "update_current_task" in open_text
    assert "We built the export." in end_text and "Ship the CSV export." in end_text
    # the default profile has record_conversation_summary but not the workflow tool
    assert "record_conversation_summary" in end_text and "run_conversation_end_workflow" not in end_text


# -- the scripted agent session -----------------------------------------------------------------------


async def test_a_scripted_agent_session_leaves_the_expected_events_and_rendered_files(project: Path) -> None:
    (project / "README.md").write_text("# Tidewater\n", encoding="utf-8")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    async with connect(project) as client:
        # open the project
        opened = await call(client, "run_project_open_workflow")
        assert len(opened["warnings"]) == 4
        # work
        await call(client, "update_context_section", section="project", content="Tidewater serves tide tables.")
        await call(client, "update_current_task", task="Add CSV export.")
        decision = await call(client, "add_decision", decision="Stream CSV rows.", rationale="Exports are big.")
        (project / "export.py").write_text("def rows():\n    yield 1\n", encoding="utf-8")
        diff = await call(client, "summarize_git_diff", writeToRecentChanges=True)
        # end the conversation
        ended = await call(
            client,
            "run_conversation_end_workflow",
            summary="Built a streaming CSV export.",
            title="CSV export",
            completed=True,
            currentTask="Document the CSV columns.",
            decisions=["Use ; as the CSV separator."],
            includeGitDiff=False,
        )
        assert ended["optimizationPlan"]["counts"] == {
            "create": 2,
            "flagPlaceholder": 0,
            "removeDuplicate": 0,
            "tidy": 0,
            "archive": 0,
        }
        # optimize
        await call(client, "apply_memory_optimization")
        closing = await call(client, "bootstrap_project_context")

    events = journal_events(project)
    assert [(e["type"], e["memory"] if e["memory"].startswith("section:") else e.get("kind")) for e in events] == [
        ("saved", "section:project"),
        ("saved", "section:current-task"),
        ("saved", "decision"),
        ("saved", "recent_change"),
        ("saved", "conversation_summary"),
        ("updated", "section:current-task"),
        ("saved", "decision"),
        ("saved", "section:architecture"),
        ("saved", "section:coding-style"),
    ]
    assert {e["by"] for e in events} == {CLIENT.name}
    assert events[2]["memory"] == decision["id"]
    assert sorted(p.name for p in (project / ".eventmem" / "cache" / "ai").iterdir()) == FILES
    assert view(project, "project.md") == "# Project\n\nTidewater serves tide tables.\n"
    assert view(project, "current-task.md") == "# Current task\n\nDocument the CSV columns.\n"
    assert view(project, "decisions.md") == (
        f"# Decisions\n\n## {today()} — Stream CSV rows\n\nStream CSV rows.\n\nRationale: Exports are big.\n"
        f"\n## {today()} — Use ; as the CSV separator\n\nUse ; as the CSV separator.\n"
    )
    assert view(project, "recent-changes.md") == f"# Recent changes\n\n- {today()}: {diff['summary']}\n"
    assert diff["summary"] == "1 file changed (+2 −0): export.py (new)"
    summary = view(project, "conversation-summary.md")
    assert summary.startswith(f"# Conversation summary\n\n## {today()} ")
    assert summary.endswith(" UTC — CSV export\n\nBuilt a streaming CSV export.\n")
    assert view(project, "architecture.md").startswith("# Architecture\n\n_Not written yet: ")
    assert view(project, "todo.md") == "# Todo\n\n_No todo recorded yet._\n"
    assert [w.split(" ", 1)[0] for w in closing["warnings"]] == ["architecture", "codingStyle"]
    assert all("placeholder" in w for w in closing["warnings"])


# -- the .ai view as resources --------------------------------------------------------------------------


async def test_the_ai_files_are_resources_that_notify_subscribers_when_a_section_changes(project: Path) -> None:
    updated: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: object) -> None:
        nonlocal arrived
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            arrived.set()

    uri = "memory://ai/current-task.md"
    async with connect(project, mode="legacy", message_handler=on_message) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {f"memory://ai/{name}" for name in FILES} <= listed
        await call(client, "add_decision", decision="Something to start the journal.")
        with warnings.catch_warnings():  # deprecated from 2026-07-28; handshake-era clients still use it
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
        await call(client, "update_current_task", task="Watch the notifications.")
        text = ""
        with anyio.fail_after(WAIT):
            while "Watch the notifications." not in text:
                await arrived.wait()
                arrived = anyio.Event()
                if uri in updated:
                    read = await client.read_resource(uri)
                    text = read.contents[0].text  # type: ignore[union-attr]
        decisions = await client.read_resource("memory://ai/decisions.md")
    assert text == "# Current task\n\nWatch the notifications.\n"
    assert "Something to start the journal." in decisions.contents[0].text  # type: ignore[union-attr]


async def test_a_server_brings_the_ai_view_up_to_date_shortly_after_start(project: Path) -> None:
    """A decision saved while no server ran (a pull, the CLI) reaches the view without any call."""
    writer = reopen(project)
    ProjectContext(writer).add_decision("Decided while no server was running.")
    writer.close()
    shutil.rmtree(project / ".eventmem" / "cache" / "ai", ignore_errors=True)
    decisions = project / ".eventmem" / "cache" / "ai" / "decisions.md"
    async with connect(project, mode="legacy"):
        await wait_until(decisions.is_file, decisions.parent.parent, lambda: "no .ai view was rendered")
    assert "Decided while no server was running." in view(project, "decisions.md")


# -- import and the tracked view ------------------------------------------------------------------------


def import_pmp(project: Path, directory: str, *extra: str) -> dict[str, Any]:
    result = eventmem(project, "import", "pmp", directory, "--json", *extra)  # (in process: tests/cli_runner.py)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_importing_a_real_looking_ai_directory_creates_events_and_a_second_import_changes_nothing(
    project: Path,
) -> None:
    shutil.copytree(FIXTURE, project / ".ai")
    first = import_pmp(project, ".ai")
    journal = journal_bytes(project)
    second = import_pmp(project, ".ai")

    counts = {key: (c["added"], c["unchanged"]) for key, c in first["sections"].items()}
    assert counts == {
        "project": (1, 0),
        "architecture": (1, 0),
        "currentTask": (1, 0),
        "codingStyle": (1, 0),
        "decisions": (3, 0),
        "recentChanges": (5, 0),
        "conversationSummary": (2, 0),
        "todo": (4, 0),
    }
    assert first["sections"]["recentChanges"]["reversed"] is True  # the file lists newest first
    assert first["events"] == 18
    assert second["events"] == 0
    assert all(c["added"] == c["updated"] == 0 for c in second["sections"].values())
    assert journal_bytes(project) == journal
    events = journal_events(project)
    assert len(events) == 18 and {e["by"] for e in events} == {"import:pmp"}
    ids = [e["memory"] for e in events]
    assert ids[:4] == ["section:project", "section:architecture", "section:current-task", "section:coding-style"]
    assert all(i.startswith("pmp:") for i in ids[4:])

    changes = view(project, "recent-changes.md").splitlines()
    assert changes[2].startswith("- 2025-02-27: Ingest retries") and changes[-1].startswith("- 2025-03-05: Added")
    assert "  (the last day was missing after DST changes)" in changes
    assert view(project, "decisions.md").count("\n## 2025-") == 3
    assert view(project, "coding-style.md").startswith("# Coding style\n\n- Type hints everywhere")
    service = reopen(project)
    try:
        boot = ProjectContext(service).bootstrap()
    finally:
        service.close()
    assert boot["coreContext"]["project"].startswith("**Tidewater** is a tide-prediction web service")
    assert boot["coreContext"]["currentTask"].startswith("## Goal\nAdd CSV export of tide tables")
    assert boot["supplementalContext"]["todo"]["open"] == 3
    assert boot["warnings"] == []


def test_importing_the_rendered_view_back_changes_nothing(project: Path) -> None:
    shutil.copytree(FIXTURE, project / "incoming")
    import_pmp(project, "incoming")
    journal = journal_bytes(project)
    again = import_pmp(project, ".eventmem/cache/ai")
    assert again["events"] == 0
    assert journal_bytes(project) == journal


def test_a_singleton_changed_in_eventmem_since_the_import_is_kept_unless_forced(project: Path) -> None:
    shutil.copytree(FIXTURE, project / ".ai")
    import_pmp(project, ".ai")
    service = reopen(project)
    try:
        ProjectContext(service, by="agent").update_current_task("Fix the DST bug first.")
    finally:
        service.close()
    kept = import_pmp(project, ".ai")
    assert kept["sections"]["currentTask"]["kept"] == 1 and kept["events"] == 0
    forced = import_pmp(project, ".ai", "--force")
    assert forced["sections"]["currentTask"]["updated"] == 1 and forced["events"] == 1
    assert view(project, "current-task.md").startswith("# Current task\n\n## Goal\nAdd CSV export")


async def test_a_tracked_view_is_rendered_into_ai_and_a_hand_edit_is_left_alone_until_imported(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
    shutil.copytree(FIXTURE, project / ".ai")
    original = {name: (project / ".ai" / name).read_bytes() for name in FILES}
    async with connect(project) as client:
        await call(client, "update_current_task", task="Before the import.")
        root = await call(client, "get_effective_project_root")
    assert root["viewTracked"] is True and root["viewDir"] == str(project / ".ai")
    # the team's existing files are not overwritten before they are imported
    assert {name: (project / ".ai" / name).read_bytes() for name in FILES} == original

    import_pmp(project, ".ai", "--force")
    todo = (project / ".ai" / "todo.md").read_text(encoding="utf-8")
    assert todo == (
        "# Todo\n\n- [ ] Stream CSV export rows\n- [ ] Document the CSV columns in `docs/export.md`\n"
        "- [x] Add Redis cache for predictions\n- [ ] Alert when the national feed is down for more than 2 hours\n"
    )
    (project / ".ai" / "todo.md").write_text(todo + "- [ ] Added by hand\n", encoding="utf-8")
    async with connect(project) as client:
        await call(client, "update_current_task", task="After the import.")
        await call(client, "update_context_section", section="todo", content="[ ] Added by a tool", mode="append")
    assert (project / ".ai" / "current-task.md").read_text(encoding="utf-8") == "# Current task\n\nAfter the import.\n"
    assert (project / ".ai" / "todo.md").read_text(encoding="utf-8") == todo + "- [ ] Added by hand\n"

    taken = import_pmp(project, ".ai")
    assert taken["sections"]["todo"]["added"] == 1
    assert (project / ".ai" / "todo.md").read_text(encoding="utf-8") == (
        todo + "- [ ] Added by a tool\n- [ ] Added by hand\n"
    )
    assert not (project / ".eventmem" / "cache" / "ai").exists()


async def test_a_tracked_file_left_with_merge_conflict_markers_is_rendered_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_RENDER_AI_DIR", ".ai")
    async with connect(project) as client:
        await call(client, "update_current_task", task="Ours.")
        (project / ".ai" / "current-task.md").write_text(
            "# Current task\n\n<<<<<<< HEAD\nOurs.\n=======\nTheirs.\n>>>>>>> other\n", encoding="utf-8"
        )
        (project / ".ai" / "project.md").write_text("# Project\n\nEdited by hand.\n", encoding="utf-8")
        await call(client, "add_decision", decision="Anything that renders the view.")
    assert (project / ".ai" / "current-task.md").read_text(encoding="utf-8") == "# Current task\n\nOurs.\n"
    assert (project / ".ai" / "project.md").read_text(encoding="utf-8") == "# Project\n\nEdited by hand.\n"


# -- stdio ------------------------------------------------------------------------------------------------


async def test_serve_with_the_project_context_profile_works_over_stdio(project: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "stderr.log"
    env = server_env(PROJECT_MEMORY_ROOT=str(project))
    async with serve(tmp_path, env, errlog, args=["--tools", "project-context"], client_info=CLIENT) as session:
        await session.initialize()
        assert {tool.name for tool in (await session.list_tools()).tools} == PROTOCOL_TOOLS
        assert {p.name for p in (await session.list_prompts()).prompts} == {"project_open", "conversation_end"}
        root = await session.call_tool("get_effective_project_root", {})
        task = await session.call_tool("update_current_task", {"task": "Over stdio."})
        boot = await session.call_tool("bootstrap_project_context", {})
    assert root.structured_content is not None and task.structured_content is not None
    assert root.structured_content["projectRootSource"] == "env:PROJECT_MEMORY_ROOT"
    assert boot.structured_content is not None
    assert boot.structured_content["coreContext"]["currentTask"] == "Over stdio."
    assert [e["memory"] for e in journal_events(project)] == ["section:current-task"]
    assert_clean_stderr(errlog)


def test_an_import_of_a_list_file_larger_than_its_section_is_refused_before_anything_is_written(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECTION_MAX_BYTES", "4000")
    incoming = project / "incoming"
    incoming.mkdir()
    (incoming / "project.md").write_text("# Project\n\nA scheduler for batch jobs.\n", encoding="utf-8")
    items = "\n".join(f"- write the test for job kind {number}" for number in range(500))
    (incoming / "todo.md").write_text(f"# Todo\n\n{items}\n", encoding="utf-8")
    result = subprocess.run(
        eventmem_command("import", "pmp", "incoming"), cwd=project, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith("eventmem: todo.md: todo would be at least ") and "Nothing was imported" in line
    assert list((project / ".eventmem" / "journal").glob("*.jsonl")) == []
