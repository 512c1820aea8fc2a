"""The formats ``eventmem import`` and ``eventmem export`` (and their MCP tools) know, by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventmem.core.errors import InvalidInput
from eventmem.interchange import (
    ai_folder,
    instructions,
    json_dump,
    knowledge_graph,
    markdown_notes,
    mcp_memory_service,
    memorygraph,
)
from eventmem.interchange.batch import import_bundle
from eventmem.interchange.exporting import collect
from eventmem.interchange.mapping import Bundle

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["export_store", "import_store", "read_store"]


def read_store(format_name: str, path: Path, *, per_observation: bool = False) -> Bundle:
    """Read a store of the given (canonical) format into a bundle; nothing is written."""
    readers: dict[str, Callable[[Path], Bundle]] = {
        "server-memory": knowledge_graph.read,
        "memorygraph": memorygraph.read,
        "mcp-memory-service": mcp_memory_service.read,
        "markdown": lambda p: markdown_notes.read(p, per_observation=per_observation),
        "instructions": instructions.read,
        "json": json_dump.read,
    }
    if not path.exists() and not path.is_symlink():
        raise InvalidInput(f"{path}: no such file or folder")
    bundle = readers[format_name](path)
    if not bundle.items and bundle.problems:
        first = bundle.problems[0].render()
        raise InvalidInput(f"nothing could be imported from {path}: {first} ({len(bundle.problems)} problem(s))")
    return bundle


def import_store(
    service: MemoryService,
    format_name: str,
    path: Path,
    *,
    dry_run: bool,
    project: str | None = None,
    per_observation: bool = False,
) -> dict[str, Any]:
    """Import (or, with ``dry_run``, plan the import of) a store; the plan as a dict."""
    bundle = read_store(format_name, path, per_observation=per_observation)
    plan = import_bundle(service, bundle, dry_run=dry_run, project=project)
    return {"path": str(path), **plan.to_dict()}


def export_store(service: MemoryService, format_name: str, path: Path) -> dict[str, Any]:
    """Write the project's memory in a format to ``path`` (a file, or a folder for markdown and ai)."""
    if format_name == "ai":
        count = ai_folder.write(service, path)
        return {"format": format_name, "path": str(path), "memories": count}
    exported = collect(service)
    writers: dict[str, Callable[[Any, Path], int]] = {
        "server-memory": knowledge_graph.write,
        "markdown": markdown_notes.write,
        "json": json_dump.write,
    }
    if format_name != "markdown" and path.is_dir():
        raise InvalidInput(f"{path} is a folder; give the file to write")
    writers[format_name](exported, path)
    return {"format": format_name, "path": str(path), "memories": len(exported.memories), "links": len(exported.links)}
