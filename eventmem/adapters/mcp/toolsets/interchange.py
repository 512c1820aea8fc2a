"""``import_memories`` and ``export_memories``, in the ``memory`` family.

A model gives a path, which is untrusted: it must lie inside the project root (relative paths are
taken from it), reach nothing through a symbolic link, and stay out of ``.eventmem/``; an export
writes only new files under the export folder (``exports/``, or the ``export_dir`` setting). An import is
a dry run unless ``dry_run`` is false; what it would add, update and leave unchanged is the answer
either way, with each problem named by file and line or row.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from eventmem.adapters.mcp.app import ADDITIVE, App, app_of, call
from eventmem.context.project_context import ProjectContext
from eventmem.core.errors import InvalidInput, UnsafePath
from eventmem.interchange.formats import export_store, import_store
from eventmem.interchange.names import EXPORTS, IMPORTS, PMP, canonical
from eventmem.journal.files import check_inside

__all__ = ["confined", "export_place", "register"]

PATH_CHARS = 4096


def confined(root: Path, given: str, *, folder: bool | None = None, create: bool = False) -> Path:
    """``given`` (relative to ``root``, or absolute) if it is inside ``root`` through real folders and
    outside ``.eventmem/``; else :class:`~eventmem.core.errors.UnsafePath`."""
    if not isinstance(given, str) or not given.strip() or len(given) > PATH_CHARS:
        raise InvalidInput(f"path: expected a path inside the project of at most {PATH_CHARS} characters")
    path = Path(os.path.normpath(root / os.path.expanduser(given.strip())))
    relative = os.path.relpath(path, root)
    if relative == ".eventmem" or relative.startswith(".eventmem" + os.sep):
        raise UnsafePath(f"{given}: the memory's own folder is not a store to import from or export to")
    is_folder = folder if folder is not None else path.is_dir() and not path.is_symlink()
    return check_inside(root, path, kind="folder" if is_folder else "file", create=create)


def export_place(root: Path, export_dir: str, given: str, *, folder: bool) -> Path:
    """Where ``export_memories`` may write ``given`` (relative to the project, or absolute): under the
    export folder (``export_dir``: a folder of the project, or one the user's own settings name
    anywhere), through real folders; else :class:`~eventmem.core.errors.UnsafePath`."""
    if not isinstance(given, str) or not given.strip() or len(given) > PATH_CHARS:
        raise InvalidInput(f"path: expected a path under the export folder of at most {PATH_CHARS} characters")
    base = Path(os.path.normpath(root / os.path.expanduser(export_dir.strip() or "exports")))
    path = Path(os.path.normpath(root / os.path.expanduser(given.strip())))
    shown = os.path.relpath(base, root) if _below(base, root) else str(base)
    if path == base or not _below(path, base):
        raise UnsafePath(
            f"{given}: export_memories writes only under the export folder {shown}/ "
            "(the export_dir setting names another); give a new file there, such as "
            f"{shown}/memory.json"
        )
    if _below(base, root):  # (a folder of the project: no link on the way to it)
        check_inside(root, base, kind="folder", create=True)
    return check_inside(base, path, kind="folder" if folder else "file", create=True)


def _below(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def register(server: MCPServer[App]) -> None:
    formats_in = "; ".join(f"{name}: {what}" for name, what in IMPORTS.items())
    formats_out = "; ".join(f"{name}: {what}" for name, what in EXPORTS.items())

    @server.tool(
        title="Import memories",
        description=(
            "Bring memories in from another memory server's store, markdown notes or agent instruction "
            f"files. Formats: {formats_in}. A dry run unless dry_run is false: the answer says what would be "
            "added, updated and left unchanged. Importing the same store again adds only what is new."
        ),
        annotations=ADDITIVE,
    )
    def import_memories(
        ctx: Context[App, Any],
        format: Annotated[str, Field(description="The store's format (see the description).", max_length=64)],
        path: Annotated[str, Field(description="The file or folder, inside the project.", max_length=PATH_CHARS)],
        dry_run: Annotated[bool, Field(description="Only say what would change (default).")] = True,
        project: Annotated[
            str | None, Field(description="From a store shared by projects, only this project's.", max_length=200)
        ] = None,
        per_observation: Annotated[bool, Field(description="markdown: one memory per observation.")] = False,
    ) -> dict[str, Any]:
        service = app_of(ctx).service

        def run() -> dict[str, Any]:
            name = canonical(format, IMPORTS)
            where = confined(service.root.root, path)
            if name == PMP:
                if dry_run:
                    return {"status": "success", "dryRun": True, "note": "pmp has no dry run; call with dry_run false"}
                return {"status": "success", **ProjectContext(service).import_pmp(where)}
            report = import_store(
                service, name, where, dry_run=dry_run, project=project, per_observation=per_observation
            )
            return {"status": "success", **report, "path": os.path.relpath(where, service.root.root)}

        return call(run)

    @server.tool(
        title="Export memories",
        description=(
            "Write the project's memories to a new file or folder under the project's export folder "
            f"(exports/ unless the export_dir setting names another); an existing file is never replaced. "
            f"Formats: {formats_out}."
        ),
        annotations=ADDITIVE,
    )
    def export_memories(
        ctx: Context[App, Any],
        format: Annotated[str, Field(description="The format to write (see the description).", max_length=64)],
        path: Annotated[
            str,
            Field(
                description="The new file (a folder for markdown and ai), such as exports/memory.json.",
                max_length=PATH_CHARS,
            ),
        ],
    ) -> dict[str, Any]:
        service = app_of(ctx).service

        def run() -> dict[str, Any]:
            name = canonical(format, EXPORTS)
            folder = name in ("markdown", "ai")
            where = export_place(service.root.root, service.config.export_dir, path, folder=folder)
            if os.path.lexists(where) and not (folder and where.is_dir() and not any(where.iterdir())):
                shown = os.path.relpath(where, service.root.root)
                raise InvalidInput(
                    f"{shown} exists and export_memories never replaces anything; give a new "
                    f"{'folder' if folder else 'file'} under the export folder"
                )
            report = export_store(service, name, where, replace=False)
            return {"status": "success", **report, "path": os.path.relpath(where, service.root.root)}

        return call(run)
