"""Importers and exporters through the real CLI (subprocesses): the stores other memory servers
wrote (``tests/fixtures/peers``, each with the manifest of what was saved into it), round trips
through every export format, and hostile input."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem
from conftest import reopen

from eventmem.core.events import KINDS
from eventmem.interchange.mapping import body_and_metadata, memory_id_for
from eventmem.service import Memory

PEERS = Path(__file__).resolve().parent / "fixtures" / "peers"
STORES = {
    "server-memory": "server-memory/memory.jsonl",
    "memorygraph": "memorygraph/memory.db",
    "mcp-memory-service": "mcp-memory-service/memory.db",
    "markdown": "basic-memory/notes",
}
MANIFESTS = {
    "server-memory": "server-memory",
    "memorygraph": "memorygraph",
    "mcp-memory-service": "mcp-memory-service",
    "markdown": "basic-memory",
}


def run(project: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = eventmem(project, *args)  # (in process: see tests/cli_runner.py)
    assert result.returncode == code, (result.stdout, result.stderr)
    return result


def import_json(project: Path, *args: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(run(project, "import", *args, "--json").stdout)
    return report


def memories(project: Path) -> list[Memory]:
    service = reopen(project)
    try:
        return [service.get(hit.id) for hit in service.search(limit=100)]
    finally:
        service.close()


def links(project: Path) -> set[tuple[str, str, str]]:
    """(source title, relation, target title) of every live link."""
    service = reopen(project)
    try:
        out = set()
        for hit in service.search(limit=100):
            for step in service.related(hit.id, direction="out"):
                out.add((hit.title, step["relation"], step["title"]))
        return out
    finally:
        service.close()


def journal_lines(project: Path) -> list[dict[str, Any]]:
    folder = project / ".eventmem" / "journal"
    if not folder.is_dir():
        return []
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def manifest(peer: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PEERS / MANIFESTS[peer] / "manifest.json").read_text(encoding="utf-8"))
    return data


def find(found: list[Memory], content: str) -> Memory:
    matches = [m for m in found if content in m.content]
    assert len(matches) == 1, (content, [m.content for m in found])
    return matches[0]


@pytest.mark.parametrize("peer", list(STORES))
def test_every_memory_tag_and_link_of_a_peer_store_arrives(project: Path, peer: str) -> None:
    report = import_json(project, peer, str(PEERS / STORES[peer]))
    story = manifest(peer)
    found = memories(project)
    assert report["added"] == len(story["memories"]) == len(found)
    assert not report["dryRun"]
    titles = {}
    for wanted in story["memories"]:
        memory = find(found, wanted["content"])
        assert set(wanted["tags"]) <= set(memory.tags), (wanted, memory.tags)
        assert memory.kind == (wanted["type"] if wanted["type"] in KINDS else "general"), (wanted, memory.kind)
        if peer != "markdown":  # basic-memory has no importance
            assert memory.importance == pytest.approx(wanted["importance"])
        assert memory.title == wanted["title"]  # (mcp-memory-service: its text's first sentence)
        titles[wanted["title"]] = memory.title
    expected = set()
    for link in story["links"]:
        relation = link["relation"].lower()
        relation = "solves" if (peer, relation) == ("memorygraph", "fixes") else relation  # (it has no FIXES)
        expected.add((titles[link["from"]], relation, titles[link["to"]]))
    # mcp-memory-service keeps no links of its own making (its memory_graph table is empty)
    assert links(project) == (set() if peer == "mcp-memory-service" else expected)


@pytest.mark.parametrize("peer", list(STORES))
def test_a_second_import_of_the_same_store_changes_nothing_and_the_dry_run_says_so(project: Path, peer: str) -> None:
    import_json(project, peer, str(PEERS / STORES[peer]))
    before = journal_lines(project)
    again = import_json(project, peer, str(PEERS / STORES[peer]), "--dry-run")
    third = import_json(project, peer, str(PEERS / STORES[peer]))
    count = len(manifest(peer)["memories"])
    assert (again["added"], again["updated"], again["unchanged"], again["dryRun"]) == (0, 0, count, True)
    assert (third["added"], third["updated"], third["events"]) == (0, 0, 0)
    assert journal_lines(project) == before


def test_a_dry_run_writes_nothing_and_says_what_would_be_added(project: Path) -> None:
    report = import_json(project, "server-memory", str(PEERS / STORES["server-memory"]), "--dry-run")
    assert (report["added"], report["linksAdded"], report["dryRun"]) == (12, 5, True)
    assert journal_lines(project) == []
    assert (
        "dry run: nothing written (17 event(s) would be appended)"
        in run(project, "import", "server-memory", str(PEERS / STORES["server-memory"]), "--dry-run").stdout
    )


def test_a_newer_copy_of_a_store_updates_what_changed_and_adds_what_is_new(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "memory.jsonl"
    shutil.copy(PEERS / STORES["server-memory"], store)
    import_json(project, "server-memory", str(store))
    lines = store.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["observations"] = ["Advisory locks, and a lease table for visibility.", "importance 0.95", "tags: scheduler"]
    lines[0] = json.dumps(first)
    lines.append(json.dumps({"type": "entity", "name": "New entity", "entityType": "fix", "observations": ["Newer."]}))
    store.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = import_json(project, "server-memory", str(store))
    assert (report["added"], report["updated"], report["unchanged"]) == (1, 1, 11)
    memory = find(memories(project), "lease table")
    assert (memory.title, memory.importance, memory.tags) == (first["name"], 0.95, ["scheduler"])


def test_an_import_is_one_batch_by_one_writer_that_diff_shows_as_one_change(project: Path) -> None:
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "start"], cwd=project, check=True)
    run(project, "import", "memorygraph", str(PEERS / STORES["memorygraph"]))
    events = journal_lines(project)
    writers = {event["by"] for event in events}
    assert len(events) == 17 and len(writers) == 1
    (writer,) = writers
    assert writer.startswith("import:memorygraph@")
    assert len({event["ts"] for event in events}) == 1
    diff = run(project, "diff")
    assert writer in diff.stdout


def test_what_has_no_field_is_kept_in_metadata_with_the_original_id(project: Path) -> None:
    run(project, "import", "memorygraph", str(PEERS / STORES["memorygraph"]))
    story = manifest("memorygraph")
    found = memories(project)
    for wanted in story["memories"]:
        memory = find(found, wanted["content"])
        metadata = memory.metadata
        assert memory.source == f"memorygraph:{wanted['peer_id']}"
        assert "confidence" in metadata and "created_at" in metadata
    stripe = find(found, "Stripe API version")
    assert stripe.metadata["original_type"] == "technology"


def round_trip(project: Path, tmp_path: Path, out_format: str, in_format: str, target: str) -> Path:
    run(project, "import", "server-memory", str(PEERS / STORES["server-memory"]))
    out = tmp_path / target
    run(project, "export", out_format, str(out))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=fresh, check=True)
    run(fresh, "import", in_format, str(out))
    return fresh


def same_memories(one: Path, other: Path) -> None:
    def shape(project: Path) -> set[tuple[str, str, str, tuple[str, ...], float]]:
        return {
            (m.title, m.kind, body_and_metadata(m.content)[0].strip(), tuple(sorted(m.tags)), m.importance)
            for m in memories(project)
        }

    assert shape(one) == shape(other)
    assert links(one) == links(other)
    assert len(links(one)) == 5


@pytest.mark.parametrize(
    ("out_format", "in_format", "target"),
    [
        ("server-memory", "server-memory", "memory.jsonl"),
        ("markdown", "markdown", "notes"),
        ("json", "json", "dump.json"),
    ],
)
def test_export_then_import_into_a_fresh_project_gives_the_same_memories_tags_and_links(
    project: Path, tmp_path: Path, out_format: str, in_format: str, target: str
) -> None:
    fresh = round_trip(project, tmp_path, out_format, in_format, target)
    same_memories(project, fresh)


def test_the_knowledge_graph_export_is_the_official_servers_jsonl(project: Path, tmp_path: Path) -> None:
    run(project, "import", "server-memory", str(PEERS / STORES["server-memory"]))
    run(project, "export", "server-memory", str(tmp_path / "out.jsonl"))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    entities = [line for line in lines if line["type"] == "entity"]
    relations = [line for line in lines if line["type"] == "relation"]
    assert all(set(e) == {"type", "name", "entityType", "observations"} for e in entities)
    assert all(set(r) == {"type", "from", "to", "relationType"} for r in relations)
    names = {e["name"] for e in entities}
    assert all(r["from"] in names and r["to"] in names for r in relations)
    original = [json.loads(line) for line in (PEERS / STORES["server-memory"]).read_text(encoding="utf-8").splitlines()]
    assert {(r["from"], r["relationType"], r["to"]) for r in relations} == {
        (r["from"], r["relationType"], r["to"]) for r in original if r["type"] == "relation"
    }


def test_the_markdown_export_is_one_note_per_memory_with_wiki_links(project: Path, tmp_path: Path) -> None:
    run(project, "import", "server-memory", str(PEERS / STORES["server-memory"]))
    run(project, "export", "markdown", str(tmp_path / "notes"))
    notes = sorted((tmp_path / "notes").glob("*.md"))
    assert len(notes) == 12
    text = (tmp_path / "notes" / "Idempotency keys on the invoice endpoint.md").read_text(encoding="utf-8")
    assert text.startswith('---\ntitle: "Idempotency keys on the invoice endpoint"\n')
    assert "- solves [[Invoices duplicated after retry]]" in text


def test_the_ai_folder_export_is_read_back_by_import_pmp(project: Path, tmp_path: Path) -> None:
    run(project, "save", "Use SQLite for the cache.", "--type", "decision", "--title", "SQLite cache")
    run(project, "save", "Ship the importer.", "--type", "current_task")
    run(project, "export", "ai", str(tmp_path / "ai"))
    assert "Use SQLite for the cache." in (tmp_path / "ai" / "decisions.md").read_text(encoding="utf-8")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    run(fresh, "import", "pmp", str(tmp_path / "ai"))
    contents = {m.kind: m.content for m in memories(fresh)}
    assert "Use SQLite for the cache." in contents["decision"]
    assert "Ship the importer." in contents["current_task"]


def test_instruction_files_become_one_convention_per_section(project: Path) -> None:
    (project / "CLAUDE.md").write_text(
        "# Project rules\n\nBe brief.\n\n## Testing\n\nRun pytest -q.\n\n```\n# not a heading\n```\n\n"
        "## Style\n\nRuff.\n",
        encoding="utf-8",
    )
    (project / ".cursor" / "rules").mkdir(parents=True)
    (project / ".cursor" / "rules" / "python.mdc").write_text(
        '---\ndescription: Python rules\nglobs: "*.py"\nalwaysApply: true\n---\nUse type hints everywhere.\n',
        encoding="utf-8",
    )
    report = import_json(project, "instructions", ".")
    found = {m.title: m for m in memories(project)}
    assert report["added"] == 4
    assert set(found) == {"Project rules", "Project rules › Testing", "Project rules › Style", "python.mdc"}
    assert all(m.kind == "convention" and "instructions" in m.tags for m in found.values())
    assert "# not a heading" in found["Project rules › Testing"].content
    assert found["python.mdc"].metadata["globs"] == "*.py"


# -- hostile input ----------------------------------------------------------------------------------


def test_malformed_jsonl_lines_are_reported_by_line_and_the_rest_is_imported(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "memory.jsonl"
    store.write_text(
        '{"type":"entity","name":"Good","entityType":"fix","observations":["fine"]}\n'
        "{not json\n"
        '{"type":"entity","name":"Bad","entityType":"fix","observations":"not a list"}\n'
        "[1, 2]\n",
        encoding="utf-8",
    )
    report = import_json(project, "server-memory", str(store))
    assert report["added"] == 1
    assert any(p.startswith("memory.jsonl line 2: not JSON") for p in report["problems"])
    assert any(p.startswith("memory.jsonl line 3: entity 'Bad'") for p in report["problems"])
    assert any(p.startswith("memory.jsonl line 4: not a JSON object") for p in report["problems"])


@pytest.mark.parametrize(
    ("peer", "content", "message"),
    [
        ("mcp-memory-service", "memorygraph", "has no memories table"),
        ("memorygraph", "mcp-memory-service", "has no nodes, relationships table"),
        ("memorygraph", b"not a database at all, just text", "is not an SQLite database"),
        ("memorygraph", "truncated", "damaged or truncated"),
        ("server-memory", b"\x00\x01\x02 binary", "nothing could be imported"),
    ],
)
def test_a_store_of_the_wrong_format_or_a_damaged_one_is_refused_in_one_line_and_nothing_is_written(
    project: Path, tmp_path: Path, peer: str, content: str | bytes, message: str
) -> None:
    store = tmp_path / "store.db"
    if isinstance(content, bytes):
        store.write_bytes(content)
    elif content == "truncated":
        data = (PEERS / STORES["memorygraph"]).read_bytes()
        store.write_bytes(data[: len(data) // 3])
    else:
        shutil.copy(PEERS / STORES[content], store)
    result = run(project, "import", peer, str(store), code=2)
    assert message in result.stderr and "store.db" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert journal_lines(project) == []


def test_a_store_locked_by_its_server_is_read_as_it_is(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    shutil.copy(PEERS / STORES["memorygraph"], store)
    holder = sqlite3.connect(store)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        report = import_json(project, "memorygraph", str(store))
    finally:
        holder.rollback()
        holder.close()
    assert report["added"] == 12


def test_a_note_with_broken_frontmatter_is_reported_and_the_others_are_imported(project: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    shutil.copytree(PEERS / STORES["markdown"], notes)
    (notes / "memories" / "Broken.md").write_text("---\ntitle: 'unclosed\n---\n\nText.\n", encoding="utf-8")
    report = import_json(project, "markdown", str(notes))
    assert report["added"] == 12
    assert (
        "memories/Broken.md line 2: an unclosed single-quoted value: the frontmatter is broken (skipped)"
        in (report["problems"])
    )


def test_a_symbolic_link_is_refused_and_nothing_is_written(project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(PEERS / STORES["server-memory"])
    result = run(project, "import", "server-memory", str(link), code=2)
    assert "symbolic link" in result.stderr
    assert journal_lines(project) == []


def test_secrets_in_imported_text_are_scrubbed_like_every_save(project: Path, tmp_path: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    store = tmp_path / "memory.jsonl"
    entity = {"type": "entity", "name": "Deploy", "entityType": "workflow", "observations": [f"token {token} here"]}
    store.write_text(json.dumps(entity) + "\n", encoding="utf-8")
    import_json(project, "server-memory", str(store))
    assert all(token not in path.read_text() for path in (project / ".eventmem" / "journal").glob("*.jsonl"))
    again = import_json(project, "server-memory", str(store), "--dry-run")
    assert (again["added"], again["updated"], again["unchanged"]) == (0, 0, 1)


def test_a_memory_over_the_size_limit_is_reported_and_left_out(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "memory.jsonl"
    huge = {"type": "entity", "name": "Huge", "entityType": "fix", "observations": ["x" * 70_000]}
    small = {"type": "entity", "name": "Small", "entityType": "fix", "observations": ["y"], "title": "z" * 300}
    long_title = {"type": "entity", "name": "T" * 300, "entityType": "fix", "observations": ["t"]}
    store.write_text("\n".join(json.dumps(e) for e in (huge, small, long_title)) + "\n", encoding="utf-8")
    report = import_json(project, "server-memory", str(store))
    assert report["added"] == 2
    assert (
        "memory.jsonl line 1: content is 70,000 bytes; the limit is 65,536 (max_memory_bytes) (skipped)"
        in (report["problems"])
    )
    assert "memory.jsonl line 3: title cut to 200 characters" in report["problems"]
    assert {len(m.title) for m in memories(project)} == {5, 200}


def test_an_unknown_format_is_refused_naming_the_known_ones(project: Path) -> None:
    result = run(project, "import", "evernote", "x", code=2)
    assert "unknown format 'evernote'; choose one of: server-memory, memorygraph" in result.stderr


def test_import_pmp_of_an_ai_folder_still_works_as_documented(project: Path) -> None:
    (project / ".ai").mkdir()
    (project / ".ai" / "decisions.md").write_text(
        "# Decisions\n\n## 2025-03-02 — Use uv\n\nFaster.\n", encoding="utf-8"
    )
    out = run(project, "import", "pmp", ".ai").stdout
    assert "event(s) appended" in out
    assert any("Faster." in m.content for m in memories(project))


# -- the JSON exports of memorygraph and mcp-memory-service, and options --------------------------------


def memorygraph_export(tmp_path: Path) -> Path:
    """The fixture's database as ``memorygraph export`` writes it (format 2.0: memories with their
    properties, relationships with from_memory_id, to_memory_id, type and properties)."""
    db = sqlite3.connect(f"file:{PEERS / STORES['memorygraph']}?mode=ro", uri=True)
    try:
        nodes = [json.loads(row[0]) for row in db.execute("SELECT properties FROM nodes WHERE label = 'Memory'")]
        rows = db.execute("SELECT from_id, to_id, rel_type, properties FROM relationships").fetchall()
    finally:
        db.close()
    keep = ("id", "type", "title", "content", "summary", "tags", "importance", "confidence", "created_at", "updated_at")
    data = {
        "format_version": "2.0",
        "export_version": "1.0",
        "backend_type": "sqlite",
        "memory_count": len(nodes),
        "relationship_count": len(rows),
        "memories": [{k: node.get(k) for k in keep} for node in nodes],
        "relationships": [
            {"from_memory_id": a, "to_memory_id": b, "type": kind, "properties": json.loads(props)}
            for a, b, kind, props in rows
        ],
    }
    path = tmp_path / "memorygraph-export.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def memory_service_backup(tmp_path: Path) -> Path:
    """The fixture's database as mcp-memory-service's exporter writes it (export_metadata, memories
    with content, content_hash, tags as a list, times, memory_type, metadata, store)."""
    db = sqlite3.connect(f"file:{PEERS / STORES['mcp-memory-service']}?mode=ro&immutable=1", uri=True)
    try:
        rows = db.execute(
            "SELECT content, content_hash, tags, created_at, updated_at, memory_type, metadata FROM memories"
        )
        memories_out = [
            {
                "content": content,
                "content_hash": digest,
                "tags": tags.split(","),
                "created_at": created,
                "updated_at": updated,
                "memory_type": kind,
                "metadata": json.loads(metadata),
                "store": "default",
                "export_source": "test",
            }
            for content, digest, tags, created, updated, kind, metadata in rows.fetchall()
        ]
    finally:
        db.close()
    path = tmp_path / "backup.json"
    data = {"export_metadata": {"total_memories": len(memories_out)}, "memories": memories_out}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("peer", "make"), [("memorygraph", memorygraph_export), ("mcp-memory-service", memory_service_backup)]
)
def test_a_json_export_of_a_peer_brings_the_same_as_its_database(
    project: Path, tmp_path: Path, peer: str, make: Any
) -> None:
    from_db = tmp_path / "from-db"
    from_db.mkdir()
    import_json(from_db, peer, str(PEERS / STORES[peer]))
    report = import_json(project, peer, str(make(tmp_path)))
    assert report["added"] == 12 and not report["problems"]

    def shape(root: Path) -> set[tuple[str, str, str, tuple[str, ...], float]]:
        return {(m.id, m.kind, body_and_metadata(m.content)[0], tuple(m.tags), m.importance) for m in memories(root)}

    assert shape(project) == shape(from_db)
    assert links(project) == links(from_db)


def test_markdown_per_observation_makes_one_memory_per_observation(project: Path, tmp_path: Path) -> None:
    note = tmp_path / "Billing.md"
    note.write_text(
        "---\ntitle: Billing\ntags: [billing]\n---\n\n# Billing\n\nOverview.\n\n## Observations\n"
        "- [decision] Money as integer cents #money\n"
        "- [fix] Retry with idempotency keys #webhooks (after the outage)\n",
        encoding="utf-8",
    )
    report = import_json(project, "markdown", str(note), "--per-observation")
    found = {m.kind: m for m in memories(project)}
    assert report["added"] == 2
    assert found["decision"].content.startswith("Money as integer cents")
    assert set(found["decision"].tags) == {"billing", "money"}
    assert set(found["fix"].tags) == {"billing", "webhooks"}


def test_project_takes_only_the_memories_of_that_project_from_a_shared_store(project: Path) -> None:
    store = str(PEERS / STORES["mcp-memory-service"])
    other = import_json(project, "mcp-memory-service", store, "--project", "another-service")
    same = import_json(project, "mcp-memory-service", store, "--project", "billing-service")
    assert (other["added"], other["otherProject"]) == (0, 12)
    assert (same["added"], same["otherProject"]) == (12, 0)


def test_a_memory_deleted_here_since_the_last_import_stays_deleted(project: Path) -> None:
    store = str(PEERS / STORES["server-memory"])
    import_json(project, "server-memory", store)
    gone = find(memories(project), "Vite")
    run(project, "delete", gone.id, "--reason", "not ours any more")
    report = import_json(project, "server-memory", store)
    assert (report["added"], report["kept"], report["unchanged"]) == (0, 1, 11)
    assert gone.id not in {m.id for m in memories(project)}


def test_a_pipe_given_as_a_store_is_refused_without_being_opened(project: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "memory.db"
    os.mkfifo(pipe)
    result = run(project, "import", "memorygraph", str(pipe), code=2)
    assert "is not a regular file" in result.stderr


def test_an_imported_memory_keeps_its_metadata_and_original_id_in_fields_not_in_its_content(project: Path) -> None:
    import_json(project, "memorygraph", str(PEERS / STORES["memorygraph"]))
    wanted = manifest("memorygraph")["memories"][0]
    memory_id = find(memories(project), wanted["content"]).id
    shown = json.loads(run(project, "show", memory_id, "--json").stdout)["memory"]
    assert "eventmem:import" not in shown["content"]
    assert shown["content"].strip() == wanted["content"].strip()
    assert shown["source"] == f"memorygraph:{wanted['peer_id']}"
    assert "confidence" in shown["metadata"] and "created_at" in shown["metadata"]
    assert all(isinstance(value, str) for value in shown["metadata"].values())


def test_a_memory_imported_with_the_metadata_comment_is_recognised_and_its_comment_moves_into_fields(
    project: Path,
) -> None:
    first = json.loads((PEERS / STORES["server-memory"]).read_text(encoding="utf-8").splitlines()[0])
    body = first["observations"][0]
    comment = json.dumps({"source": first["name"], "original_type": "decision-x"}, separators=(",", ":"))
    service = reopen(project)
    try:
        old = service.save(
            f"{body}\n\n<!-- eventmem:import {comment} -->",
            memory_id=memory_id_for("server-memory", first["name"]),
            kind="decision",
            title=first["name"],
        )
    finally:
        service.close()
    report = import_json(project, "server-memory", str(PEERS / STORES["server-memory"]))
    assert (report["added"], report["updated"]) == (len(manifest("server-memory")["memories"]) - 1, 1)
    assert report["ids"]["updated"] == [old.id]
    found = [m for m in memories(project) if body in m.content]
    assert [m.id for m in found] == [old.id]
    assert "eventmem:import" not in found[0].content
    assert "original_type" not in (found[0].metadata or {})  # (the store's type is a kind: the comment's is gone)
    again = import_json(project, "server-memory", str(PEERS / STORES["server-memory"]))
    assert (again["added"], again["updated"], again["events"]) == (0, 0, 0)


def test_an_export_never_writes_in_git_or_the_memory_nor_over_a_file_unless_forced(
    project: Path, tmp_path: Path
) -> None:
    run(project, "import", "server-memory", str(PEERS / STORES["server-memory"]))
    readme = project / "README.md"
    readme.write_text("# The project\n", encoding="utf-8")
    config = (project / ".git" / "config").read_bytes()
    secret = tmp_path / "outside.txt"
    secret.write_text("not to be touched\n", encoding="utf-8")
    (project / "link.json").symlink_to(secret)
    private = (".git/config", ".git/hooks/pre-commit", ".eventmem/export.json", "sub/../.git/info/x")
    # (on a case-insensitive file system, macOS's or Windows', these are .git/ and .eventmem/ too)
    for where in (*private, ".GIT/hooks/pre-commit", ".Git./config", ".EventMem/export.json"):
        refused = run(project, "export", "json", where, code=2)
        assert "never writes inside" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    for where in ("README.md", "link.json"):
        refused = run(project, "export", "json", where, code=2)
        assert f"{where} exists; give a new file (or --force to replace it)" in refused.stderr
    (project / "notes").mkdir()
    (project / "notes" / "mine.md").write_text("mine\n", encoding="utf-8")
    refused = run(project, "export", "markdown", "notes", code=2)
    assert "notes exists and is not empty" in refused.stderr
    assert (project / ".git" / "config").read_bytes() == config
    assert (
        not (project / ".git" / "hooks" / "pre-commit").exists()
        and not (project / ".eventmem" / "export.json").exists()
    )
    assert (
        readme.read_text(encoding="utf-8") == "# The project\n"
        and secret.read_text(encoding="utf-8") == "not to be touched\n"
    )
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".eventmem-export")) == []
    assert not any((project / name).exists() for name in (".GIT", ".Git.", ".EventMem"))

    run(project, "export", "json", "README.md", "--force")
    run(project, "export", "json", "link.json", "--force")  # the link is replaced, its target kept
    assert json.loads(readme.read_text(encoding="utf-8"))["memories"]
    assert not (project / "link.json").is_symlink() and secret.read_text(encoding="utf-8") == "not to be touched\n"


IMPORTED = 2000
"""Memories in the large import: enough for three segments at the smallest segment size."""


def test_an_import_larger_than_a_segment_goes_on_in_new_segments(project: Path, tmp_path: Path) -> None:
    store = tmp_path / "memory.jsonl"
    with store.open("w", encoding="utf-8") as out:
        for n in range(IMPORTED):
            observations = [
                f"Service {n} keeps fact {k} about its deploy window and owner team {n % 17}." * 6 for k in range(2)
            ]
            entity = {"type": "entity", "name": f"service-{n}", "entityType": "service", "observations": observations}
            out.write(json.dumps(entity) + "\n")
    env = {**os.environ, "EVENTMEM_MAX_SEGMENT_BYTES": "1048576"}  # (the floor: the import is about 2.7 MB)
    result = eventmem(project, "import", "server-memory", str(store), "--json", env=env)  # (in process)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == IMPORTED
    segments = list((project / ".eventmem" / "journal").glob("*.jsonl"))
    assert len(segments) >= 3 and all(path.stat().st_size <= 1048576 for path in segments)
    stats = eventmem(project, "--json", "stats", env=env)
    assert json.loads(stats.stdout)["memories"] == IMPORTED


def _segment_order(path: Path) -> int:
    """A writer's segments in the order they were filled: ``w.b.jsonl``, ``w.b.2.jsonl``, … ``w.b.10.jsonl``."""
    number = path.name.removesuffix(".jsonl").rsplit(".", 1)[-1]
    return int(number) if number.isdigit() else 1


