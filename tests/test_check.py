"""``eventmem check`` on real branches of real git repositories, ``doctor`` against the audit, and
what ``diff`` and ``pr-summary`` show a reviewer; every command run as a process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem as run
from conftest import REPO, git, reopen
from test_history import append, commit

from eventmem.core.codec import encode_event
from eventmem.core.events import LinkAdded, MemoryArchived, MemoryDeleted, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso

LONG = (
    "The connection pool holds fifty connections and is shared by every worker in the service process; "
    "raise it only together with the database's own limit, which is set today"
)


def check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(cwd, "check", *args)


def findings(cwd: Path, *args: str) -> list[dict[str, Any]]:
    result = check(cwd, "--json", *args)
    assert result.returncode in (0, 1), result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is (result.returncode == 0)
    found: list[dict[str, Any]] = data["findings"]
    return found


def segment(project: Path, branch: str) -> Path:
    (path,) = (project / ".eventmem" / "journal").glob(f"*.{branch}.jsonl")
    return path


def relative(project: Path, path: Path) -> str:
    return path.relative_to(project).as_posix()


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n")


@pytest.fixture
def base(project: Path) -> dict[str, str]:
    """``main`` with two memories (one by alice), then a ``feature`` branch checked out."""
    service = reopen(project)
    ids = {
        "pool": service.save(LONG, title="Pool size", kind="decision", by="alice").id,
        "queue": service.save("Redis is the job queue", kind="decision", by="alice").id,
    }
    service.close()
    ids["commit"] = commit(project, "base")
    git(project, "checkout", "-q", "-b", "feature")
    return ids


def add_raw(path: Path, data: bytes) -> int:
    """Append bytes to a segment; returns the 1-based line number of the first appended line."""
    number = line_count(path) + 1
    with open(path, "ab") as handle:
        handle.write(data)
    return number


def test_a_clean_branch_passes_and_says_which_base_it_chose(project: Path, base: dict[str, str]) -> None:
    service = reopen(project)
    added = service.save("Celery is gone", kind="decision", by="bob").id
    service.update(base["pool"], importance=0.9, by="bob")
    service.link(added, base["queue"], relation="supersedes", by="bob")
    service.delete(base["queue"], reason="superseded", by="bob")
    service.close()
    commit(project, "feature")
    result = check(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("check ok: 0 finding(s) in 5 added event(s); base main (chosen: ")
    assert f"merge base {base['commit'][:12]}" in result.stdout
    assert findings(project, "--base", "main") == []


def test_an_undecodable_added_line_fails_with_its_path_and_line(project: Path, base: dict[str, str]) -> None:
    append(project, MemoryUpdated(id=new_id(), ts=now_iso(), memory=base["pool"], importance=0.7))
    path = segment(project, "feature")
    nested = b'{"type":"saved","id":"x","ts":"t","memory":"m","content":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    number = add_raw(path, b'{"type":"saved","id":"01BROKEN"\n{"type":"updated","id":\x1b[2J\n' + nested)
    commit(project, "broken lines")
    result = check(project)
    assert result.returncode == 1
    assert f"{relative(project, path)}:{number}: error: not an event" in result.stdout
    assert f"{relative(project, path)}:{number + 1}: error: not an event" in result.stdout
    assert "\x1b" not in result.stdout  # the hostile bytes are spelled out
    assert f"{relative(project, path)}:{number + 2}: error: not an event" in result.stdout  # nested too deep
    assert result.stdout.splitlines()[-1].startswith("check FAILED: 3 finding(s) in 1 added event(s)")
    assert [(f["code"], f["line"]) for f in findings(project)] == [("undecodable", number + n) for n in range(3)]


def test_an_event_stamped_after_the_commit_that_added_it_fails(project: Path, base: dict[str, str]) -> None:
    path = segment(project, "main")
    number = add_raw(
        path,
        encode_event(MemoryUpdated(id=new_id(), ts="2099-01-01T00:00:00.000000Z", memory=base["pool"], title="Mine")),
    )
    commit(project, "from the future")
    (finding,) = findings(project)
    assert (finding["code"], finding["path"], finding["line"]) == ("future-stamp", relative(project, path), number)
    assert (
        "2099-01-01T00:00:00.000000Z" in finding["message"] and "after the commit that added it" in finding["message"]
    )


def test_a_reused_event_id_or_a_memory_id_of_another_creator_fails(project: Path, base: dict[str, str]) -> None:
    first = segment(project, "main").read_bytes().split(b"\n")[0]
    taken = json.loads(first)["id"]
    append(project, MemoryUpdated(id=new_id(), ts=now_iso(), memory=base["pool"], importance=0.8))
    path = segment(project, "feature")
    number = add_raw(
        path,
        encode_event(MemoryUpdated(id=taken, ts=now_iso(), memory=base["pool"], title="Hijacked"))
        + encode_event(MemorySaved(id=new_id(), ts=now_iso(), memory=base["queue"], content="Mine now", by="mallory"))
        + first
        + b"\n",  # the very same line again: a replay, harmless
    )
    commit(project, "reuse")
    found = [(f["code"], f["line"]) for f in findings(project)]
    assert found == [("reused-id", number), ("reused-id", number + 1)]
    text = check(project).stdout
    assert f"event id {taken} is already used by the base, with different content" in text
    assert f"memory id {base['queue']} already exists, created by 'alice'" in text


def test_an_event_about_a_memory_the_branch_could_not_have_seen_fails(project: Path, base: dict[str, str]) -> None:
    stranger = new_id()
    append(
        project,
        MemoryDeleted(id=new_id(), ts=now_iso(), memory=stranger),
        LinkAdded(id=new_id(), ts=now_iso(), link=new_id(), source=base["pool"], target=stranger),
    )
    commit(project, "unknown memory")
    path = relative(project, segment(project, "feature"))
    found = findings(project)
    assert [(f["code"], f["path"], f["line"]) for f in found] == [
        ("unknown-memory", path, 1),
        ("unknown-memory", path, 2),
    ]
    assert all(f"memory {stranger}, unknown to the base" in f["message"] for f in found)


def test_a_changed_line_a_removed_segment_or_a_changed_archive_fails(project: Path, base: dict[str, str]) -> None:
    main = segment(project, "main")
    lines = main.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"Redis", b"Kafka")
    main.write_bytes(b"\n".join(lines))
    archive = project / ".eventmem" / "archive"
    archive.mkdir(exist_ok=True)
    commit(project, "rewrite line 2")
    found = [(f["code"], f["path"], f["line"]) for f in findings(project)]
    # the changed line also reuses the id of the line it replaced, with different content
    assert found == [("reused-id", relative(project, main), 2), ("rewritten-history", relative(project, main), 2)]

    git(project, "checkout", "-q", "main")
    (archive / "w.main.2026-01-01.1.jsonl").write_bytes(lines[0] + b"\n")
    base_commit = commit(project, "an archive")
    git(project, "checkout", "-q", "-b", "other")
    (archive / "w.main.2026-01-01.1.jsonl").write_bytes(lines[0] + b"\n" + lines[0] + b"\n")
    main.unlink()
    commit(project, "append to the archive, drop the segment")
    found = [(f["code"], f["path"], f["line"]) for f in findings(project, "--base", base_commit)]
    assert found == [
        ("rewritten-history", ".eventmem/archive/w.main.2026-01-01.1.jsonl", 0),
        ("rewritten-history", relative(project, main), 0),
    ]


def test_compaction_moving_lines_into_a_new_archive_passes(project: Path, base: dict[str, str]) -> None:
    git(project, "checkout", "-q", "main")
    old = "2026-01-01T00:00:00.000000Z"
    gone = new_id()
    append(
        project,
        MemorySaved(id=new_id(), ts=old, memory=gone, content="An old decision"),
        MemoryDeleted(id=new_id(), ts=old, memory=gone, reason="obsolete"),
    )
    before = commit(project, "an old deleted memory")
    compacted = run(project, "compact", "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["archived"], "compaction archived nothing"
    commit(project, "compact")
    assert check(project, "--base", before).returncode == 0, check(project, "--base", before).stdout

    # the same moved lines, but one of them changed on the way into the archive: a rewrite
    (archived,) = (project / ".eventmem" / "archive").glob("*.jsonl")
    archived.write_bytes(archived.read_bytes().replace(b"obsolete", b"forged!!"))
    commit(project, "forge the archive")
    found = [(f["code"], f["path"]) for f in findings(project, "--base", before)]
    assert ("rewritten-history", relative(project, segment(project, "main"))) in found


def test_a_tracked_config_that_reaches_the_network_fails(project: Path, base: dict[str, str]) -> None:
    config = project / ".eventmem" / "config.toml"
    config.write_text(
        '# settings\nfusion = "rrf"\nembedder = "openai:text-embedding-3-small@http://evil.example:8080/v1"\n'
        'summarizer = "sampling"\n',
        encoding="utf-8",
    )
    commit(project, "config")
    found = findings(project)
    assert [(f["code"], f["path"], f["line"]) for f in found] == [
        ("network-setting", ".eventmem/config.toml", 3),
        ("network-setting", ".eventmem/config.toml", 4),
    ]


def test_a_symlink_in_the_memory_folder_or_the_render_folder_fails(project: Path, base: dict[str, str]) -> None:
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = ".ai"\n', encoding="utf-8")
    (project / ".ai").mkdir()
    (project / ".ai" / "todo.md").symlink_to("/etc/passwd")
    (project / ".eventmem" / "journal" / "evil.jsonl").symlink_to("../../../../etc/hostname")
    commit(project, "links")
    found = [(f["code"], f["path"]) for f in findings(project)]
    assert found == [("symlink", ".ai/todo.md"), ("symlink", ".eventmem/journal/evil.jsonl")]


def ci_command() -> list[str]:
    """The ``eventmem check`` line of the GitHub Actions snippet in docs/trust.md, for a pull request to main."""
    readme = (REPO / "docs" / "trust.md").read_text(encoding="utf-8")
    snippet = readme.split("## Checking pull requests", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    (line,) = [line for line in snippet.splitlines() if "eventmem check" in line]
    command = line.split("run:", 1)[1].strip().replace("${{ github.base_ref }}", "main")
    assert command.startswith("eventmem check")
    return command.split()[2:]


def test_the_ci_snippet_and_the_pre_push_hook_run_the_check(
    project: Path, base: dict[str, str], tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(origin))
    git(project, "remote", "add", "origin", str(origin))
    git(project, "fetch", "-q", "origin")
    append(project, MemoryUpdated(id=new_id(), ts=now_iso(), memory=base["pool"], importance=0.9))
    commit(project, "feature")
    assert check(project, *ci_command()).returncode == 0

    installed = run(project, "init", "--git-hooks")
    assert installed.returncode == 0 and "pre-push hook installed" in installed.stdout
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    pushed = subprocess.run(["git", "push", "-q", "origin", "feature"], cwd=project, capture_output=True, env=env)
    assert pushed.returncode == 0, pushed.stderr
    add_raw(segment(project, "feature"), b"not json\n")
    commit(project, "broken")
    assert check(project, *ci_command()).returncode == 1
    refused = subprocess.run(["git", "push", "-q", "origin", "feature"], cwd=project, capture_output=True, env=env)
    assert refused.returncode != 0 and b"not an event" in refused.stdout + refused.stderr


# -- doctor tells what the audit finds ----------------------------------------------------------


def replay_audit(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "replay.py"), "audit"], cwd=project, capture_output=True, text=True
    )


def test_doctor_is_unhealthy_exactly_when_the_audit_finds_errors(project: Path) -> None:
    service = reopen(project)
    memory = service.save("The pool holds 50 connections").id
    service.close()
    path = segment(project, "main")
    future = MemoryUpdated(id=new_id(), ts="2099-01-01T00:00:00.000000Z", memory=memory, importance=0.9)
    steps: list[tuple[str, Any]] = [
        ("clean", lambda: None),
        ("a future stamp (a warning)", lambda: add_raw(path, encode_event(future))),
        (
            "an update of an unknown memory",
            lambda: add_raw(path, encode_event(MemoryDeleted(id=new_id(), ts=now_iso(), memory=new_id()))),
        ),
    ]
    for name, step in steps:
        step()
        doctor, audited = run(project, "doctor", "--json"), replay_audit(project)
        assert doctor.returncode == audited.returncode, name
        assert json.loads(doctor.stdout)["healthy"] is (audited.returncode == 0), name
    report = json.loads(run(project, "doctor", "--json").stdout)
    codes = {(f["code"], f["severity"], f["line"]) for f in report["findings"]}
    assert codes == {("future-stamp", "warning", 2), ("unknown-memory", "error", 3)}
    text = run(project, "doctor").stdout
    assert f"finding:     .eventmem/journal/{path.name}:3: error: deleted event" in text


def test_doctor_and_the_audit_are_unhealthy_over_a_symlink_or_a_network_setting(project: Path) -> None:
    service = reopen(project)
    service.save("The pool holds 50 connections")
    service.close()
    (project / ".eventmem" / "archive").mkdir(exist_ok=True)
    (project / ".eventmem" / "archive" / "x.jsonl").symlink_to("/etc/passwd")
    doctor = run(project, "doctor")
    assert doctor.returncode == 1 and replay_audit(project).returncode == 1
    assert "finding:     .eventmem/archive/x.jsonl:0: error: a symlink" in doctor.stdout
    (project / ".eventmem" / "archive" / "x.jsonl").unlink()
    assert run(project, "doctor").returncode == 0
    (project / ".eventmem" / "config.toml").write_text('\nsummarizer = "sampling"\n', encoding="utf-8")
    doctor = run(project, "doctor")
    assert doctor.returncode == 1 and replay_audit(project).returncode == 1
    assert "finding:     .eventmem/config.toml:2: error: tracked setting summarizer" in doctor.stdout


# -- what diff and pr-summary show a reviewer ----------------------------------------------------


def test_diff_and_pr_summary_show_an_edit_at_the_end_of_a_long_content_and_name_the_base(
    project: Path, base: dict[str, str]
) -> None:
    service = reopen(project)
    service.update(base["pool"], content=LONG.replace("set today", "set in the ops repository"), by="bob")
    service.close()
    commit(project, "edit the end")
    text = run(project, "diff", "main", "HEAD").stdout
    assert "content … which is set [-today-] {+in the ops repository+}" in text
    assert text.startswith("memory changes main (")
    summary = run(project, "pr-summary").stdout
    assert f"Since main (merge base {base['commit'][:12]})." in summary
    assert "[-today-] {+in the ops repository+}" in summary
    assert json.loads(run(project, "pr-summary", "--json").stdout)["base"] == "main"


def test_a_memory_edited_then_deleted_in_the_range_shows_as_deleted(project: Path, base: dict[str, str]) -> None:
    service = reopen(project)
    service.update(base["queue"], title="Queue", by="bob")
    service.delete(base["queue"], reason="moved to the wiki", by="bob")
    service.close()
    commit(project, "edit then delete")
    data = json.loads(run(project, "diff", "main", "HEAD", "--json").stdout)
    assert [(c["memory"], c["changes"]) for c in data["memories"]] == [(base["queue"], ["deleted"])]
    assert re.search(rf"^- deleted\s+{base['queue']}", run(project, "diff", "main", "HEAD").stdout, re.MULTILINE)
    assert "**Deleted**" in run(project, "pr-summary").stdout


def test_diff_and_pr_summary_show_an_overridden_concurrent_edit(project: Path, base: dict[str, str]) -> None:
    service = reopen(project)
    service.update(base["pool"], title="Pool size: 50", by="alice")
    service.close()
    commit(project, "alice's title")
    git(project, "checkout", "-q", "-b", "bob", "main")
    service = reopen(project)
    service.update(base["pool"], title="Pool size: 80", by="bob")
    service.close()
    commit(project, "bob's title")
    git(project, "merge", "-q", "--no-edit", "feature")
    text = run(project, "diff", "main", "HEAD").stdout
    assert "1 overridden concurrent edit(s)" in text
    assert f'! overridden {base["pool"]} "Pool size: 80" title: alice\'s "Pool size: 50"' in text
    assert 'lost to bob\'s "Pool size: 80"' in text
    summary = run(project, "pr-summary").stdout
    assert "**Overridden concurrent edits**" in summary and "neither had seen the other" in summary


def test_an_odd_segment_name_is_printed_escaped(project: Path, base: dict[str, str]) -> None:
    odd = project / ".eventmem" / "journal" / "evil\x1b[2J\n.jsonl"
    odd.write_bytes(b"not json\n")
    commit(project, "odd name")
    result = check(project)
    assert result.returncode == 1
    assert ".eventmem/journal/evil\\x1b[2J\\n.jsonl:1: error: not an event" in result.stdout
    assert "\x1b" not in result.stdout


def test_a_line_removed_from_the_middle_of_a_base_segment_is_reported_where_the_branch_departs(
    project: Path, base: dict[str, str]
) -> None:
    main = segment(project, "main")
    first, second = main.read_bytes().splitlines(keepends=True)
    service = reopen(project)
    service.update(base["pool"], importance=0.9, by="bob")  # on the feature segment: fine
    service.close()
    main.write_bytes(second)
    commit(project, "drop the first line")
    found = [(f["code"], f["path"], f["line"]) for f in findings(project)]
    assert found == [("rewritten-history", relative(project, main), 1)]
    assert first not in main.read_bytes()


def test_a_config_nested_too_deep_is_reported_not_a_crash(project: Path, base: dict[str, str]) -> None:
    config = project / ".eventmem" / "config.toml"
    config.write_text('render_ai_dir = "a\\u0000b"\nx = ' + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    commit(project, "hostile config")
    (finding,) = findings(project)
    assert (finding["code"], finding["path"]) == ("invalid-config", ".eventmem/config.toml")
    doctor = run(project, "doctor")  # the file is ignored (every default used), and said to be broken
    assert doctor.returncode == 1 and "INVALID:     config.toml: not valid TOML" in doctor.stdout
    assert "Traceback" not in doctor.stderr


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("vector_wieght = 0.5", "vector_wieght = 0.5: not a setting eventmem knows"),
        ("embedder = 5", "embedder = 5: Expected `str`, got `int`"),
        ("vector_weight = nan", "vector_weight = nan: expected a number from 0 to 100"),
        ("max_memory_bytes = 0", "max_memory_bytes = 0: expected a whole number from 64 to 1,048,576"),
    ],
)
def test_a_config_with_a_setting_that_breaks_a_rule_fails_at_its_line(
    project: Path, base: dict[str, str], setting: str, reason: str
) -> None:
    (project / ".eventmem" / "config.toml").write_text(f'# settings\nfusion = "rrf"\n{setting}\n', encoding="utf-8")
    commit(project, "a config with a bad value")
    (finding,) = findings(project)
    assert (finding["code"], finding["path"], finding["line"]) == ("invalid-config", ".eventmem/config.toml", 3)
    assert reason in finding["message"] and "ignore it and use the default" in finding["message"]
    doctor = run(project, "doctor")  # ignored, its default used, and said to be invalid
    assert doctor.returncode == 1 and reason in doctor.stdout and "Traceback" not in doctor.stderr


def test_a_tracked_local_config_that_reaches_the_network_fails_like_the_tracked_config(
    project: Path, base: dict[str, str]
) -> None:
    local = project / ".eventmem" / "config.local.toml"
    local.write_text('fusion = "rrf"\nembedder = "ollama:nomic-embed-text@http://evil.example:11434"\n', "utf-8")
    git(project, "add", "--force", ".eventmem/config.local.toml")
    commit(project, "track a local config")
    assert [(f["code"], f["path"], f["line"]) for f in findings(project)] == [
        ("network-setting", ".eventmem/config.local.toml", 2)
    ]


def test_a_link_on_the_way_to_the_render_folder_fails_the_check_and_doctor(
    project: Path, base: dict[str, str], tmp_path: Path
) -> None:
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = "docs/ai"\n', encoding="utf-8")
    (project / "notes").mkdir()
    (project / "notes" / "own-link").symlink_to("../docs")  # not on the way: left alone
    outside = tmp_path / "outside"
    (outside / "ai").mkdir(parents=True)
    (project / "docs").symlink_to(outside, target_is_directory=True)
    commit(project, "render the view through a link")
    assert [(f["code"], f["path"]) for f in findings(project)] == [("symlink", "docs")]
    doctor = run(project, "doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    assert [(f["code"], f["path"]) for f in json.loads(doctor.stdout)["findings"]] == [("symlink", "docs")]
    assert list((outside / "ai").iterdir()) == []


def test_a_segment_that_is_a_folder_or_a_submodule_fails(project: Path, base: dict[str, str]) -> None:
    folder = project / ".eventmem" / "journal" / "folder.main.jsonl"
    folder.mkdir()
    (folder / "inside.jsonl").write_bytes(b"{}\n")
    git(project, "add", "-A")
    oid = "1" * 40
    git(project, "update-index", "--add", "--cacheinfo", f"160000,{oid},.eventmem/journal/module.main.jsonl")
    git(project, "commit", "-q", "-m", "odd segments")
    assert [(f["code"], f["path"]) for f in findings(project)] == [
        ("not-a-file", ".eventmem/journal/folder.main.jsonl"),
        ("not-a-file", ".eventmem/journal/module.main.jsonl"),
    ]


def test_diff_and_pr_summary_name_the_lines_a_branch_adds_that_do_not_decode(
    project: Path, base: dict[str, str]
) -> None:
    path = segment(project, "main")
    line = add_raw(path, b'["not", "an", "event"]\n' + b"{" * 20 + b"\n")
    commit(project, "two lines that are not events")
    text = run(project, "diff", "main", "HEAD").stdout
    assert "no memory changes; 0 new event(s); 2 line(s) that do not decode, left out" in text
    name = f"journal/{path.name}"
    assert f"! left out   {name}: corrupt line at byte " in text and f"not a JSON object (line {line})" in text
    summary = run(project, "pr-summary").stdout
    assert "**Lines that do not decode (left out)**" in summary and f"(line {line + 1})" in summary
    assert [len(d["corrupt_added"]) for d in [json.loads(run(project, "diff", "--json", "main", "HEAD").stdout)]] == [2]
    assert "left out" not in run(project, "diff", "main", "main").stdout


def test_a_branch_that_tracks_a_cache_file_fails(project: Path, base: dict[str, str]) -> None:
    assert run(project, "rebuild").returncode == 0
    git(project, "add", "--force", ".eventmem/cache/snapshot.bin")
    commit(project, "a snapshot made elsewhere")
    assert [(f["code"], f["path"]) for f in findings(project)] == [("tracked-cache", ".eventmem/cache/snapshot.bin")]
    doctor = run(project, "doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    found = [(f["code"], f["path"]) for f in json.loads(doctor.stdout)["findings"]]
    assert found == [("tracked-cache", ".eventmem/cache/snapshot.bin")]


@pytest.mark.parametrize("named", ["../../etc/passwd", "/etc/passwd", "archive/../../x.jsonl", "archive/sub/x.jsonl"])
def test_an_archived_event_naming_a_path_outside_the_journal_folders_fails(
    project: Path, base: dict[str, str], named: str
) -> None:
    feature = segment(project, "main")  # (lines added to it on the branch)
    event = MemoryArchived(id=new_id(), ts=now_iso(), by="mallory", memories=(base["pool"],), segment=named)
    number = add_raw(feature, encode_event(event))
    commit(project, "archive into a strange place")
    found = [(f["code"], f["path"], f["line"]) for f in findings(project)]
    assert ("bad-segment", relative(project, feature), number) in found, found
    good = MemoryArchived(
        id=new_id(), ts=now_iso(), memories=(base["pool"],), segment="archive/w.main.20260101.1.jsonl"
    )
    add_raw(feature, encode_event(good))
    commit(project, "and one well named")
    assert [f for f in findings(project) if f["code"] == "bad-segment" and f["line"] != number] == []


def test_a_base_with_no_commit_in_common_is_named_a_rewrite(project: Path, base: dict[str, str]) -> None:
    git(project, "checkout", "-q", "--orphan", "rewritten")
    git(project, "commit", "-q", "-m", "a history of its own")
    result = check(project, "--base", "main")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "main and HEAD have no commit in common: the history was rewritten" in result.stderr
    assert result.stderr.count("\n") == 1
