"""``tools/replay.py`` run as a script, in real project directories: rebuild and audit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from cli_runner import ok_json
from conftest import REPO, git, reopen

from eventmem.core.codec import encode_event
from eventmem.core.events import Event, LinkAdded, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.project import ProjectPaths

REPLAY = REPO / "tools" / "replay.py"


def replay(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPLAY), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def audit_json(cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = replay(cwd, "audit", "--json", *args)
    assert result.returncode in (0, 1), result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, data


def search_json(project: Path, query: str) -> Any:
    return ok_json(project, "search", query)


def seed(project: Path) -> list[str]:
    """A small healthy history: saves, an update, a delete and a link."""
    service = reopen(project)
    try:
        ids = [
            service.save("Postgres pool size is 50", kind="fix", tags=["db"]).id,
            service.save("Redis is the job queue", kind="decision", tags=["queue"]).id,
            service.save("The frontend uses pnpm workspaces", tags=["frontend"]).id,
            service.save("Postgres runs version 15", importance=0.9).id,
        ]
        service.update(ids[3], content="Postgres runs version 16")
        service.delete(ids[2])
        link = LinkAdded(id=new_id(), ts=now_iso(), link=new_id(), source=ids[0], target=ids[1])
        service.project.append([link])
    finally:
        service.close()
    return ids


def segment_of(project: Path) -> Path:
    (segment,) = (project / ".eventmem" / "journal").glob("*.jsonl")
    return segment


def write_segment(project: Path, name: str, *events: Event) -> Path:
    path = project / ".eventmem" / "journal" / name
    with open(path, "ab") as handle:
        handle.write(b"".join(encode_event(event) for event in events))
    return path


def saved(memory: str | None = None, content: str = "a memory") -> MemorySaved:
    return MemorySaved(id=new_id(), ts=now_iso(), memory=memory or new_id(), content=content)


def test_rebuild_after_deleting_the_cache_gives_the_same_search_answers(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", "0")  # scores must not move with the clock
    seed(project)
    queries = ("postgres version", "job queue", "pnpm frontend")
    before = [search_json(project, query) for query in queries]
    cache = project / ".eventmem" / "cache"
    assert cache.exists()
    result = replay(project, "rebuild")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"rebuilt {project.resolve()}")
    assert "7 events from 1 segment(s)" in result.stdout
    assert "3 live memories, 1 links" in result.stdout
    assert (cache / "snapshot.bin").exists()
    assert [search_json(project, query) for query in queries] == before
    shutil.rmtree(cache)
    assert [search_json(project, query) for query in queries] == before


def test_rebuild_drops_the_whole_cache_and_reports_in_json(project: Path) -> None:
    seed(project)
    stray = project / ".eventmem" / "cache" / "stale-leftover.bin"
    stray.write_bytes(b"old")
    result = replay(project, "rebuild", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["status"] == "success" and summary["cache_dropped"] is True
    assert (summary["events"], summary["memories"], summary["links"], summary["segments"]) == (7, 3, 1, 1)
    assert summary["corrupt_lines"] == []
    assert not stray.exists()
    service = reopen(project)
    try:
        assert [hit.content for hit in service.recall("postgres version", limit=1, include_content=True)] == [
            "Postgres runs version 16"
        ]
    finally:
        service.close()


def test_audit_is_clean_on_a_healthy_journal(project: Path) -> None:
    seed(project)
    result = replay(project, "audit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("ok: 0 error(s), 0 warning(s)")
    code, report = audit_json(project)
    assert code == 0 and report["ok"] is True
    counts = report["counts"]
    assert (counts["segments"], counts["events"], counts["memories"], counts["links"]) == (1, 7, 4, 1)
    assert counts["bytes"] == segment_of(project).stat().st_size
    assert report["corrupt_lines"] == report["duplicate_ids"] == report["unknown_references"] == []


def test_audit_reports_a_corrupt_middle_line_with_its_segment_and_byte_offset(project: Path) -> None:
    seed(project)
    segment = segment_of(project)
    lines = segment.read_bytes().splitlines(keepends=True)
    assert b'"type":"updated"' in lines[4]  # no other event depends on this one
    offset = sum(len(line) for line in lines[:4])
    lines[4] = lines[4][: len(lines[4]) // 2] + b"\n"  # a line cut short in the middle of the file
    segment.write_bytes(b"".join(lines))
    result = replay(project, "audit")
    assert result.returncode == 1
    assert f"corrupt line: journal/{segment.name} at byte {offset}: not JSON" in result.stdout
    assert "PROBLEMS FOUND: 1 error(s)" in result.stdout
    code, report = audit_json(project)
    assert code == 1 and report["ok"] is False and report["errors"] == 1
    (corrupt,) = report["corrupt_lines"]
    assert (corrupt["segment"], corrupt["offset"]) == (f"journal/{segment.name}", offset)
    assert report["counts"]["corrupt_lines"] == 1 and report["counts"]["events"] == 6


def test_audit_treats_json_that_breaks_the_event_schema_as_corrupt(project: Path) -> None:
    seed(project)
    segment = segment_of(project)
    offset = segment.stat().st_size
    bad = {"type": "saved", "id": new_id(), "ts": now_iso(), "memory": new_id(), "content": 42}
    with open(segment, "ab") as handle:
        handle.write(json.dumps(bad).encode() + b"\n")
    code, report = audit_json(project)
    assert code == 1
    (corrupt,) = report["corrupt_lines"]
    assert corrupt["offset"] == offset and "content" in corrupt["reason"]


def test_audit_fails_on_one_event_id_with_two_different_contents(project: Path) -> None:
    seed(project)
    original = saved(content="the original text")
    write_segment(project, "aaaa0001.main.jsonl", original)
    forged = MemorySaved(id=original.id, ts=original.ts, memory=original.memory, content="a different text")
    write_segment(project, "bbbb0002.feature.jsonl", forged)
    result = replay(project, "audit")
    assert result.returncode == 1
    assert f"event id {original.id} appears 2 times, with different content" in result.stdout
    _, report = audit_json(project)
    (duplicate,) = report["duplicate_ids"]
    assert duplicate["id"] == original.id
    assert duplicate["identical"] is False and duplicate["severity"] == "error"
    assert duplicate["locations"] == [
        {"segment": "journal/aaaa0001.main.jsonl", "offset": 0},
        {"segment": "journal/bbbb0002.feature.jsonl", "offset": 0},
    ]


def test_audit_warns_but_passes_when_an_identical_line_appears_twice(project: Path) -> None:
    seed(project)
    line = segment_of(project).read_bytes().splitlines(keepends=True)[0]
    copy = project / ".eventmem" / "journal" / "cccc0003.main.jsonl"
    copy.write_bytes(line)
    result = replay(project, "audit")
    assert result.returncode == 0, result.stdout
    assert "appears 2 times, identical" in result.stdout
    _, report = audit_json(project)
    assert report["ok"] is True and report["warnings"] == 1
    (duplicate,) = report["duplicate_ids"]
    assert duplicate["identical"] is True and duplicate["severity"] == "warning"


def test_audit_reports_an_update_to_a_memory_that_was_never_saved(project: Path) -> None:
    seed(project)
    ghost = new_id()
    segment = segment_of(project)
    offset = segment.stat().st_size
    update = MemoryUpdated(id=new_id(), ts=now_iso(), memory=ghost, title="who am I")
    write_segment(project, segment.name, update)
    result = replay(project, "audit")
    assert result.returncode == 1
    assert f"updated event {update.id} is about unknown memory {ghost}" in result.stdout
    _, report = audit_json(project)
    (reference,) = report["unknown_references"]
    assert reference == {
        "event": update.id,
        "type": "updated",
        "missing": ghost,
        "role": "memory",
        "segment": f"journal/{segment.name}",
        "offset": offset,
    }


def test_audit_reports_a_link_to_a_memory_that_was_never_saved(project: Path) -> None:
    ids = seed(project)
    ghost = new_id()
    write_segment(
        project,
        segment_of(project).name,
        LinkAdded(id=new_id(), ts=now_iso(), link=new_id(), source=ids[0], target=ghost),
    )
    code, report = audit_json(project)
    assert code == 1
    assert [(r["missing"], r["role"]) for r in report["unknown_references"]] == [(ghost, "target")]


def test_audit_accepts_an_update_whose_save_is_in_a_later_segment(project: Path) -> None:
    memory = new_id()
    (project / ".eventmem" / "journal").mkdir(parents=True)
    write_segment(project, "aaaa0001.feature.jsonl", MemoryUpdated(id=new_id(), ts=now_iso(), memory=memory, title="t"))
    write_segment(project, "zzzz0002.main.jsonl", saved(memory))
    code, report = audit_json(project)
    assert code == 0, report
    assert report["unknown_references"] == []


def test_audit_counts_an_unknown_event_type_without_failing(project: Path) -> None:
    seed(project)
    line = {"type": "pinned", "id": new_id(), "ts": now_iso(), "memory": new_id(), "until": "forever"}
    with open(segment_of(project), "ab") as handle:
        handle.write(json.dumps(line).encode() + b"\n")
    result = replay(project, "audit")
    assert result.returncode == 0, result.stdout
    assert "1 event(s) of unknown type 'pinned'" in result.stdout
    _, report = audit_json(project)
    assert report["ok"] is True
    assert report["unknown_types"] == {"pinned": 1}
    assert report["counts"]["unknown_events"] == 1 and report["counts"]["events"] == 8


def test_audit_warns_about_a_torn_tail_without_failing(project: Path) -> None:
    seed(project)
    segment = segment_of(project)
    offset = segment.stat().st_size
    half = b'{"type":"saved","id":"01HALF'
    with open(segment, "ab") as handle:
        handle.write(half)
    code, report = audit_json(project)
    assert code == 0 and report["warnings"] == 1
    assert report["torn_tails"] == [{"segment": f"journal/{segment.name}", "offset": offset, "bytes": len(half)}]
    assert "torn tail" in replay(project, "audit").stdout


def test_audit_reads_archive_segments_too(project: Path) -> None:
    memory = new_id()
    archive = project / ".eventmem" / "archive"
    archive.mkdir(parents=True)
    (archive / "2026-01.jsonl").write_bytes(encode_event(saved(memory)))
    (project / ".eventmem" / "journal").mkdir()
    write_segment(project, "aaaa0001.main.jsonl", MemoryUpdated(id=new_id(), ts=now_iso(), memory=memory, title="t"))
    code, report = audit_json(project)
    assert code == 0, report
    assert report["counts"]["segments"] == 2 and report["counts"]["memories"] == 1


def test_eventmem_root_selects_the_project_and_root_flag_overrides_it(project: Path, tmp_path: Path) -> None:
    seed(project)
    broken = tmp_path / "broken"
    broken.mkdir()
    git(broken, "init", "-q", "-b", "main")
    ProjectPaths(broken).ensure()
    (broken / ".eventmem" / "journal" / "dddd0004.main.jsonl").write_bytes(b"garbage\n")
    env = {**os.environ, "EVENTMEM_ROOT": str(project)}
    result = replay(broken, "audit", "--json", env=env)
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    assert report["root"] == str(project.resolve()) and report["root_source"] == "env:EVENTMEM_ROOT"
    assert replay(tmp_path, "--root", str(broken), "audit", env=env).returncode == 1
    assert replay(tmp_path, "audit", "--root", str(broken), env=env).returncode == 1
    assert replay(broken, "audit").returncode == 1


def test_audit_of_a_project_without_memory_is_ok_and_empty(project: Path) -> None:
    code, report = audit_json(project)
    assert code == 0 and report["ok"] is True
    assert report["counts"]["segments"] == 0 and report["counts"]["events"] == 0


def test_replay_runs_from_a_checkout_where_eventmem_is_not_installed(project: Path) -> None:
    seed(project)
    # -S skips site-packages' .pth files (the editable install); the dependencies stay importable
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    probe = subprocess.run([sys.executable, "-S", "-c", "import eventmem"], cwd=project, env=env, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("eventmem is importable without site processing here")
    result = subprocess.run(
        [sys.executable, "-S", str(REPLAY), "audit"], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "ok: 0 error(s)" in result.stdout
