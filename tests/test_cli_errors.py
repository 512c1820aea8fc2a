"""The CLI on hostile or mistaken input, run as people run it (real processes, pipes, a terminal):
every failure is one line on stderr with the right exit code, and no output can drive a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import eventmem, ok_json, only_segment, save
from conftest import ProcessGroup, eventmem_command, git, journal_bytes

from eventmem.core.codec import encode_event
from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.core.limits import limit

RAW_CONTROLS = (b"\x1b", b"\x07", b"\x00", b"\x9b")


def one_line_failure(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The single stderr line of a failed command (asserting there is exactly one and no traceback)."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("eventmem WARNING")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_event(project: Path, event: MemorySaved, segment: str = "feedbeef.main.jsonl") -> None:
    """A line as a teammate's merged segment would bring it."""
    journal = project / ".eventmem" / "journal"
    journal.mkdir(parents=True, exist_ok=True)
    with open(journal / segment, "ab") as handle:
        handle.write(encode_event(event))


# -- failures: one line, the right exit code -------------------------------------------------------


def test_a_root_that_is_a_file_is_refused_in_one_line_with_exit_2(project: Path) -> None:
    (project / "notes.txt").write_text("not a folder\n")
    for command in (["stats"], ["doctor"], ["save", "a memory"], ["search", "x"], ["replay", "audit"]):
        line = one_line_failure(eventmem(project, *command, "--root", "notes.txt"), 2)
        assert "is not a folder" in line and "notes.txt" in line, command
    assert not (project / ".eventmem").exists()


