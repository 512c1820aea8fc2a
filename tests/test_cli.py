"""Every ``eventmem`` command, run as a user runs it: a real process, in a real project directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from cli_runner import eventmem, ok_json, only_segment, save, search_ids
from conftest import journal_bytes, write_events

from eventmem.core.codec import decode_line
from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.runner.snapshots import read_snapshot
from eventmem.service import Memory

MEMORY_FIELDS = set(Memory.__struct_fields__) - {"metadata", "source"}
"""A memory's fields as the CLI shows them (metadata and source are left out when it has none)."""


def test_init_creates_the_memory_directory_and_says_which_root_it_chose(project: Path) -> None:
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    data = ok_json(nested, "init")
    assert data["root"] == str(project.resolve())
    assert data["root_source"] == "marker:.git"
    assert (project / ".eventmem" / "config.toml").is_file()
    assert "cache/" in (project / ".eventmem" / ".gitignore").read_text(encoding="utf-8")
    again = eventmem(project, "init")
    assert again.returncode == 0, again.stderr
    assert "marker:.eventmem" in again.stdout


def test_save_prints_the_memory_in_the_shape_the_store_memory_tool_returns(project: Path) -> None:
    memory = save(
        project,
        "We chose msgspec for the journal codec because it is fast and strict",
        "--title",
        "Codec choice",
        "--tag",
        "Codec",
        "--tag",
        "json",
        "--type",
        "decision",
        "--importance",
        "0.8",
        "--by",
        "alice",
    )
    assert set(memory) == MEMORY_FIELDS
    assert memory["kind"] == "decision"
    assert memory["title"] == "Codec choice"
    assert memory["tags"] == ["codec", "json"]
    assert memory["importance"] == 0.8
    assert memory["created_by"] == "alice"
    assert memory["status"] == "live"
    assert memory["ttl_seconds"] is None and memory["expires_at"] is None
    assert memory["id"].encode() in journal_bytes(project)


def test_save_without_json_prints_one_line_and_nothing_else(project: Path) -> None:
    result = eventmem(project, "save", "Run the tests with pytest -q", "--by", "bob")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("saved ")


def test_save_reads_the_text_from_stdin_when_given_a_dash(project: Path) -> None:
    text = "Deploy checklist:\n1. bump the version\n2. tag the release — naïve ünïcode kept raw"
    memory = save(project, "-", stdin=text)
    assert memory["content"] == text
    assert "naïve ünïcode".encode() in journal_bytes(project)