def test_a_large_import_writes_every_event_in_store_order_as_one_block_across_segments(
    project: Path, tmp_path: Path
) -> None:
    """More items than one batch of the import: the journal is what one plan of the whole store
    writes: a saved event per entity in file order, then a link per relation in file order (each
    link once, none to a memory not imported), by one writer at one time, every entity arriving."""
    count = 4100
    names = [f"service-{n}" for n in range(count)]
    store = tmp_path / "memory.jsonl"
    with store.open("w", encoding="utf-8") as out:
        for n, name in enumerate(names):
            observations = [f"Service {n} deploys on window {n % 7} and pages owner team {n % 17}." * 4]
            out.write(
                json.dumps({"type": "entity", "name": name, "entityType": "service", "observations": observations})
            )
            out.write("\n")
        out.write(json.dumps({"type": "entity", "name": names[5], "entityType": "service", "observations": ["x"]}))
        out.write("\n")  # (a second entity of that name: reported, the first kept)
        relations = [(names[n], names[n - 1]) for n in range(1, count)]
        relations += [(names[count - 1], names[0]), (names[3], "not-in-the-store"), (names[2], names[1])]
        for source, target in relations:
            out.write(json.dumps({"type": "relation", "from": source, "to": target, "relationType": "DEPENDS_ON"}))
            out.write("\n")
    env = {**os.environ, "EVENTMEM_MAX_SEGMENT_BYTES": "1048576"}
    planned = json.loads(
        eventmem(project, "import", "server-memory", str(store), "--json", "--dry-run", env=env).stdout
    )
    result = eventmem(project, "import", "server-memory", str(store), "--json", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["added"], report["linksAdded"], len(report["problems"])) == (count, count, 2)
    assert (planned["added"], planned["linksAdded"], planned["events"]) == (count, count, report["events"])

    folder = project / ".eventmem" / "journal"
    segments = sorted(folder.glob("*.jsonl"), key=_segment_order)
    assert len(segments) >= 4 and all(path.stat().st_size <= 1048576 for path in segments)
    events = [json.loads(line) for path in segments for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(events) == report["events"] == 2 * count
    assert len({event["by"] for event in events}) == 1 and len({event["ts"] for event in events}) == 1
    assert len({event["id"] for event in events}) == len(events)
    ids = [memory_id_for("server-memory", name) for name in names]
    saved, linked = events[:count], events[count:]
    assert [(e["type"], e["memory"], e["title"]) for e in saved] == [
        ("saved", i, n) for i, n in zip(ids, names, strict=True)
    ]
    expected = [(ids[n], ids[n - 1]) for n in range(1, count)] + [(ids[count - 1], ids[0])]
    assert [(e["type"], e["source"], e["target"]) for e in linked] == [("linked", s, t) for s, t in expected]

    again = json.loads(eventmem(project, "import", "server-memory", str(store), "--json", env=env).stdout)
    assert (again["unchanged"], again["linksUnchanged"], again["events"]) == (count, count, 0)
    stats = eventmem(project, "--json", "stats", env=env)
    assert json.loads(stats.stdout)["memories"] == count
