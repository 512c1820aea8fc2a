"""Moves keep a memory whole: an export read back into a fresh project through the real CLI is the
same memory, field by field, for every format that can carry the field; an import keeps when things
happened in the store it came from."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem
from conftest import reopen

from eventmem.core.query_rules import Filters
from eventmem.service import Memory

PEERS = Path(__file__).resolve().parent / "fixtures" / "peers"


def run(project: Path, *args: str) -> str:
    result = eventmem(project, *args)  # (in process: see tests/cli_runner.py)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def fresh_project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    return root


def every_memory(project: Path) -> dict[str, Memory]:
    """Every live memory by title."""
    service = reopen(project)
    try:
        return {m.title: m for m in (service.get(hit.id) for hit in service.search(limit=100))}
    finally:
        service.close()


def every_link(project: Path) -> set[tuple[str, str, str, float, str]]:
    """(source title, relation, target title, strength, context) of every live link."""
    service = reopen(project)
    try:
        out = set()
        for hit in service.search(limit=100):
            for step in service.related(hit.id, direction="out"):
                out.add((hit.title, step["relation"], step["title"], step["strength"], step["context"]))
        return out
    finally:
        service.close()


def seed(project: Path) -> None:
    service = reopen(project)
    try:
        queue = service.save(
            "The job queue is Postgres with SKIP LOCKED; no broker to run.",
            title="Job queue",
            summary="Postgres SKIP LOCKED is the queue.",
            kind="decision",
            tags=["queue", "postgres"],
            importance=0.8,
            metadata={"owner": "platform", "ticket": "OPS-12"},
            by="alice",
        )
        retries = service.save(
            "A failed job is retried three times with a growing delay.",
            title="Job retries",
            kind="convention",
            tags=["queue"],
            importance=0.6,
            by="bob",
        )
        service.update(retries.id, content="A failed job is retried five times with a growing delay.", by="carol")
        service.link(retries.id, queue.id, "depends_on", strength=0.8, context="the retry counter is a column")
    finally:
        service.close()


def carried(memory: Memory) -> dict[str, Any]:
    return {
        "kind": memory.kind,
        "content": memory.content,
        "summary": memory.summary,
        "tags": sorted(memory.tags),
        "importance": memory.importance,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


@pytest.mark.parametrize(("format_name", "target"), [("json", "dump.json"), ("markdown", "notes")])
def test_an_export_read_back_is_the_same_memory_field_by_field(tmp_path: Path, format_name: str, target: str) -> None:
    source = fresh_project(tmp_path, "source")
    seed(source)
    out = tmp_path / target
    run(source, "export", format_name, str(out))
    copy = fresh_project(tmp_path, "copy")
    run(copy, "import", format_name, str(out))

    before, after = every_memory(source), every_memory(copy)
    assert set(before) == set(after) == {"Job queue", "Job retries"}
    for title, original in before.items():
        moved = after[title]
        assert carried(moved) == carried(original), title
        assert moved.source.partition(":")[0] == format_name and original.id in moved.source
        wanted = {**(original.metadata or {}), **({"created_by": original.created_by} if format_name == "json" else {})}
        assert (moved.metadata or {}) == wanted, title
    assert after["Job retries"].updated_at > after["Job retries"].created_at  # changed after it was made
    assert (
        every_link(copy)
        == every_link(source)
        == {("Job retries", "depends_on", "Job queue", 0.8, "the retry counter is a column")}
    )


def test_a_server_memory_export_read_back_keeps_what_its_format_has_room_for(tmp_path: Path) -> None:
    """The official knowledge graph has no times, metadata or link strength: names, types, text,
    importance, tags and typed links come back."""
    source = fresh_project(tmp_path, "source")
    seed(source)
    out = tmp_path / "memory.jsonl"
    run(source, "export", "server-memory", str(out))
    copy = fresh_project(tmp_path, "copy")
    run(copy, "import", "server-memory", str(out))
    before, after = every_memory(source), every_memory(copy)
    for title, original in before.items():
        moved = after[title]
        assert (moved.kind, moved.content, sorted(moved.tags), moved.importance) == (
            original.kind,
            original.content,
            sorted(original.tags),
            original.importance,
        )
        assert moved.source == f"server-memory:{title}"
    assert {(s, r, t) for s, r, t, _, _ in every_link(copy)} == {("Job retries", "depends_on", "Job queue")}


def test_the_json_export_names_the_text_content_and_a_dump_that_says_body_still_imports(tmp_path: Path) -> None:
    source = fresh_project(tmp_path, "source")
    seed(source)
    out = tmp_path / "dump.json"
    run(source, "export", "json", str(out))
    data = json.loads(out.read_text(encoding="utf-8"))
    assert all("content" in m and "body" not in m for m in data["memories"])
    for memory in data["memories"]:
        memory["body"] = memory.pop("content")
    out.write_text(json.dumps(data), encoding="utf-8")
    copy = fresh_project(tmp_path, "copy")
    run(copy, "import", "json", str(out))
    assert every_memory(copy)["Job queue"].content == every_memory(source)["Job queue"].content


def test_an_imported_memory_keeps_when_it_was_made_and_is_found_by_time(project: Path) -> None:
    """mcp-memory-service's times become the memory's own: recency, time filters and the listing
    work on them; when it was imported stays in the journal's event."""
    store = PEERS / "mcp-memory-service" / "memory.db"
    run(project, "import", "mcp-memory-service", str(store))
    with contextlib.closing(sqlite3.connect(store)) as db:  # (a connection's own `with` commits, never closes)
        made = dict(db.execute("SELECT content_hash, created_at_iso FROM memories WHERE deleted_at IS NULL"))
    service = reopen(project)
    try:
        found = [service.get(hit.id) for hit in service.search(limit=100)]
        assert len(found) == len(made)
        for memory in found:
            assert memory.created_at[:23] == made[memory.source.partition(":")[2]][:23], memory.title
        latest = max(made.values())
        after = datetime.fromisoformat(min(made.values()).replace("Z", "+00:00")) - timedelta(seconds=1)
        before = datetime.fromisoformat(latest.replace("Z", "+00:00")) + timedelta(seconds=1)
        window = Filters(created_after=after.isoformat(), created_before=before.isoformat())
        assert len(service.search(limit=100, filters=window)) == len(made)  # (imported long after: none would be)
        saved = [e for e in service.history(found[0].id) if e["type"] == "saved"]
        assert saved[0]["ts"] > latest and saved[0]["created_at"][:23] == found[0].created_at[:23]
    finally:
        service.close()


def test_an_mcp_memory_service_memory_gets_the_title_its_first_sentence_gives(project: Path) -> None:
    run(project, "import", "mcp-memory-service", str(PEERS / "mcp-memory-service" / "memory.db"))
    story = json.loads((PEERS / "mcp-memory-service" / "manifest.json").read_text(encoding="utf-8"))
    found = every_memory(project)
    for wanted in story["memories"]:
        memory = found[wanted["title"]]
        assert memory.content == wanted["content"]
