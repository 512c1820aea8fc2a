"""The ``eventmem`` program: the command line's commands (:mod:`eventmem.adapters.cli`, with ``eventmem
replay``'s) and ``eventmem serve``, the MCP server over stdio (:mod:`eventmem.adapters.mcp.server`) or over HTTP
with REST and the web UI (:mod:`eventmem.adapters.http`).

The one module that knows both adapters; neither imports the other. The MCP server is imported only
when ``eventmem serve`` runs, so the other commands do not pay for loading the MCP SDK.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from eventmem.adapters.cli import build_parser
from eventmem.adapters.command_line import chosen_root, configure_logging, run_command
from eventmem.adapters.http.cli import add_http_options

__all__ = ["cmd_serve", "main"]


def cmd_serve(args: argparse.Namespace) -> int:
    """``eventmem serve``: the MCP server over stdio until the client goes away (or SIGTERM); with
    ``--http``, MCP, REST and the web UI on one port (:mod:`eventmem.adapters.http`)."""
    if args.http:
        from eventmem.adapters.http.cli import serve_http
        from eventmem.adapters.mcp.server import build_server

        return serve_http(args, lambda: chosen_root(args.root), build_server)
    from eventmem.adapters.mcp.server import serve_stdio

    root = chosen_root(args.root)
    logging.getLogger("eventmem").info("serving %s (%s)", root.root, root.source)
    serve_stdio(root, tools=args.tools)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = build_parser(serve=cmd_serve, serve_options=add_http_options).parse_args(argv)
    return run_command(args.func, args, raw_stdout=args.func is cmd_serve)  # (serve's stdout is the protocol's)


if __name__ == "__main__":
    sys.exit(main())
