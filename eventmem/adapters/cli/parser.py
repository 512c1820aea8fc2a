"""The ``eventmem`` command line: its options and one subcommand per command module function."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from eventmem import __version__
from eventmem.adapters.cli.doctor_command import cmd_doctor
from eventmem.adapters.cli.interchange_commands import add_interchange_commands
from eventmem.adapters.cli.journal_commands import cmd_check, cmd_diff, cmd_log, cmd_pr_summary
from eventmem.adapters.cli.maintenance_commands import cmd_allow, cmd_compact, cmd_import, cmd_rebuild, cmd_stats
from eventmem.adapters.cli.memory_commands import (
    cmd_delete,
    cmd_init,
    cmd_restore,
    cmd_save,
    cmd_search,
    cmd_show,
    cmd_update,
)
from eventmem.adapters.cli.sync_command import add_sync_command
from eventmem.adapters.command_line import EXIT_CODES, Parser, command_options, global_options
from eventmem.core.events import KINDS

__all__ = ["build_parser"]

TAGS_HELP = "repeat it, or separate tags with commas"
TYPE_HELP = ", ".join(KINDS)


def build_parser(
    serve: Callable[[argparse.Namespace], int] | None = None,
    serve_options: Callable[[argparse.ArgumentParser], None] | None = None,
    more: Callable[[Any, Callable[[argparse.ArgumentParser], None]], None] | None = None,
) -> argparse.ArgumentParser:
    """The ``eventmem`` parser; ``serve`` runs ``eventmem serve`` and ``serve_options`` adds its options
    (both given by :mod:`eventmem.main`, which alone knows the servers); ``more`` adds another adapter's
    commands (``eventmem hooks``, ``eventmem hook``) to the subcommands, with the common options."""
    parser = Parser(prog="eventmem", description="Event-sourced project memory for AI agents.", epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"eventmem {__version__}")
    global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        command_options(p)
        p.set_defaults(func=fn)
        return p

    if serve is not None:
        p = add("serve", serve, "run the stdio MCP server for this project")
        p.add_argument("--tools", help="tool families to expose, comma-separated, or 'all' (default: EVENTMEM_TOOLS)")
        if serve_options is not None:
            serve_options(p)
    p = add("init", cmd_init, "create .eventmem/ (config and .gitignore) in the project")
    p.add_argument(
        "--git-drivers",
        action="store_true",
        help="also mark segments diff=eventmem in .eventmem/.gitattributes and configure that diff driver",
    )
    p.add_argument("--git-hooks", action="store_true", help="also install a pre-push hook that runs `eventmem check`")
    p = add("save", cmd_save, "save a memory ('-' reads the text from stdin)")
    p.add_argument("text")
    p.add_argument("--title")
    p.add_argument("--summary")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help=TAGS_HELP)
    p.add_argument("--type", "--kind", dest="type", default="general", help=TYPE_HELP)
    p.add_argument("--importance", type=float, default=0.5)
    p.add_argument("--ttl", type=int, help="seconds until it expires")
    p.add_argument("--scope", default="project", choices=["project", "global"])
    p.add_argument("--by", help="who is saving (default: $USER)")
    p.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help="a metadata entry (repeat for more)",
    )
    p = add("search", cmd_search, "hybrid search of the memory")
    p.add_argument("query", nargs="+")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--type", "--kind", dest="type", action="append", help="only these types (" + TYPE_HELP + ")")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help="only memories with every tag given")
    p.add_argument("--scope", choices=["project", "global", "all"])
    p.add_argument("--min-importance", type=float)
    p.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    p = add("show", cmd_show, "show one memory")
    p.add_argument("id")
    p = add("update", cmd_update, "change fields of a memory")
    p.add_argument("id")
    p.add_argument("--content")
    p.add_argument("--title")
    p.add_argument("--summary")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help="the new tags: " + TAGS_HELP)
    p.add_argument("--type", "--kind", dest="type", help=TYPE_HELP)
    p.add_argument("--importance", type=float)
    p.add_argument("--ttl", type=int, help="seconds; 0 makes it long-term")
    p.add_argument("--by")
    p.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help="the new metadata, replacing the old: one entry per --meta (repeat for more)",
    )
    p = add("delete", cmd_delete, "delete a memory (its history is kept)")
    p.add_argument("id")
    p.add_argument("--reason")
    p.add_argument("--by")
    p = add("restore", cmd_restore, "bring back a deleted or expired memory (and the links its delete removed)")
    p.add_argument("id")
    p.add_argument("--reason")
    p.add_argument("--by")
    p = add("log", cmd_log, "history of one memory, or of all")
    p.add_argument("id", nargs="?")
    p.add_argument("--limit", type=int, default=200, help="at most this many events, newest")
    add("stats", cmd_stats, "counts by type, status and tag")
    add("rebuild", cmd_rebuild, "drop the cache and rebuild every projection from the journal")
    p = add("compact", cmd_compact, "expire memories past their TTL and archive old deleted/expired history")
    p.add_argument("--now", help="the time to compact at (ISO-8601; default: now; a later time needs --dry-run)")
    p.add_argument("--dry-run", action="store_true", help="list what would be expired and archived; write nothing")
    p.add_argument("--no-archive", action="store_true", help="only write expiry events")
    p.add_argument("--by", help="who is compacting (default: $USER)")
    p = add("doctor", cmd_doctor, "which root was chosen and why, journal health, cache state")
    p.add_argument(
        "--fix",
        action="store_true",
        help="first replace a memory folder that is a symbolic link (cache, journal, archive, local) with a real "
        "one, saying what it does",
    )
    p = add("allow", cmd_allow, "let the tracked .eventmem/config.toml use the network, as it is now")
    p.add_argument("--revoke", action="store_true", help="withdraw the approval")
    p = add("check", cmd_check, "fail a branch whose journal would harm whoever merges it (for CI and hooks)")
    p.add_argument("--base", help="the revision to compare with (default: origin/HEAD, else main, else master)")
    p.add_argument("--head", default="HEAD", help="the revision to check (default: HEAD)")
    add_interchange_commands(add, cmd_import)  # import FORMAT PATH (pmp: cmd_import), export FORMAT PATH
    p = add("diff", cmd_diff, "memory-level changes between two journals or git revisions")
    p.add_argument("old", nargs="?", default="HEAD", help="a git revision or a path (default: HEAD)")
    p.add_argument("new", nargs="?", default="WORKTREE", help="a git revision or a path (default: the working tree)")
    p.add_argument("--textconv", metavar="FILE", help="print a segment one sentence per event (git textconv)")
    p.add_argument("--git-driver", nargs=7, metavar="ARG", help="the seven arguments git gives a diff command")
    p = add("pr-summary", cmd_pr_summary, "this branch's memory changes as markdown for a pull request")
    p.add_argument("base", nargs="?", help="the branch the pull request targets (default: origin/HEAD, main, master)")
    p.add_argument("--head", default="HEAD", help="the revision the pull request brings (default: HEAD)")
    from eventmem.adapters import replay

    description = "rebuild, audit, time travel and history of the journal (also tools/replay.py)"
    p = sub.add_parser("replay", help=description, description=description)
    command_options(p)
    replay.add_commands(p.add_subparsers(dest="replay_command", required=True, metavar="command"), command_options)
    add_sync_command(sub)
    if more is not None:
        more(sub, command_options)
    return parser
