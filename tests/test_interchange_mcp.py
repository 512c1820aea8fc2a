"""``import_memories`` and ``export_memories`` through a real MCP client: a dry run by default,
the peer stores arriving whole, and paths confined to the project."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import Implementation
from mcp_client import call_tool, text_of

from eventmem.adapters.mcp.server import build_server
from eventmem.journal.project import RootChoice

pytestmark = pytest.mark.anyio

PEERS = Path(__file__).resolve().parent / "fixtures" / "peers"
CLIENT = Implementation(name="pytest-agent", version="1.0")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def connect(project: Path) -> AsyncIterator[Client]:
    async with Client(build_server(RootChoice(project, "test"), tools="all"), client_info=CLIENT) as client:
        yield client


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text_of(result)


def journal(project: Path) -> list[str]:
    folder = project / ".eventmem" / "journal"
    return [line for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def bring(project: Path, peer: str, name: str) -> str:
    """Copy a peer store into the project (where the tools may read it); its path from the root."""
    target = project / "incoming" / peer
    source = PEERS / peer / name
    if source.is_dir():
        shutil.copytree(source, target / name)
    else:
        target.mkdir(parents=True)
        shutil.copy(source, target / name)
    return f"incoming/{peer}/{name}"


async def test_import_memories_is_a_dry_run_unless_asked_and_then_brings_every_memory_and_link(project: Path) -> None:
    path = bring(project, "memorygraph", "memory.db")
    manifest = json.loads((PEERS / "memorygraph" / "manifest.json").read_text(encoding="utf-8"))
    async with connect(project) as client:
        planned = await call_tool(client, "import_memories", {"format": "memorygraph", "path": path})
        assert not (project / ".eventmem" / "journal").exists()
        done = await call_tool(client, "import_memories", {"format": "memorygraph", "path": path, "dry_run": False})
        listed = await call_tool(client, "search_memories", {"limit": 100})
        first = next(hit for hit in listed["results"] if hit["title"] == "Idempotency keys on the invoice endpoint")
        related = await call_tool(client, "get_related_memories", {"memory_id": first["id"], "direction": "out"})
    assert (planned["dryRun"], planned["added"], planned["linksAdded"]) == (True, 12, 5)
    assert (done["dryRun"], done["added"], done["linksAdded"], done["path"]) == (False, 12, 5, path)
    assert {hit["title"] for hit in listed["results"]} == {m["title"] for m in manifest["memories"]}
    for wanted in manifest["memories"]:
        hit = next(hit for hit in listed["results"] if hit["title"] == wanted["title"])
        assert set(wanted["tags"]) <= set(hit["tags"])
    assert [(r["relation"], r["title"]) for r in related["related"]] == [("solves", "Invoices duplicated after retry")]


async def test_export_memories_writes_inside_the_project_and_a_fresh_project_imports_it(
    project: Path, tmp_path: Path
) -> None:
    path = bring(project, "server-memory", "memory.jsonl")
    async with connect(project) as client:
        await call_tool(client, "import_memories", {"format": "server-memory", "path": path, "dry_run": False})
        out = await call_tool(client, "export_memories", {"format": "json", "path": "exports/memory.json"})
    assert (out["memories"], out["links"], out["path"]) == (12, 5, "exports/memory.json")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(project / "exports" / "memory.json", fresh / "dump.json")
    async with connect(fresh) as client:
        done = await call_tool(client, "import_memories", {"format": "json", "path": "dump.json", "dry_run": False})
    assert (done["added"], done["linksAdded"]) == (12, 5)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("../outside.jsonl", "is not inside the project"),
        ("/etc/passwd", "is not inside the project"),
        (".eventmem/journal", "the memory's own folder is not a store"),
        ("linked/memory.jsonl", "is a symbolic link"),
    ],
)
async def test_a_path_outside_the_project_or_through_a_link_is_refused_and_nothing_is_written(
    project: Path, tmp_path: Path, where: str, expected: str
) -> None:
    (tmp_path / "outside.jsonl").write_text('{"type":"entity","name":"x","entityType":"fix","observations":["y"]}\n')
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(PEERS / "server-memory" / "memory.jsonl", tmp_path / "elsewhere" / "memory.jsonl")
    (project / "linked").symlink_to(tmp_path / "elsewhere")
    async with connect(project) as client:
        error = await call_error(client, "import_memories", format="server-memory", path=where, dry_run=False)
        export_error = await call_error(client, "export_memories", format="server-memory", path=where)
    assert expected in error and "only under the export folder exports/" in export_error, (error, export_error)
    assert not (project / ".eventmem" / "journal").exists() or journal(project) == []


async def test_export_memories_writes_only_new_files_under_the_export_folder(project: Path, tmp_path: Path) -> None:
    (project / "README.md").write_text("# The project\n", encoding="utf-8")
    config = (project / ".git" / "config").read_bytes()
    (tmp_path / "elsewhere").mkdir()
    path = bring(project, "server-memory", "memory.jsonl")
    async with connect(project) as client:
        await call_tool(client, "import_memories", {"format": "server-memory", "path": path, "dry_run": False})
        errors = {
            where: await call_error(client, "export_memories", format="json", path=where)
            for where in (".git/config", ".git/hooks/pre-commit", "README.md", "exports/../README.md", "/etc/x")
        }
        first = await call_tool(client, "export_memories", {"format": "json", "path": "exports/memory.json"})
        again = await call_error(client, "export_memories", format="server-memory", path="exports/memory.json")
        notes = await call_tool(client, "export_memories", {"format": "markdown", "path": "exports/notes"})
        notes_again = await call_error(client, "export_memories", format="markdown", path="exports/notes")
        (project / "exports").rename(project / "exports-old")
        (project / "exports").symlink_to(tmp_path / "elsewhere")
        linked = await call_error(client, "export_memories", format="json", path="exports/new.json")
    for where, error in errors.items():
        assert "only under the export folder exports/" in error and "\n" not in error, (where, error)
    assert (project / ".git" / "config").read_bytes() == config
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert (project / "README.md").read_text(encoding="utf-8") == "# The project\n"
    assert first["memories"] == 12 and notes["memories"] == 12
    for refused in (again, notes_again):  # (no CLI flag named: the tool has none)
        assert "exists and export_memories never replaces anything" in refused and "--force" not in refused, refused
    assert "exports/memory.json exists" in again and "exports/notes exists" in notes_again
    assert json.loads((project / "exports-old" / "memory.json").read_text(encoding="utf-8"))["memories"]
    assert "is a symbolic link" in linked and list((tmp_path / "elsewhere").iterdir()) == []
