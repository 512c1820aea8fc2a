"""The clients' lifecycle hooks, run as a client runs them: ``eventmem hooks install`` on real settings
files, and ``eventmem hook CLIENT`` in a subprocess fed each client's documented event JSON and
real-format transcripts (turns, tool calls and results, a secret, a private span, a malformed line, a
very long transcript); the answers, the recorded memories, the scrubbing and the exit code are checked."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem, ok_json, save
from conftest import eventmem_command

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PRIVATE = "the staging password is hunter2-staging"
SESSION = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"


def hook(client: str, project: Path, event: dict[str, Any] | bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``eventmem hook CLIENT`` with ``event`` on stdin, as the client starts it (in the project)."""
    data = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run(
        eventmem_command("hook", client),
        cwd=project,
        input=data,
        capture_output=True,
        timeout=120,
        env={**os.environ, **env},
    )


def claude_event(project: Path, name: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook event: the common fields and the event's own."""
    return {
        "session_id": SESSION,
        "transcript_path": str(project.parent / "transcript.jsonl"),
        "cwd": str(project),
        "hook_event_name": name,
        **fields,
    }


def context_of(result: subprocess.CompletedProcess[bytes], event: str) -> str:
    """The context a Claude Code-style answer adds ("" when the hook printed nothing)."""
    assert result.returncode == 0, result.stderr
    if not result.stdout.strip():
        return ""
    answer = json.loads(result.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text: str = answer["hookSpecificOutput"]["additionalContext"]
    return text


def line(kind: str, content: Any, **extra: Any) -> str:
    """One Claude Code transcript line."""
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps(
        {
            "type": role,
            "uuid": os.urandom(8).hex(),
            "sessionId": SESSION,
            "timestamp": "2026-12-01T10:00:00.000Z",
            "message": {"role": role, "content": content},
            **extra,
        }
    )


def tool_use(name: str, tool_id: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result(tool_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}


def redis_transcript(path: Path) -> None:
    """A Claude Code transcript: a decision, an error fixed, a todo, a secret, a private span, a tool
    call that writes a file, a line that is not JSON and lines that are not turns."""
    lines = [
        json.dumps({"type": "summary", "summary": "Job queue work", "leafUuid": "x"}),
        line("user", "The job queue keeps dropping jobs under load. Can you look into it?"),
        line(
            "assistant",
            [
                {"type": "thinking", "thinking": "Let me look at the worker."},
                {"type": "text", "text": "I'll run the worker tests first."},
                tool_use("Bash", "toolu_1", command="pytest tests/test_worker.py"),
            ],
        ),
        line(
            "user",
            [
                tool_result(
                    "toolu_1",
                    "Traceback (most recent call last):\n  File x\n"
                    "ConnectionError: queue backend refused the connection",
                    error=True,
                )
            ],
        ),
        "{this line is not JSON",
        line(
            "assistant",
            [
                {"type": "text", "text": "The problem was the list-based queue losing jobs when a worker dies."},
                tool_use("Edit", "toolu_2", file_path="src/queue.py", old_string="a", new_string="b"),
            ],
        ),
        line("user", [tool_result("toolu_2", "The file src/queue.py has been updated.")]),
        line(
            "user",
            f"OK, we switch the job queue to Redis streams. The token is {SECRET} for the CI. "
            f"<private>{PRIVATE}</private>",
        ),
        line(
            "assistant",
            "Done: the queue now uses Redis streams with consumer groups. TODO: add a dead-letter stream "
            "for jobs that fail three times.",
        ),
        json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def journal_text(project: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in (project / ".eventmem" / "journal").glob("*.jsonl"))


def journal_events(project: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in journal_text(project).splitlines()]


@pytest.fixture
def wired(project: Path) -> Path:
    """A project with eventmem's Claude Code hooks installed."""
    result = eventmem(project, "hooks", "install", "claude-code")
    assert result.returncode == 0, result.stderr
    return project


def deploy_memories(project: Path) -> dict[str, str]:
    ids = {
        "deploy": save(
            project, "Deploys go out through the blue-green pipeline, never on a Friday.", "--type", "decision"
        )["id"],
        "database": save(project, "We keep PostgreSQL 16 as the main database.", "--type", "decision")["id"],
        "tests": save(project, "Tests run with pytest and xdist; no sleeps in tests.", "--type", "convention")["id"],
        "todo": save(project, "Move the nightly report to the new scheduler.", "--type", "todo")["id"],
    }
    return ids


# -- install, uninstall, status ------------------------------------------------------------------


def test_install_claude_code_wires_the_hooks_without_touching_other_settings(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
        },
    }
    settings.write_text(json.dumps(theirs, indent=4))
    first = ok_json(project, "hooks", "install", "claude-code")
    assert sorted(first["added"]) == sorted(["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"])
    assert first["created_memory"] is True and (project / ".eventmem" / "config.toml").is_file()
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == theirs["permissions"]
    assert data["hooks"]["PreToolUse"] == theirs["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == theirs["hooks"]["Stop"][0]
    ours = data["hooks"]["SessionStart"][0]["hooks"][0]
    assert ours["type"] == "command" and ours["command"].endswith("eventmem hook claude-code")
    assert "PostToolUse" not in data["hooks"]
    written = settings.read_bytes()
    again = ok_json(project, "hooks", "install", "claude-code")
    assert again["changed"] is False and again["added"] == []
    assert settings.read_bytes() == written
    removed = ok_json(project, "hooks", "uninstall", "claude-code")
    assert sorted(removed["removed"]) == sorted(first["added"])
    assert json.loads(settings.read_text()) == theirs


def test_every_client_with_hooks_gets_its_own_format(project: Path) -> None:
    for client in ("codex", "gemini", "cursor"):
        assert eventmem(project, "hooks", "install", client).returncode == 0
    codex = json.loads((project / ".codex" / "hooks.json").read_text())
    assert set(codex["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}
    assert codex["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 60
    gemini = json.loads((project / ".gemini" / "settings.json").read_text())
    assert set(gemini["hooks"]) == {"SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd"}
    assert gemini["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 30_000  # milliseconds
    cursor = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert cursor["version"] == 1
    assert set(cursor["hooks"]) == {"sessionStart", "stop", "preCompact", "sessionEnd"}
    assert cursor["hooks"]["stop"][0]["command"].endswith("eventmem hook cursor")
    status = ok_json(project, "hooks", "status")
    assert {(c["client"], c["scope"]) for c in status["clients"]} == {
        ("codex", "project"),
        ("gemini", "project"),
        ("cursor", "project"),
    }
    assert status["settings"]["auto_capture"] == "on"


def test_user_scope_writes_the_users_own_settings(project: Path, tmp_path: Path) -> None:
    result = ok_json(project, "hooks", "install", "claude-code", "--scope", "user", "--with-tools")
    path = tmp_path / "home" / ".claude" / "settings.json"
    assert result["file"] == str(path)
    assert "PostToolUse" in json.loads(path.read_text())["hooks"]
    assert not (project / ".claude").exists()


def test_a_client_without_hooks_gets_the_instruction_snippet_and_is_told_so(project: Path) -> None:
    (project / "AGENTS.md").write_text("# Agents\n\nBe kind.\n")
    result = eventmem(project, "hooks", "install", "agents-md")
    assert result.returncode == 0
    assert "no lifecycle hooks" in result.stdout
    text = (project / "AGENTS.md").read_text()
    assert text.startswith("# Agents\n\nBe kind.\n") and "eventmem:begin" in text and "get_context" in text
    assert ok_json(project, "hooks", "install", "agents-md")["changed"] is False
    assert ok_json(project, "hooks", "uninstall", "agents-md")["removed"] == ["instructions"]
    assert (project / "AGENTS.md").read_text() == "# Agents\n\nBe kind.\n"


def test_a_settings_file_that_is_not_json_is_refused_and_left_as_it_is(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    result = eventmem(project, "hooks", "install", "claude-code")
    assert result.returncode == 2
    assert "not valid JSON" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert settings.read_text() == "{ not json"


def test_an_unknown_client_is_refused_in_one_line(project: Path) -> None:
    result = eventmem(project, "hooks", "install", "notepad")
    assert result.returncode == 2 and "unknown client" in result.stderr


# -- session start and prompts --------------------------------------------------------------------


def test_session_start_injects_the_projects_decisions_with_their_ids(wired: Path) -> None:
    ids = deploy_memories(wired)
    result = hook("claude-code", wired, claude_event(wired, "SessionStart", source="startup"))
    text = context_of(result, "SessionStart")
    assert "## Decisions" in text and "blue-green pipeline" in text and "PostgreSQL 16" in text
    assert f"[{ids['deploy']}]" in text and f"[{ids['database']}]" in text
    assert text.index("## Decisions") < text.index("## Conventions") < text.index("## Open todos")
    assert result.stderr == b""


def test_the_session_start_bundle_keeps_to_its_token_budget(wired: Path) -> None:
    memories = [
        {"id": f"decision-{n}", "kind": "decision", "body": f"Decision {n}: service {n} answers on port {9000 + n}."}
        for n in range(60)
    ]
    dump = wired.parent / "dump.json"
    dump.write_text(json.dumps({"format": "eventmem-dump", "version": 1, "memories": memories, "links": []}))
    assert eventmem(wired, "import", "json", str(dump)).returncode == 0
    (wired / ".eventmem" / "config.local.toml").write_text("[hooks]\nsession_budget_tokens = 200\n")
    text = context_of(hook("claude-code", wired, claude_event(wired, "SessionStart")), "SessionStart")
    assert 0 < len(text) <= 200 * 4 and "## Decisions" in text


def test_a_prompt_about_deploys_injects_the_deploy_decision_and_an_unrelated_prompt_nothing(wired: Path) -> None:
    ids = deploy_memories(wired)
    event = claude_event(wired, "UserPromptSubmit", prompt="How do we deploy the new release to production?")
    text = context_of(hook("claude-code", wired, event), "UserPromptSubmit")
    assert ids["deploy"] in text and "blue-green" in text
    assert ids["database"] not in text and ids["tests"] not in text
    unrelated = claude_event(wired, "UserPromptSubmit", prompt="What is the capital of France?")
    assert hook("claude-code", wired, unrelated).stdout == b""
    again = hook("claude-code", wired, event)  # never the same memory twice in a session
    assert again.returncode == 0 and ids["deploy"] not in again.stdout.decode()


def test_a_memory_the_session_start_showed_is_not_injected_again_at_a_prompt(wired: Path) -> None:
    ids = deploy_memories(wired)
    assert ids["deploy"] in context_of(hook("claude-code", wired, claude_event(wired, "SessionStart")), "SessionStart")
    event = claude_event(wired, "UserPromptSubmit", prompt="Remind me how deploys work")
    assert ids["deploy"] not in hook("claude-code", wired, event).stdout.decode()


def test_a_project_without_memory_gets_nothing_and_no_memory_is_started(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / ".git").mkdir()
    result = hook("claude-code", folder, claude_event(folder, "SessionStart"))
    assert (result.returncode, result.stdout) == (0, b"")
    assert not (folder / ".eventmem").exists()


# -- capture ---------------------------------------------------------------------------------------


def test_a_session_end_records_the_decision_with_the_secret_and_the_private_span_gone(wired: Path) -> None:
    transcript = wired.parent / "transcript.jsonl"
    redis_transcript(transcript)
    result = hook("claude-code", wired, claude_event(wired, "SessionEnd", reason="prompt_input_exit"))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    review = ok_json(wired, "hooks", "review")["memories"]
    kinds = {row["kind"] for row in review}
    assert {"decision", "fix", "todo", "task", "general"} <= kinds
    decisions = [row for row in review if row["kind"] == "decision"]
    assert any("switch the job queue to Redis streams" in row["summary"] for row in decisions)
    fix = next(row for row in review if row["kind"] == "fix")
    shown = ok_json(wired, "show", fix["id"])["memory"]
    assert "ConnectionError: queue backend refused the connection" in shown["content"]
    assert "list-based queue" in shown["content"]
    summary = next(row for row in review if row["kind"] == "general")
    assert "src/queue.py" in ok_json(wired, "show", summary["id"])["memory"]["content"]
    text = journal_text(wired)
    assert SECRET not in text and "hunter2" not in text and PRIVATE not in text
    writers = {event["by"] for event in journal_events(wired) if event["by"].startswith("hook:")}
    assert writers == {f"hook:claude-code@{SESSION}"}
    hook_lines = [i for i, event in enumerate(journal_events(wired)) if event["by"].startswith("hook:")]
    assert hook_lines == list(range(hook_lines[0], hook_lines[0] + len(hook_lines)))  # one block


def test_a_second_capture_reads_only_what_the_transcript_added(wired: Path) -> None:
    transcript = wired.parent / "transcript.jsonl"
    redis_transcript(transcript)
    assert hook("claude-code", wired, claude_event(wired, "Stop", stop_hook_active=False)).returncode == 0
    first = len(journal_events(wired))
    assert hook("claude-code", wired, claude_event(wired, "Stop")).returncode == 0
    assert len(journal_events(wired)) == first  # nothing new, nothing written twice
    with transcript.open("a") as handle:
        handle.write(line("user", "From now on we use ruff format for every Python file.") + "\n")
    assert hook("claude-code", wired, claude_event(wired, "Stop")).returncode == 0
    added = journal_events(wired)[first:]
    assert [event["content"] for event in added if event.get("type") == "saved"] == [
        "From now on we use ruff format for every Python file."
    ]


def test_a_capture_skips_what_the_memory_already_holds(wired: Path) -> None:
    save(wired, "OK, we switch the job queue to Redis streams.", "--type", "decision")
    redis_transcript(wired.parent / "transcript.jsonl")
    assert hook("claude-code", wired, claude_event(wired, "Stop")).returncode == 0
    saved = [event["content"] for event in journal_events(wired) if event.get("type") == "saved"]
    assert saved.count("OK, we switch the job queue to Redis streams.") == 1


def test_a_very_long_transcript_is_captured(wired: Path) -> None:
    transcript = wired.parent / "transcript.jsonl"
    filler = line("assistant", "Reading the next file of the worker module. " * 20)
    with transcript.open("w") as handle:
        for _ in range(15_000):
            handle.write(filler + "\n")
        handle.write(line("user", "Decision: we move the cron jobs to the scheduler service.") + "\n")
    assert transcript.stat().st_size > 10_000_000
    result = hook("claude-code", wired, claude_event(wired, "PreCompact", trigger="auto", custom_instructions=""))
    assert result.returncode == 0
    rows = ok_json(wired, "hooks", "review")["memories"]
    assert any("cron jobs to the scheduler service" in row["summary"] for row in rows)


def test_auto_capture_off_records_nothing(wired: Path) -> None:
    (wired / ".eventmem" / "config.local.toml").write_text('[hooks]\nauto_capture = "off"\n')
    redis_transcript(wired.parent / "transcript.jsonl")
    assert hook("claude-code", wired, claude_event(wired, "SessionEnd")).returncode == 0
    assert ok_json(wired, "hooks", "review")["memories"] == []


def test_suggest_mode_waits_for_a_yes_that_the_next_session_start_asks_for(wired: Path) -> None:
    (wired / ".eventmem" / "config.local.toml").write_text('[hooks]\nauto_capture = "suggest"\n')
    redis_transcript(wired.parent / "transcript.jsonl")
    assert hook("claude-code", wired, claude_event(wired, "SessionEnd")).returncode == 0
    assert ok_json(wired, "hooks", "review")["memories"] == []
    pending = (wired / ".eventmem" / "local" / "hooks" / "pending.jsonl").read_text()
    assert "Redis streams" in pending and SECRET not in pending and "hunter2" not in pending
    start = hook("claude-code", wired, {**claude_event(wired, "SessionStart"), "session_id": "next"})
    text = context_of(start, "SessionStart")
    assert "Waiting for confirmation" in text and "Redis streams" in text
    assert ok_json(wired, "hooks", "pending", "--accept")["written"] >= 3
    rows = ok_json(wired, "hooks", "review", "--since", "2020-01-01")["memories"]
    assert any("Redis streams" in row["summary"] for row in rows)
    assert ok_json(wired, "hooks", "pending")["pending"] == []


def test_post_tool_use_is_off_unless_asked_and_notes_a_failing_command(wired: Path) -> None:
    event = claude_event(
        wired,
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "make deploy"},
        tool_response={"stdout": "", "stderr": "boom", "exit_code": 2},
    )
    assert (hook("claude-code", wired, event).returncode, hook("claude-code", wired, event).stdout) == (0, b"")
    state_dir = wired / ".eventmem" / "cache" / "hooks" / "sessions"
    assert not any(state_dir.glob("*.json")) if state_dir.exists() else True
    (wired / ".eventmem" / "config.local.toml").write_text("[hooks]\npost_tool_use = true\n")
    assert hook("claude-code", wired, event).returncode == 0
    (state,) = state_dir.glob("claude-code.*.json")
    assert json.loads(state.read_text())["tool_failures"][0]["command"] == "make deploy"
    redis_transcript(wired.parent / "transcript.jsonl")
    assert hook("claude-code", wired, claude_event(wired, "SessionEnd")).returncode == 0
    summary = next(row for row in ok_json(wired, "hooks", "review")["memories"] if row["kind"] == "general")
    assert "Commands that failed: make deploy" in ok_json(wired, "show", summary["id"])["memory"]["content"]


# -- never in the way ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json at all", b"[1, 2, 3]", b'{"hook_event_name": 5}', b"\xff\xfe\x00", b'{"hook_event_name": "Stop"}'],
)
def test_a_malformed_event_exits_0_and_prints_nothing_the_client_would_misread(wired: Path, stdin: bytes) -> None:
    for client, empty in (("claude-code", b""), ("codex", b""), ("gemini", b"{}\n"), ("cursor", b"{}\n")):
        result = hook(client, wired, stdin)
        assert (result.returncode, result.stdout, result.stderr) == (0, empty, b"")


def test_a_missing_transcript_exits_0_and_is_logged(wired: Path) -> None:
    event = claude_event(wired, "Stop")
    event["transcript_path"] = str(wired / "no-such-transcript.jsonl")
    result = hook("claude-code", wired, event)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert "no transcript" in (wired / ".eventmem" / "cache" / "hooks" / "hooks.log").read_text()


def test_a_locked_journal_makes_the_hook_give_up_in_time_and_the_next_capture_catch_up(wired: Path) -> None:
    redis_transcript(wired.parent / "transcript.jsonl")
    lock = os.open(wired / ".eventmem" / "journal.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = hook("claude-code", wired, claude_event(wired, "Stop"), EVENTMEM_HOOK_DEADLINE="3")
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    finally:
        os.close(lock)
    assert "HookDeadline" in (wired / ".eventmem" / "cache" / "hooks" / "hooks.log").read_text()
    assert "Redis streams" not in journal_text(wired)
    assert hook("claude-code", wired, claude_event(wired, "Stop")).returncode == 0
    assert "Redis streams" in journal_text(wired)


def test_a_cache_that_cannot_be_written_does_not_fail_the_hook(wired: Path) -> None:
    deploy_memories(wired)
    cache = wired / ".eventmem" / "cache"
    if cache.exists():
        import shutil

        shutil.rmtree(cache)
    cache.write_text("not a folder")
    for event in (claude_event(wired, "SessionStart"), claude_event(wired, "UserPromptSubmit", prompt="deploy?")):
        result = hook("claude-code", wired, event)
        assert (result.returncode, result.stderr) == (0, b"")


# -- the other clients' formats -----------------------------------------------------------------------


def test_codex_gets_context_and_its_rollout_transcript_is_captured(project: Path) -> None:
    assert eventmem(project, "hooks", "install", "codex").returncode == 0
    deploy_memories(project)
    start = {
        "session_id": "codex-1",
        "transcript_path": None,
        "cwd": str(project),
        "hook_event_name": "SessionStart",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "source": "startup",
    }
    assert "blue-green" in context_of(hook("codex", project, start), "SessionStart")
    rollout = project.parent / "rollout.jsonl"

    def item(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2026-12-01T10:00:00Z", "type": "response_item", "payload": payload})

    rollout.write_text(
        "\n".join(
            [
                json.dumps({"type": "session_meta", "payload": {"id": "codex-1"}}),
                item(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "We decided to pin Python 3.12 in CI."}],
                    }
                ),
                item(
                    {"type": "function_call", "name": "shell", "arguments": '{"command": ["pytest"]}', "call_id": "c1"}
                ),
                item({"type": "function_call_output", "call_id": "c1", "output": "1 passed"}),
                item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Pinned."}]}),
            ]
        )
        + "\n"
    )
    stop = {**start, "hook_event_name": "Stop", "transcript_path": str(rollout), "stop_hook_active": False}
    assert hook("codex", project, stop).stdout == b""
    assert "pin Python 3.12 in CI" in journal_text(project)
    assert '"by":"hook:codex@codex-1"' in journal_text(project).replace(" ", "")


def test_gemini_cli_gets_json_answers_and_its_json_transcript_is_captured(project: Path) -> None:
    assert eventmem(project, "hooks", "install", "gemini").returncode == 0
    deploy_memories(project)
    base = {"session_id": "g-1", "cwd": str(project), "timestamp": "2026-12-01T10:00:00Z"}
    session = project.parent / "gemini-session.json"
    base["transcript_path"] = str(session)
    prompt = hook("gemini", project, {**base, "hook_event_name": "BeforeAgent", "prompt": "deploy it now"})
    assert "blue-green" in context_of(prompt, "BeforeAgent")
    nothing = hook("gemini", project, {**base, "hook_event_name": "BeforeAgent", "prompt": "tell me a joke"})
    assert json.loads(nothing.stdout) == {}
    session.write_text(
        json.dumps(
            {
                "sessionId": "g-1",
                "messages": [
                    {"id": "1", "type": "user", "content": "Let's adopt conventional commits for this repository."},
                    {"id": "2", "type": "gemini", "content": "Noted.", "toolCalls": []},
                ],
            },
            indent=2,
        )
    )
    end = hook("gemini", project, {**base, "hook_event_name": "SessionEnd", "reason": "exit"})
    assert (end.returncode, json.loads(end.stdout)) == (0, {})
    assert "adopt conventional commits" in journal_text(project)


def test_cursor_gets_additional_context_at_session_start_and_captures_at_stop(project: Path) -> None:
    assert eventmem(project, "hooks", "install", "cursor").returncode == 0
    ids = deploy_memories(project)
    common = {
        "conversation_id": "cur-1",
        "generation_id": "gen-1",
        "workspace_roots": [str(project)],
        "cursor_version": "2.0.77",
    }
    start = hook("cursor", project, {**common, "hook_event_name": "sessionStart", "session_id": "cur-1"})
    assert ids["deploy"] in json.loads(start.stdout)["additional_context"]
    transcript = project.parent / "cursor.jsonl"
    transcript.write_text(
        json.dumps(
            {"role": "user", "message": {"content": [{"type": "text", "text": "We'll use pnpm instead of npm."}]}}
        )
        + "\n"
    )
    stop = hook(
        "cursor",
        project,
        {
            **common,
            "hook_event_name": "stop",
            "status": "completed",
            "loop_count": 0,
            "transcript_path": str(transcript),
        },
    )
    assert (stop.returncode, json.loads(stop.stdout)) == (0, {})
    assert "use pnpm instead of npm" in journal_text(project)


def test_the_packaged_claude_code_plugin_runs_the_hooks_install_wires(project: Path) -> None:
    import eventmem as package

    plugin = Path(package.__file__).parent / "data" / "claude-plugin"
    shipped = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    installed = json.loads(
        (Path(ok_json(project, "hooks", "install", "claude-code", "--command", "eventmem")["file"])).read_text()
    )["hooks"]
    assert shipped == installed
    assert json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())["name"] == "eventmem"
    assert json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["eventmem"]["args"] == ["serve"]


def test_a_memory_saved_after_the_index_was_built_reaches_prompts_after_the_background_reindex(wired: Path) -> None:
    deploy_memories(wired)
    assert hook("claude-code", wired, claude_event(wired, "SessionStart")).returncode == 0  # builds the index
    new = save(wired, "Kubernetes manifests live in deploy/k8s and Argo CD applies them.", "--type", "convention")
    event = claude_event(wired, "UserPromptSubmit", prompt="where do the kubernetes manifests live?")
    first = hook("claude-code", wired, {**event, "session_id": "a"})  # the stale index answers at once
    assert first.returncode == 0 and new["id"] not in first.stdout.decode()
    deadline = time.monotonic() + 180
    while ok_json(wired, "hooks", "status")["index"]["state"] != "current":
        assert time.monotonic() < deadline, "the background reindex did not finish"
        time.sleep(0.5)
    again = hook("claude-code", wired, {**event, "session_id": "b"})
    assert new["id"] in again.stdout.decode()


def test_hook_settings_come_from_the_users_files_only_and_a_bad_value_is_logged(wired: Path, tmp_path: Path) -> None:
    config = wired / ".eventmem" / "config.toml"
    config.write_text(config.read_text() + '\n[hooks]\nauto_capture = "off"\n')  # the repository's: ignored
    user = tmp_path / "home" / ".config" / "eventmem" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[hooks]\nprompt_items = 1\nrelevance_floor = "high"\n')
    status = ok_json(wired, "hooks", "status")
    assert status["settings"]["auto_capture"] == "on" and status["settings"]["prompt_items"] == 1
    assert status["settings"]["relevance_floor"] == 0.35
    assert any("relevance_floor" in line for line in status["settings_problems"])
    assert ok_json(wired, "stats")["memories"] == 0  # the other settings still load


def test_the_state_of_sessions_untouched_for_a_month_is_removed_when_a_new_session_starts(wired: Path) -> None:
    deploy_memories(wired)
    assert hook("claude-code", wired, claude_event(wired, "SessionStart")).returncode == 0
    (old,) = (wired / ".eventmem" / "cache" / "hooks" / "sessions").glob("claude-code.*.json")
    month_ago = time.time() - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    assert hook("claude-code", wired, {**claude_event(wired, "SessionStart"), "session_id": "new"}).returncode == 0
    assert not old.exists()
    assert [p.name for p in old.parent.glob("claude-code.*.json")] == ["claude-code.new.json"]
