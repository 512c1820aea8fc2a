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
import sys
from pathlib import Path
from typing import Any

from eventmem.adapters.progress import ProgressBar
from eventmem.core.extras import require
from eventmem.journal.project import ProjectPaths, global_root
from eventmem.projectors.postgres.targets import global_target, is_global, parse_projects

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
    p.add_argument("--embedder", default="hashing", help="the embedder of the vectors (default: the built-in one)")
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
    embedder = make_embedder_from_spec(args.embedder)
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
