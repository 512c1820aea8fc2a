"""``eventmem sync --to postgresql://… [--project NAME=PATH …] [--follow] [--prune]``.

Projects each named project's journal and the user-wide global journal (as ``global-`` and an id of
its folder: each user's apart) into one database. The database's other projects are left as they
are (another person's or machine's sync, or a server, keeps them); ``--prune`` drops those not named.
``--follow`` keeps going: the watcher signals appended segments, and a lost connection is retried
until the database is back (then every journal goes on from the position the database committed).
Without ``--follow``, a lost connection is a one-line error and the next run goes on from there.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventmem.adapters.progress import ProgressBar
from eventmem.core.errors import InvalidInput
from eventmem.core.extras import require
from eventmem.journal.project import ProjectPaths, global_root
from eventmem.projectors.postgres.targets import Target, global_target, is_global, parse_projects

if TYPE_CHECKING:
    from eventmem.embedders.embedder import Embedder

__all__ = ["add_sync_command"]

log = logging.getLogger("eventmem.sync")

RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Waits between attempts to reach the database again under ``--follow`` (the last one repeats)."""


def add_sync_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``eventmem sync`` to the CLI's sub-commands."""
    help = "project journals (and the global one) into PostgreSQL with pgvector"
    p: argparse.ArgumentParser = subparsers.add_parser("sync", help=help, description=help)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the summary as JSON")
    p.add_argument("--root", default=argparse.SUPPRESS, help="the project (when no --project is given)")
    p.add_argument("--to", required=True, metavar="postgresql://…", help="the database")
    p.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a project to project, by name (repeat; default: the current project, under the name the database "
        "holds its folder under, else its folder's)",
    )
    p.add_argument("--no-global", action="store_true", help="leave the user-wide global memory out")
    p.add_argument(
        "--embedder",
        help="the embedder of the vectors (default: the one the projects' own settings name, as eventmem serve "
        "embeds with there; the built-in one unless a project names another)",
    )
    p.add_argument("--follow", action="store_true", help="keep the database in step until interrupted")
    p.add_argument(
        "--prune",
        action="store_true",
        help="drop the database's projects not named here (by default they are left to whoever syncs them)",
    )
    p.set_defaults(func=cmd_sync)
    return p


def cmd_sync(args: argparse.Namespace) -> int:
    from eventmem.adapters.command_line import chosen_root
    from eventmem.embedders.providers import make_embedder_from_spec
    from eventmem.projectors.postgres.connection import check_uri

    uri = check_uri(args.to)
    require("postgres", "eventmem sync")
    targets = parse_projects(args.project, default_root=lambda: chosen_root(getattr(args, "root", None)).root)
    for target in targets:  # (a path one folder off, a typo: said, where it would sync nothing in silence)
        if not ProjectPaths(target.root).journal_dir.is_dir():
            log.warning(
                "%s holds no eventmem journal (%s): the project %s has nothing to sync yet",
                target.root,
                Path(".eventmem", "journal"),
                target.name,
            )
    if not args.no_global:
        home = global_root()
        if all(t.root != home.resolve() for t in targets):
            targets.append(global_target(home))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if args.embedder:
        embedder = make_embedder_from_spec(args.embedder, threads=cores)
    else:
        embedder = projects_embedder(targets, threads=cores)
    from eventmem.service.database import sync

    as_json = bool(getattr(args, "json", False))
    bars: dict[str, ProgressBar] = {}

    def told(name: str, done: int, total: int, stage: str) -> None:
        if name not in bars:
            for bar in bars.values():  # (one project after the other: the one before is done)
                bar.close()
            bars[name] = ProgressBar(f"projecting {name}")
        bars[name](done, total, stage)

    try:
        sync(
            uri,
            targets,
            embedder,
            report=functools.partial(_report, bars=bars, as_json=as_json),
            follow=RETRY_S if args.follow else None,
            progress=told,
            prune=args.prune,
        )
    finally:
        for bar in bars.values():
            bar.close()
    return 0


def projects_embedder(targets: list[Target], *, threads: int = 1) -> Embedder:
    """The embedder the named projects' settings name (their config files, ``EVENTMEM_EMBEDDER``), as
    ``eventmem serve`` in each embeds with, so that ``serve --store`` there finds the database's
    vectors its own. A database keeps one embedder's vectors: projects naming different ones are
    refused, in one line that names them, before anything is written. The global memory names none.
    ``threads``: a local model's (the cores the sync may use), unless its spec names them."""
    from eventmem.embedders.providers import make_embedder_from_spec
    from eventmem.journal.config import load_settings

    named: dict[str, list[str]] = {}
    made: dict[str, Embedder] = {}
    for target in targets:
        if is_global(target.name):
            continue
        spec = load_settings(ProjectPaths(target.root).config_file).config.embedder
        embedder = make_embedder_from_spec(spec, target.root, threads=threads)
        made.setdefault(embedder.model_id, embedder)
        named.setdefault(embedder.model_id, []).append(f"{target.name}: {spec}")
    if len(named) > 1:
        listed = "; ".join(", ".join(names) for names in named.values())
        raise InvalidInput(
            f"the projects name different embedders ({listed}), and a database keeps one embedder's vectors: "
            "give --embedder, or sync them into different databases"
        )
    return next(iter(made.values())) if made else make_embedder_from_spec("hashing", threads=threads)


def _report(counts: dict[str, int], memories: dict[str, int], *, bars: dict[str, ProgressBar], as_json: bool) -> None:
    for bar in bars.values():  # (the report's lines after the bars, not on their line)
        bar.close()
    if as_json:
        data = {name: {"events": counts[name], "memories": memories.get(name, 0)} for name in counts}
        print(json.dumps({"projects": data}), flush=True)
        return
    for name, events in counts.items():
        shown = f"{name} (your global memory)" if is_global(name) else name
        print(f"synced {shown}: {events} events taken, {memories.get(name, 0)} memories", flush=True)
    sys.stdout.flush()
