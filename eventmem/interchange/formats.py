"""The formats ``eventmem import`` and ``eventmem export`` (and their MCP tools) know, by name."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventmem.core.errors import InvalidInput, UnsafePath
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


PRIVATE_FOLDERS = (".git", ".eventmem")
"""No export writes inside these, wherever they are: git's own files (its config and hooks run
commands) and the memory's."""


def export_store(service: MemoryService, format_name: str, path: Path, *, replace: bool = False) -> dict[str, Any]:
    """Write the project's memory in a format to ``path`` (a file, or a folder for markdown and ai).

    Only new files are written unless ``replace``: a file (or, for a folder format, a file of the
    folder) that exists is refused before anything is written. Nothing is written inside ``.git/`` or
    ``.eventmem/``, or through a link: the files are written beside their place and moved into it,
    so an existing link is replaced, never followed."""
    folder = format_name in ("markdown", "ai")
    _check_place(path, folder=folder, replace=replace)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".eventmem-export-", dir=path.parent))
    try:
        written = scratch / "out"
        if format_name == "ai":
            report: dict[str, Any] = {"format": format_name, "memories": ai_folder.write(service, written)}
        else:
            exported = collect(service)
            writers: dict[str, Callable[[Any, Path], int]] = {
                "server-memory": knowledge_graph.write,
                "markdown": markdown_notes.write,
                "json": json_dump.write,
            }
            writers[format_name](exported, written)
            report = {"format": format_name, "memories": len(exported.memories), "links": len(exported.links)}
        if folder:
            _move_folder(written, path, replace=replace)
        else:
            _move(written, path, replace=replace)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {**report, "path": str(path)}


def _check_place(path: Path, *, folder: bool, replace: bool) -> None:
    """Refuse, in one line, an export into a private folder, over a folder (a file format), through a
    link (a folder format), or over an existing file unless ``replace``."""
    real = Path(os.path.realpath(path.parent)) / path.name
    for shown in (path, real):
        private = next((part for part in shown.parts if _folded(part) in PRIVATE_FOLDERS), None)
        if private is not None:
            raise UnsafePath(f"{path}: an export never writes inside {private}/; give a path outside it")
    if not os.path.lexists(path):
        return
    if folder:
        if os.path.islink(path) or not path.is_dir():
            raise UnsafePath(f"{path} exists and is not a folder; give a new folder to export to")
        if not replace and any(path.iterdir()):
            raise InvalidInput(f"{path} exists and is not empty; give a new folder (or --force to replace its files)")
        return
    if path.is_dir() and not path.is_symlink():
        raise InvalidInput(f"{path} is a folder; give the file to write")
    if not replace:
        raise InvalidInput(f"{path} exists; give a new file (or --force to replace it)")


def _folded(name: str) -> str:
    """``name`` as a case-insensitive file system (macOS, Windows) finds it: ``.GIT`` and ``.git.`` are
    ``.git`` there."""
    return name.casefold().rstrip(" .") if name not in (".", "..") else name


def _move(written: Path, path: Path, *, replace: bool) -> None:
    """Put the written file in its place: replacing what is there (a link itself, not its target)
    only if ``replace``; else only if nothing is there (``link`` never replaces)."""
    if replace:
        os.replace(written, path)
        return
    try:
        os.link(written, path)
    except FileExistsError:
        raise InvalidInput(f"{path} exists; give a new file (or --force to replace it)") from None


def _move_folder(written: Path, folder: Path, *, replace: bool) -> None:
    folder.mkdir(exist_ok=True)
    names = sorted(item.name for item in written.iterdir())
    if not replace:
        taken = next((name for name in names if os.path.lexists(folder / name)), None)
        if taken is not None:
            raise InvalidInput(f"{folder / taken} exists; give a new folder (or --force to replace its files)")
    for name in names:
        _move(written / name, folder / name, replace=replace)