def test_a_missing_root_is_refused_and_nothing_is_created_but_init_creates_it(project: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "project"
    for command in (["save", "a memory"], ["stats"], ["log"]):
        line = one_line_failure(eventmem(project, *command, "--root", str(missing)), 2)
        assert "does not exist" in line and "eventmem init" in line, command
    env = {**os.environ, "EVENTMEM_ROOT": str(missing)}
    line = one_line_failure(eventmem(project, "stats", env=env), 2)
    assert "env:EVENTMEM_ROOT" in line
    assert not (tmp_path / "no").exists()
    data = ok_json(project, "init", "--root", str(missing))
    assert data["root"] == str(missing)
    assert (missing / ".eventmem" / "config.toml").is_file()
    assert ok_json(project, "stats", "--root", str(missing))["memories"] == 0


def test_update_without_a_field_is_refused_naming_the_flags_and_writes_nothing(project: Path) -> None:
    memory = save(project, "A memory to leave alone")
    before = journal_bytes(project)
    line = one_line_failure(eventmem(project, "update", memory["id"]), 2)
    assert "nothing to update" in line and "--content" in line and "--importance" in line
    assert journal_bytes(project) == before


def test_log_limit_outside_the_limits_table_range_is_refused(project: Path) -> None:
    save(project, "One memory")
    high = int(limit("log_limit").high)
    for value in ("0", "-1", str(high + 1), "many"):
        result = eventmem(project, "log", "--limit", value)
        assert result.returncode == 2, value
        assert "Traceback" not in result.stderr and "--limit" in result.stderr
    assert eventmem(project, "log", "--limit", str(high)).returncode == 0


def test_a_bad_time_for_compact_is_bad_input_not_a_crash(project: Path) -> None:
    line = one_line_failure(eventmem(project, "compact", "--now", "yesterday-ish"), 2)
    assert "--now 'yesterday-ish' is not an ISO-8601 time" in line


def test_an_unexpected_error_is_one_line_naming_the_command_and_eventmem_debug(project: Path) -> None:
    program = (
        "import argparse, sys\n"
        "from eventmem.adapters.command_line import run_command\n"
        "def broken(args): raise RuntimeError('an invariant broke')\n"
        "sys.exit(run_command(broken, argparse.Namespace(command='stats', json=False)))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=project, capture_output=True, text=True, timeout=60)
    line = one_line_failure(result, 1)
    assert "`eventmem stats` failed unexpectedly (RuntimeError: an invariant broke)" in line
    assert "EVENTMEM_DEBUG=1" in line
    debug = subprocess.run(
        [sys.executable, "-c", program],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EVENTMEM_DEBUG": "1"},
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "an invariant broke" in debug.stderr


def test_log_into_a_pipe_closed_after_the_first_line_ends_quietly(project: Path) -> None:
    events = [
        MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=f"memory number {n}") for n in range(3000)
    ]
    journal = project / ".eventmem" / "journal"
    journal.mkdir(parents=True)
    (journal / "aaaa0001.main.jsonl").write_bytes(b"".join(encode_event(event) for event in events))
    command = " ".join(eventmem_command("log", "--limit", "10000"))
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -1"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr == ""


def test_a_cache_that_is_a_file_does_not_fail_a_save_or_any_reading_command(project: Path) -> None:
    first = save(project, "Saved before the cache was damaged")
    cache = project / ".eventmem" / "cache"
    shutil.rmtree(cache)
    cache.write_text("not a folder\n")
    result = eventmem(project, "save", "Saved while the cache is a file")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("saved ") and "Traceback" not in result.stderr
    for command in (["stats"], ["search", "cache"], ["show", first["id"]], ["log"], ["doctor"], ["rebuild"]):
        ran = eventmem(project, *command)
        assert ran.returncode == 0, (command, ran.stderr)
        assert "Traceback" not in ran.stderr, command
    assert ok_json(project, "stats")["memories"] == 2
    rebuilt = eventmem(project, "replay", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert cache.is_dir()


def test_a_save_on_a_disk_that_fills_up_after_the_journal_line_is_a_success(tmp_path: Path) -> None:
    disk = tmp_path / "small-disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        project = disk / "project"
        project.mkdir()
        assert eventmem(project, "init").returncode == 0
        assert eventmem(project, "save", "the first memory").returncode == 0
        # fill the disk: the segment's last page still has room for a line, the cache has none
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as handle:
            while True:
                handle.write(b"x" * 4096)
                handle.flush()
        result = eventmem(project, "save", "a small one")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("saved ") and "Traceback" not in result.stderr
        assert b"a small one" in only_segment(project).read_bytes()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_failing_git_is_one_line_with_gits_own_reason_and_no_traceback(project: Path) -> None:
    save(project, "The build uses Bazel.")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "memory")
    tree = git(project, "rev-parse", "HEAD^{tree}").strip()
    (project / ".git" / "objects" / tree[:2] / tree[2:]).unlink()  # the commit is there, its tree is not
    line = one_line_failure(eventmem(project, "diff", "HEAD", "--root", str(project)), 2)
    assert line.startswith("eventmem: git ls-tree: fatal:")


def test_without_git_a_command_that_needs_it_says_so_in_one_line(project: Path) -> None:
    save(project, "The build uses Bazel.")
    python = Path(sys.executable)
    env = os.environ | {"PATH": str(project / "no-such-bin")}
    result = subprocess.run(
        [str(python), "-m", "eventmem", "diff", "HEAD", "--root", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "git is not installed" in one_line_failure(result, 2)


# -- output that cannot attack a terminal ---------------------------------------------------------


def hostile_memory(project: Path) -> MemorySaved:
    event = MemorySaved(
        id=new_id(),
        ts=now_iso(),
        memory=new_id(),
        title="Deploy\nFAKE LINE\x1b[2J",
        summary="deploy notes \x1b]0;owned\x07 here",
        content="line one\x1b[31m red\nline two\x07 bell\x00 nul \x9b1m C1\ttab",
        tags=("deploy",),
    )
    write_event(project, event)
    return event


def test_a_merged_memory_with_control_characters_is_shown_searched_and_logged_escaped(project: Path) -> None:
    event = hostile_memory(project)
    outputs = {
        "show": eventmem(project, "show", event.memory),
        "search": eventmem(project, "search", "deploy notes"),
        "log": eventmem(project, "log"),
        "replay log": eventmem(project, "replay", "log", event.memory),
        "replay at": eventmem(project, "replay", "at", now_iso(), "--all"),
    }
    for name, result in outputs.items():
        assert result.returncode == 0, (name, result.stderr)
        raw = result.stdout.encode("utf-8", "surrogateescape")
        for control in RAW_CONTROLS:
            assert control not in raw, (name, control, result.stdout)
    shown = outputs["show"].stdout
    assert "title:    Deploy\\nFAKE LINE\\x1b[2J" in shown
    assert "line one\\x1b[31m red\nline two\\x07 bell\\x00 nul \\x9b1m C1\ttab" in shown
    assert "\\x1b]0;owned\\x07" in outputs["search"].stdout
    assert event.memory in outputs["log"].stdout and "\\x1b]0;owned\\x07" in outputs["log"].stdout


def test_json_output_keeps_the_exact_text_of_a_memory_with_control_characters(project: Path) -> None:
    event = hostile_memory(project)
    memory = ok_json(project, "show", event.memory)["memory"]
    assert (memory["title"], memory["summary"], memory["content"]) == (event.title, event.summary, event.content)
    hits = ok_json(project, "search", "deploy notes")["results"]
    assert [hit["content"] for hit in hits if hit["id"] == event.memory] == [event.content]
    logged = ok_json(project, "log", event.memory)
    assert logged[0]["content"] == event.content


def test_doctor_shows_a_segment_name_with_a_newline_and_escapes_on_one_line(project: Path) -> None:
    write_event(
        project, MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content="x"), "evil\n\x1b[2Jname.jsonl"
    )
    result = eventmem(project, "doctor")
    assert "Traceback" not in result.stderr
    assert b"\x1b" not in result.stdout.encode()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("segment:     journal/evil\\n\\x1b[2Jname.jsonl (") for line in lines), lines


def test_an_error_message_echoing_input_shows_its_control_characters_escaped(project: Path) -> None:
    for args in (["search", "x", "--mode", "\x1b[2J"], ["show", "\x1b]0;owned\x07"], ["log", "--limit", "\x1b[2J"]):
        result = eventmem(project, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "\x1b" not in result.stderr and "\x07" not in result.stderr, args
        assert "\\x1b" in result.stderr, args


# -- argument layout, replay, serve ---------------------------------------------------------------


def test_root_and_json_are_accepted_before_or_after_the_command(project: Path, tmp_path: Path) -> None:
    memory = save(project, "Found wherever the flags are")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (
        ["--root", str(project), "--json", "show", memory["id"]],
        ["--root", str(project), "show", memory["id"], "--json"],
        ["--json", "show", memory["id"], "--root", str(project)],
        ["show", memory["id"], "--root", str(project), "--json"],
    ):
        result = eventmem(elsewhere, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert json.loads(result.stdout)["memory"]["id"] == memory["id"], args
    after_wins = eventmem(elsewhere, "--root", str(elsewhere), "--json", "stats", "--root", str(project))
    assert json.loads(after_wins.stdout)["memories"] == 1


def test_search_json_returns_each_hit_with_its_content(project: Path) -> None:
    memory = save(project, "The release checklist lives in docs/release.md")
    hits = ok_json(project, "search", "release checklist")["results"]
    assert hits[0]["id"] == memory["id"] and hits[0]["content"] == memory["content"]


def test_eventmem_replay_audits_and_time_travels_like_the_tools_script(project: Path) -> None:
    memory = save(project, "Audited through the installed command")
    audited = eventmem(project, "replay", "audit")
    assert audited.returncode == 0, audited.stderr
    assert "ok: 0 error(s)" in audited.stdout
    report = json.loads(eventmem(project, "--json", "replay", "audit").stdout)
    assert report["ok"] is True and report["counts"]["memories"] == 1
    at = ok_json(project, "replay", "at", now_iso(), memory["id"])
    assert at["memory"]["content"] == memory["content"]
    with open(only_segment(project), "ab") as handle:
        handle.write(b"not json\n")
    assert eventmem(project, "replay", "audit").returncode == 1


def test_git_drivers_written_by_init_run_with_a_path_that_lacks_the_virtualenv(project: Path) -> None:
    save(project, "Committed memory", "--title", "Before")
    data = ok_json(project, "init", "--git-drivers")
    command = data["git"]["git_config"]["diff.eventmem.command"]
    assert command.startswith(sys.executable) or command.startswith(f"'{sys.executable}'")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "memory")
    added = save(project, "Uncommitted memory about the driver")
    git_dir = os.path.dirname(shutil.which("git") or "/usr/bin/git")
    bare_path = {**os.environ, "PATH": f"{git_dir}:/bin"}
    assert shutil.which("eventmem", path=bare_path["PATH"]) is None
    shown = subprocess.run(
        ["git", "diff", "--", ".eventmem"], cwd=project, env=bare_path, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert "external diff died" not in shown.stderr
    assert added["id"] in shown.stdout and '"type":' not in shown.stdout
    doctor = ok_json(project, "doctor")
    assert [(d["key"], d["problem"]) for d in doctor["git_drivers"]] == [
        ("diff.eventmem.command", None),
        ("diff.eventmem.textconv", None),
    ]


def test_doctor_reports_a_git_driver_that_cannot_run_and_how_to_fix_it(project: Path) -> None:
    save(project, "A memory")
    git(project, "config", "diff.eventmem.command", "/nonexistent/venv/bin/python -m eventmem diff --git-driver")
    result = eventmem(project, "doctor")
    assert result.returncode == 1
    assert "/nonexistent/venv/bin/python cannot be run" in result.stdout
    assert "eventmem init --git-drivers" in result.stdout
    fixed = eventmem(project, "init", "--git-drivers")
    assert fixed.returncode == 0, fixed.stderr
    assert eventmem(project, "doctor").returncode == 0


def test_serve_on_a_terminal_says_it_waits_for_a_client_on_stderr_and_writes_nothing_to_stdout(
    project: Path, processes: ProcessGroup
) -> None:
    primary, secondary = os.openpty()
    try:
        proc = processes.spawn(
            eventmem_command("serve"), cwd=project, stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stderr is not None and proc.stdout is not None
        said = b""
        deadline = time.monotonic() + 60
        while b"\n" not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                said += chunk
        line = said.decode()
        assert "waiting for an MCP client" in line and "claude mcp add eventmem -- eventmem serve" in line
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        assert out == b""
    finally:
        os.close(primary)
        os.close(secondary)


@pytest.mark.parametrize("command", [["doctor"], ["replay", "audit"], ["check", "--base", "main"]])
def test_a_judging_command_whose_reader_goes_away_still_exits_with_its_verdict(
    project: Path, command: list[str]
) -> None:
    save(project, "The build uses hatch.")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    git(project, "checkout", "-q", "-b", "feature")
    (segment,) = (project / ".eventmem" / "journal").glob("*.jsonl")
    with open(segment, "ab") as handle:
        handle.write(b'["not", "an", "event"]\n')
    git(project, "commit", "-q", "-am", "a line that is not an event")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write fails
    try:
        result = subprocess.run(
            eventmem_command(*command), cwd=project, stdout=write, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write)
    assert result.returncode == 1, result.stderr
    assert b"Traceback" not in result.stderr
