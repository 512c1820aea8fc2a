"""``eventmem import FORMAT PATH`` and ``eventmem export FORMAT PATH``: the command-line side.

``import pmp .ai`` keeps its behaviour (the ``.ai/`` import of :mod:`eventmem.context.project_context`);
every other format goes through :mod:`eventmem.interchange.formats`. An import prints what it
added, updated and left unchanged, and each problem with its file and line or row; ``--dry-run``
prints the same and writes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eventmem.interchange.names import EXPORTS, IMPORTS, PMP, canonical

__all__ = ["add_interchange_commands"]

Add = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def add_interchange_commands(add: Add, pmp_import: Callable[[argparse.Namespace], int]) -> None:
    """Add ``import`` and ``export`` with ``add`` (the CLI's own way of adding a subcommand);
    ``pmp_import`` runs ``import pmp DIR``."""

    def run_import(args: argparse.Namespace) -> int:
        name = canonical(args.format, IMPORTS)
        if name == PMP:
            if args.dry_run:
                from eventmem.core.errors import InvalidInput

                raise InvalidInput("import pmp has no --dry-run: a second import of the same folder changes nothing")
            args.dir = args.path
            return pmp_import(args)
        return _import(args, name)

    formats = ", ".join(f"{name} ({what})" for name, what in IMPORTS.items())
    p = add("import", run_import, "bring memories in from another store, notes or instruction files")
    p.add_argument("format", metavar="FORMAT", help=f"one of: {formats}")
    p.add_argument("path", metavar="PATH", help="the store's file or folder (pmp: the directory, such as .ai)")
    p.add_argument(
        "--dry-run", action="store_true", help="say what would be added, updated and unchanged; write nothing"
    )
    p.add_argument("--project", help="from a store shared by projects, only the memories of this project")
    p.add_argument("--per-observation", action="store_true", help="markdown: one memory per observation, not per note")
    p.add_argument("--force", action="store_true", help="pmp: take a section from the file even if changed since")
    formats = ", ".join(f"{name} ({what})" for name, what in EXPORTS.items())
    p = add("export", _export, "write the project's memories in a portable format")
    p.add_argument("format", metavar="FORMAT", help=f"one of: {formats}")
    p.add_argument("path", metavar="PATH", help="the file to write (markdown, ai: the folder); never inside .git/")
    p.add_argument("--force", action="store_true", help="replace the file (or the folder's files) if it exists")


def _open(args: argparse.Namespace) -> Any:
    from eventmem.adapters.command_line import chosen_root
    from eventmem.context.project_context import write_section
    from eventmem.service import open_service

    return open_service(chosen_root(args.root), sections=write_section)


def _import(args: argparse.Namespace, name: str) -> int:
    from eventmem.core.terminal import print_json

    path = Path(args.path).expanduser()
    service = _open(args)
    try:
        from eventmem.interchange.formats import import_store

        report = import_store(
            service, name, path, dry_run=args.dry_run, project=args.project, per_observation=args.per_observation
        )
        if report["events"] and not args.dry_run:
            from eventmem.adapters.cli.roots import render_view

            render_view(service)
    finally:
        service.close()
    if args.json:
        print_json(report)
        return 0
    print(
        f"{name} {args.path}: {report['added']} added, {report['updated']} updated, {report['unchanged']} unchanged"
        + (f", {report['kept']} kept deleted" if report["kept"] else "")
        + (f", {report['otherProject']} of other projects left out" if report["otherProject"] else "")
    )
    print(
        f"links: {report['linksAdded']} added, {report['linksUpdated']} updated, {report['linksUnchanged']} unchanged"
    )
    for problem in report["problems"]:
        print(f"  {problem}")
    if args.dry_run:
        print(f"dry run: nothing written ({report['events']} event(s) would be appended)")
    else:
        print(f"{report['events']} event(s) appended by {report['by']}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from eventmem.core.terminal import print_json

    name = canonical(args.format, EXPORTS)
    service = _open(args)
    try:
        from eventmem.interchange.formats import export_store

        report = export_store(service, name, Path(args.path).expanduser(), replace=args.force)
    finally:
        service.close()
    if args.json:
        print_json(report)
    else:
        links = f" and {report['links']} link(s)" if "links" in report else ""
        print(f"{report['memories']} memories{links} written to {args.path} ({name})")
    return 0
