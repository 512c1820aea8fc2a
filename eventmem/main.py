"""The ``eventmem`` program: the command line's commands (:mod:`eventmem.adapters.cli`, with ``eventmem
replay``'s) and ``eventmem serve``, the MCP server over stdio (:mod:`eventmem.adapters.mcp.server`) or over HTTP
with REST and the web UI (:mod:`eventmem.adapters.http`).

The one module that knows both adapters; neither imports the other. The MCP server is imported only
when ``eventmem serve`` runs, so the other commands do not pay for loading the MCP SDK; ``eventmem hook``
(:mod:`eventmem.adapters.hooks`) is dispatched before anything else is imported, so a client's hook
answers in one process start.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the rest, typing too, is imported where it is used: ``eventmem hook`` must start fast)
    import argparse
    from collections.abc import Sequence

    from eventmem.journal.project import RootChoice
    from eventmem.service import MemoryService

__all__ = ["build_main_parser", "cmd_serve", "main"]


def cmd_serve(args: argparse.Namespace) -> int:
    """``eventmem serve``: the MCP server over stdio until the client goes away (or SIGTERM); with
    ``--http``, MCP, REST and the web UI on one port (:mod:`eventmem.adapters.http`). With ``--store``
    (or ``EVENTMEM_STORE``), reads answer from that PostgreSQL database."""
    import functools
    import logging

    from eventmem.adapters.command_line import chosen_root

    _check_store(args)
    if args.http:
        from eventmem.adapters.http.cli import serve_http
        from eventmem.adapters.mcp.server import build_server

        _check_embedder(args.root)
        return serve_http(args, lambda: chosen_root(args.root), build_server)
    from eventmem.adapters.mcp.server import serve_stdio

    root = chosen_root(args.root)
    _check_embedder(args.root)
    logging.getLogger("eventmem").info("serving %s (%s)", root.root, root.source)
    opener = functools.partial(_open_service, store=args.store, store_name=args.project_name)
    serve_stdio(root, tools=args.tools, opener=opener)
    return 0


def _open_service(root: RootChoice, *, store: str | None, store_name: str | None) -> MemoryService:
    """Open the memory for ``eventmem serve``: in the server's loader, after ``initialize`` could be
    answered (so the service's modules are imported only then)."""
    from eventmem.context.project_context import write_section
    from eventmem.service import open_service

    return open_service(root, background_vectors=True, store=store, store_name=store_name, sections=write_section)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options: HTTP's (:func:`~eventmem.adapters.http.cli.add_http_options`), and the database
    to answer from."""
    from eventmem.adapters.http.cli import add_http_options

    add_http_options(parser)
    group = parser.add_argument_group("PostgreSQL (answer from a database the journals are projected into)")
    group.add_argument(
        "--store",
        metavar="postgresql://…",
        help="answer recall, search, related, context and stats from this database (else EVENTMEM_STORE); "
        "writes still go to the journal first",
    )
    group.add_argument(
        "--project-name",
        metavar="NAME",
        help="this project's name in the database (default: the name it holds this folder under, else the folder's)",
    )


def _check_store(args: argparse.Namespace) -> None:
    """Refuse, in one line and before serving, an address that is not PostgreSQL's, and a bad name."""
    import os
    from pathlib import Path

    from eventmem.core.extras import require
    from eventmem.projectors.postgres.connection import check_uri
    from eventmem.projectors.postgres.targets import parse_projects

    if args.store is not None:
        check_uri(args.store, "--store")
        require("postgres", "eventmem serve --store")
    elif (from_env := os.environ.get("EVENTMEM_STORE", "").strip()) and "${" not in from_env:
        check_uri(from_env, "EVENTMEM_STORE")
        require("postgres", "EVENTMEM_STORE")
    if args.project_name is not None:
        parse_projects([f"{args.project_name}=."], default_root=Path.cwd)  # (checks the name)


def _check_embedder(flag: str | None) -> None:
    """Refuse, in one line and before serving, an embedder (the config's, or ``EVENTMEM_EMBEDDER``) whose
    extra is not installed. A config that cannot be read is left to the server, which reports it."""
    from eventmem.adapters.command_line import chosen_root
    from eventmem.core.errors import EventmemError
    from eventmem.core.provider_spec import parse_spec, require_extra
    from eventmem.journal.config import load_settings
    from eventmem.journal.project import ProjectPaths

    try:
        spec = parse_spec(load_settings(ProjectPaths(chosen_root(flag).root).config_file).config.embedder)
    except (EventmemError, OSError):
        return
    require_extra(spec)


def _not_utf8(argv: Sequence[str]) -> str:
    """The first argument that is not UTF-8 text (bytes that are not arrive as lone surrogates), in a
    line; ``""`` when every one is."""
    for position, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = arg.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raw = arg.encode("utf-8", "backslashreplace")
            shown = repr(raw[:60])[2:-1]
            return f"eventmem: argument {position} is not UTF-8 text ({shown}); give text in UTF-8"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["hook"]:  # a client's lifecycle hook: the fast way, standard library only
        from eventmem.adapters.hooks.fastpath import main as run_hook

        return run_hook(arguments[1:])
    from eventmem.runner.heap import limit_allocator_arenas

    limit_allocator_arenas()  # (before any thread: a server's threads would each hold an arena of their own)
    if arguments == ["--version"]:  # (without loading every command's modules)
        from eventmem import __version__

        print(f"eventmem {__version__}")
        return 0
    from eventmem.adapters.command_line import configure_logging, run_command
    from eventmem.adapters.hooks.commands import run_hook_command

    configure_logging()
    if refused := _not_utf8(arguments):
        print(refused, file=sys.stderr)
        return 2
    args = build_main_parser().parse_args(arguments)
    raw = args.func in (cmd_serve, run_hook_command)  # (their stdout is the protocol's)
    return run_command(args.func, args, raw_stdout=raw)


def build_main_parser() -> argparse.ArgumentParser:
    """The parser of every ``eventmem`` command (``eventmem hook`` and ``--version`` aside)."""
    from eventmem.adapters.cli import build_parser
    from eventmem.adapters.hooks.commands import add_hook_commands, run_hook_command

    return build_parser(
        serve=cmd_serve,
        serve_options=add_serve_options,
        more=lambda sub, options: add_hook_commands(sub, options, run_hook_command),
    )


if __name__ == "__main__":
    sys.exit(main())