def test_save_with_a_ttl_gives_the_memory_an_expiry_that_long_term_memories_lack(project: Path) -> None:
    memory = save(project, "The staging database is down until the migration ends", "--ttl", "3600")
    assert memory["ttl_seconds"] == 3600
    created = datetime.fromisoformat(memory["created_at"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(memory["expires_at"].replace("Z", "+00:00"))
    assert abs((expires - created).total_seconds() - 3600) < 0.01


def test_search_filters_by_type_tag_and_importance_before_the_cut(project: Path) -> None:
    fix = save(
        project,
        "Postgres connection pool exhausted under load; raised the pool size to 50",
        *("--type", "fix", "--tag", "db", "--importance", "0.9"),
    )
    decision = save(
        project,
        "Use Postgres advisory locks for the job queue",
        *("--type", "decision", "--tag", "db", "--tag", "queue", "--importance", "0.4"),
    )
    frontend = save(project, "The frontend uses pnpm workspaces", "--type", "convention", "--tag", "frontend")
    ranked = search_ids(project, "postgres")
    assert set(ranked[:2]) == {fix["id"], decision["id"]}
    assert search_ids(project, "postgres", "--type", "fix") == [fix["id"]]
    assert search_ids(project, "postgres", "--tag", "queue") == [decision["id"]]
    important = search_ids(project, "postgres", "--min-importance", "0.8")
    assert fix["id"] in important and decision["id"] not in important
    assert search_ids(project, "postgres", "--limit", "1") == ranked[:1]
    assert frontend["id"] not in search_ids(project, "postgres", "--tag", "db")


def test_tags_and_types_may_be_given_with_commas_and_under_the_tools_names(project: Path) -> None:
    """``--tags a,b`` and ``--kind`` (the MCP tools' names) work like ``--tag a --tag b`` and ``--type``."""
    decision = save(project, "We chose FTS5 for keyword search.", "--tags", "search, decision", "--kind", "decision")
    assert decision["tags"] == ["search", "decision"] and decision["kind"] == "decision"
    fix = save(
        project, "Fix: set polling on NFS for the watcher.", "--tag", "nfs,watcher", "--tag", "fs", "--type", "fix"
    )
    assert fix["tags"] == ["nfs", "watcher", "fs"] and fix["kind"] == "fix"
    assert search_ids(project, "search watcher", "--kind", "fix,decision") == [decision["id"], fix["id"]]
    assert search_ids(project, "nfs", "--tags", "nfs,fs") == [fix["id"]]
    updated = ok_json(project, "update", decision["id"], "--tags", "db,search")["memory"]
    assert updated["tags"] == ["db", "search"]


def test_search_modes_keyword_and_vector_each_find_the_memory(project: Path) -> None:
    target = save(project, "The frontend uses pnpm workspaces for its packages")
    save(project, "Backups run nightly at two in the morning")
    assert search_ids(project, "pnpm", "--mode", "keyword") == [target["id"]]
    assert search_ids(project, "pnpm workspaces packages", "--mode", "vector")[0] == target["id"]
    assert search_ids(project, "pnpm workspaces", "--mode", "hybrid")[0] == target["id"]


@pytest.mark.parametrize(
    "command",
    [("search", "note", "number", "249", "--mode", "keyword"), ("show", "LAST"), ("stats",), ("log", "--limit", "3")],
    ids=lambda command: command[0],
)
def test_a_read_after_a_long_tail_came_in_leaves_a_snapshot_that_covers_it(
    project: Path, command: tuple[str, ...]
) -> None:
    save(project, "The deploy pipeline runs the smoke tests before the canary")  # (its snapshot)
    merged = [  # as a merged branch brings them: lines no process of this clone has read
        MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=f"Queue worker note number {i}")
        for i in range(250)
    ]
    write_events(project, merged)
    result = eventmem(project, *(merged[-1].memory if word == "LAST" else word for word in command), "--json")
    assert result.returncode == 0, result.stderr
    assert merged[-1].memory in result.stdout or command[0] == "stats"
    snapshot = read_snapshot(project / ".eventmem" / "cache" / "snapshot.bin")
    segments = {f"journal/{path.name}": path.stat().st_size for path in (project / ".eventmem" / "journal").glob("*")}
    assert {name: cursor.offset for name, cursor in snapshot.cursors.items()} == segments


def test_search_without_json_prints_one_line_per_hit_or_says_nothing_matched(project: Path) -> None:
    memory = save(project, "Releases are cut from the main branch", "--tag", "release")
    result = eventmem(project, "search", "releases", "main", "branch")
    assert result.returncode == 0, result.stderr
    assert memory["id"] in result.stdout and "#release" in result.stdout
    empty = eventmem(project, "search", "zebra", "--mode", "keyword")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == "no memories match\n"


def test_show_prints_one_memory_for_people_and_as_json(project: Path) -> None:
    memory = save(project, "Logs go to stderr, never stdout", "--title", "Logging rule")
    human = eventmem(project, "show", memory["id"])
    assert human.returncode == 0, human.stderr
    assert memory["id"] in human.stdout
    assert "Logging rule" in human.stdout and "Logs go to stderr, never stdout" in human.stdout
    data = ok_json(project, "show", memory["id"])
    assert data == {"status": "success", "memory": memory}


def test_update_changes_only_the_given_fields_and_ttl_zero_makes_it_long_term(project: Path) -> None:
    memory = save(project, "The cache lives for 5 minutes", "--ttl", "600", "--tag", "cache")
    data = ok_json(
        project, "update", memory["id"], "--content", "The cache lives for 10 minutes", "--importance", "0.9"
    )
    assert data["status"] == "success"
    updated = data["memory"]
    assert set(updated) == MEMORY_FIELDS
    assert updated["content"] == "The cache lives for 10 minutes"
    assert updated["importance"] == 0.9
    assert updated["tags"] == ["cache"] and updated["ttl_seconds"] == 600
    assert updated["created_at"] == memory["created_at"]
    updated = ok_json(project, "update", memory["id"], "--ttl", "0", "--type", "decision")["memory"]
    assert updated["ttl_seconds"] is None and updated["expires_at"] is None
    assert updated["kind"] == "decision"
    assert ok_json(project, "show", memory["id"])["memory"] == updated
    human = eventmem(project, "update", memory["id"], "--title", "Cache lifetime")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith(f"updated {memory['id']}")


def test_metadata_given_as_key_value_options_is_saved_shown_and_replaced_by_update(project: Path) -> None:
    memory = save(project, "The deploy job pins node 20", "--meta", "ticket=OPS-12", "--meta", "team=infra")
    assert memory["metadata"] == {"ticket": "OPS-12", "team": "infra"}
    human = eventmem(project, "show", memory["id"])
    assert "meta:     team = infra" in human.stdout and "meta:     ticket = OPS-12" in human.stdout
    updated = ok_json(project, "update", memory["id"], "--meta", "ticket=OPS-13")["memory"]
    assert updated["metadata"] == {"ticket": "OPS-13"}
    assert updated["content"] == "The deploy job pins node 20"


def test_a_malformed_or_oversized_metadata_option_is_refused_and_writes_nothing(project: Path) -> None:
    before = journal_bytes(project)
    for flags in (["--meta", "no-equals-sign"], ["--meta", "bad key!=x"], ["--meta", "k=" + "v" * 5000]):
        result = eventmem(project, "save", "A memory with bad metadata", *flags)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
        assert "meta" in result.stderr.lower()
    assert journal_bytes(project) == before


def test_delete_hides_the_memory_from_show_and_search_but_keeps_its_history(project: Path) -> None:
    memory = save(project, "Use tabs for indentation")
    data = ok_json(project, "delete", memory["id"], "--reason", "we switched to spaces")
    assert data == {"status": "success", "id": memory["id"], "deleted": True}
    shown = eventmem(project, "show", memory["id"])
    assert shown.returncode != 0
    assert f"memory '{memory['id']}' was deleted at " in shown.stderr  # not "no memory": it says what happened
    assert "(reason: we switched to spaces)" in shown.stderr and f"eventmem restore {memory['id']}" in shown.stderr
    assert memory["id"] not in search_ids(project, "tabs indentation")
    history = ok_json(project, "log", memory["id"])
    assert [event["type"] for event in history] == ["saved", "deleted"]
    assert history[1]["reason"] == "we switched to spaces"


def test_log_lists_all_events_or_one_memorys_with_where_each_line_is(project: Path) -> None:
    first = save(project, "First note about the build")
    second = save(project, "Second note about the tests")
    ok_json(project, "update", first["id"], "--title", "Build")
    every = ok_json(project, "log")
    assert [event["type"] for event in every] == ["saved", "saved", "updated"]
    data = only_segment(project).read_bytes()
    for event in every:
        assert event["segment"] == f"journal/{only_segment(project).name}"
        line = data[event["offset"] :].split(b"\n", 1)[0]
        assert decode_line(line).id == event["id"]
    one = ok_json(project, "log", first["id"])
    assert [event["type"] for event in one] == ["saved", "updated"]
    assert all(event["memory"] == first["id"] for event in one)
    human = eventmem(project, "log")
    assert human.returncode == 0, human.stderr
    assert len(human.stdout.splitlines()) == 3 and second["id"] in human.stdout
    missing = eventmem(project, "log", "01NOSUCHMEMORY")
    assert missing.returncode == 1
    assert "no history for 01NOSUCHMEMORY" in missing.stdout


def test_stats_counts_memories_by_status_type_and_tag(project: Path) -> None:
    save(project, "Pool size is 50", "--type", "fix", "--tag", "db")
    gone = save(project, "Use sqlite for everything", "--type", "decision", "--tag", "db")
    ok_json(project, "delete", gone["id"])
    stats = ok_json(project, "stats")
    assert stats["root"] == str(project.resolve())
    assert stats["memories"] == 1
    assert stats["by_status"] == {"live": 1, "deleted": 1}
    assert stats["by_kind"] == {"fix": 1}
    assert stats["top_tags"] == {"db": 1}
    assert stats["events"] == 3 and stats["segments"] == 1
    assert stats["corrupt_lines"] == []
    human = eventmem(project, "stats")
    assert human.returncode == 0, human.stderr
    assert "1 live" in human.stdout


def test_rebuild_after_dropping_the_cache_gives_the_same_answers(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", "0")  # scores must not move with the clock
    for text in ("Postgres pool size is 50", "Redis is the job queue", "pnpm workspaces in the frontend"):
        save(project, text)
    ok_json(project, "update", save(project, "Postgres runs version 15")["id"], "--content", "Postgres runs 16")
    before = ok_json(project, "search", "postgres queue")
    shutil.rmtree(project / ".eventmem" / "cache")
    data = ok_json(project, "rebuild")
    assert data["status"] == "success" and data["events"] == 5
    assert ok_json(project, "search", "postgres queue") == before
    human = eventmem(project, "rebuild")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("rebuilt from 5 events")


def test_doctor_reports_the_root_and_why_it_was_chosen(project: Path, tmp_path: Path) -> None:
    save(project, "Something worth remembering")
    nested = project / "docs"
    nested.mkdir()
    report = ok_json(nested, "doctor")
    assert report["root"] == str(project.resolve()) and report["root_source"] == "marker:.eventmem"
    assert report["healthy"] is True and report["corrupt_lines"] == []
    assert [s["name"] for s in report["segments"]] == [f"journal/{only_segment(project).name}"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_flag = ok_json(elsewhere, "doctor", "--root", str(project))
    assert by_flag["root"] == str(project.resolve()) and by_flag["root_source"] == "flag:--root"
    env = {**os.environ, "EVENTMEM_ROOT": str(project)}
    by_env = eventmem(elsewhere, "doctor", env=env)
    assert by_env.returncode == 0, by_env.stderr
    assert f"root:        {project.resolve()}  (chosen by env:EVENTMEM_ROOT)" in by_env.stdout
    assert by_env.stdout.rstrip().endswith("healthy")


def test_doctor_in_a_project_with_no_memory_yet_says_so_and_creates_nothing(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q", str(fresh)], check=True)
    result = eventmem(fresh, "doctor")
    assert result.returncode == 0, result.stderr
    assert "(not created yet)" in result.stdout
    assert "writer:      (none yet: given on the first save) on branch" in result.stdout
    assert not (fresh / ".eventmem").exists()


def test_doctor_exits_1_and_names_the_corrupt_line_even_when_a_snapshot_covers_it(project: Path) -> None:
    save(project, "A memory before the damage")
    segment = only_segment(project)
    offset = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(b'{"type":"saved","id":"01BROKEN\n')
    save(project, "A memory after the damage")  # the bad line is now in the middle of the segment
    save(project, "One more")  # this process catches up past the bad line and snapshots what it read
    assert (project / ".eventmem" / "cache" / "snapshot.bin").exists()
    report = eventmem(project, "doctor", "--json")
    assert report.returncode == 1
    data = json.loads(report.stdout)
    assert data["healthy"] is False
    assert [(c["segment"], c["offset"]) for c in data["corrupt_lines"]] == [(f"journal/{segment.name}", offset)]
    human = eventmem(project, "doctor")
    assert human.returncode == 1
    assert f"CORRUPT:     journal/{segment.name} at byte {offset}" in human.stdout


def test_search_json_stays_pure_json_when_the_journal_has_a_corrupt_line(project: Path) -> None:
    memory = save(project, "Keep stdout for results only")
    with open(only_segment(project), "ab") as handle:
        handle.write(b"not json at all\n")
    save(project, "Another memory after the bad line")
    result = eventmem(project, "search", "stdout results", "--json")
    assert result.returncode == 0, result.stderr
    assert memory["id"] in [hit["id"] for hit in json.loads(result.stdout)["results"]]
    assert "corrupt line" in result.stderr


def test_commands_on_an_unknown_id_fail_clearly_and_write_nothing(project: Path) -> None:
    save(project, "The only memory")
    before = journal_bytes(project)
    for args in (["show", "01NOPE"], ["update", "01NOPE", "--title", "x"], ["delete", "01NOPE"]):
        result = eventmem(project, *args)
        assert result.returncode != 0, args
        assert "no memory with id '01NOPE'" in result.stderr
        assert result.stdout == ""
    assert journal_bytes(project) == before


def test_invalid_input_fails_with_a_clear_message_on_stderr_and_writes_nothing(project: Path) -> None:
    memory = save(project, "A valid memory")
    before = journal_bytes(project)
    cases: list[tuple[list[str], str, str]] = [
        (["save", ""], "", "content: expected a text with a visible character"),
        (["save", "   "], "", "content: expected a text with a visible character"),
        (["save", "-"], "", "content: expected a text with a visible character"),
        (["save", "text", "--type", "bogus"], "", "unknown type 'bogus'"),
        (["save", "text", "--importance", "2"], "", "importance: expected a number from 0 to 1, got 2"),
        (["save", "text", "--ttl", "-5"], "", "ttl_seconds: expected a whole number from 1 to"),
        (["update", memory["id"], "--content", ""], "", "content: expected a text with a visible character"),
        (["update", memory["id"], "--type", "bogus"], "", "unknown type 'bogus'"),
        (["search", "x", "--type", "bogus"], "", "bogus"),
    ]
    for args, stdin, message in cases:
        result = eventmem(project, *args, stdin=stdin)
        assert result.returncode != 0, args
        assert message in result.stderr, (args, result.stderr)
        assert result.stdout == "", args
    assert journal_bytes(project) == before


def test_an_error_with_json_prints_an_error_object_and_exits_non_zero(project: Path) -> None:
    result = eventmem(project, "show", "01NOPE", "--json")
    assert result.returncode != 0
    data = json.loads(result.stdout)
    assert data["status"] == "error" and "01NOPE" in data["error"]
    assert "no memory with id" in result.stderr
