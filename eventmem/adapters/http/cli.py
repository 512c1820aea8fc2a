"""``eventmem serve --http``: its options, and the runner that starts uvicorn on one port."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

    from eventmem.journal.project import RootChoice

# Every ``eventmem`` command builds the parser: the server's modules load only when it starts.

__all__ = ["DEFAULT_PORT", "BoundHttpServer", "add_http_options", "bind_http", "serve_http"]

DEFAULT_PORT = 8420
log = logging.getLogger("eventmem.http")


def add_http_options(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options for the HTTP server (MCP, REST and the web UI on one port)."""
    group = parser.add_argument_group("HTTP (MCP Streamable HTTP at /mcp, REST at /api/v1, the web UI at /)")
    group.add_argument("--http", action="store_true", help="serve over HTTP instead of stdio")
    group.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    group.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    group.add_argument(
        "--project", action="append", metavar="NAME=PATH", help="serve this project under NAME (repeatable)"
    )
    group.add_argument("--projects-dir", metavar="DIR", help="serve every project folder in DIR, by folder name")
    group.add_argument(
        "--default-project",
        metavar="NAME",
        help="with several projects: the one /api/v1/memories (and every route without a project) and /mcp are about",
    )
    group.add_argument("--token-file", help="file holding the bearer token (else EVENTMEM_TOKEN)")
    group.add_argument("--allow-host", action="append", default=[], help="another Host name clients may use")
    group.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        help="another Origin (scheme://host:port) whose pages may use the server, cross-site (CORS); "
        "by default only the server's own pages may",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=20.0,
        help="seconds a client has to send a request whole, headers and body (default 20)",
    )
    group.add_argument(
        "--rate-limit",
        type=float,
        default=200.0,
        help="requests per second per client, bursts of five seconds' worth (0: no limit)",
    )


def serve_http(
    args: argparse.Namespace, default_root: Callable[[], RootChoice], build_server: Callable[..., Any]
) -> int:
    """Run the HTTP server until interrupted. The bound address is printed to stderr as
    ``eventmem: serving http://HOST:PORT/``. Binding to a non-loopback address needs a token."""
    bound = bind_http(args, default_root, build_server)
    print(f"eventmem: serving {bound.url}/ (projects: {bound.names})", file=sys.stderr, flush=True)
    bound.run()
    return 0


class BoundHttpServer:
    """The HTTP server, its socket listening, not yet serving: :meth:`run` serves until :meth:`stop`
    (or a signal, in the main thread)."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket, url: str, names: str) -> None:
        self.server, self.sock, self.url, self.names = server, sock, url, names

    def run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def stop(self) -> None:
        self.server.should_exit = True


def bind_http(
    args: argparse.Namespace, default_root: Callable[[], RootChoice], build_server: Callable[..., Any]
) -> BoundHttpServer:
    """Check ``eventmem serve --http``'s options, build the app and listen on its port (refusals raise
    :class:`InvalidInput` before anything listens)."""
    import uvicorn

    from eventmem.adapters.http.app import create_app
    from eventmem.adapters.http.projects import Projects, parse_project_option, projects_in
    from eventmem.adapters.http.security import GuardSettings, is_loopback, read_token
    from eventmem.adapters.http.timeouts import bounded_protocol
    from eventmem.context.project_context import write_section
    from eventmem.core.errors import InvalidInput
    from eventmem.service import open_service

    token = read_token(args.token_file)
    if not is_loopback(args.host) and token is None:
        raise InvalidInput(
            f"refusing to serve on {args.host} without a token: anyone on the network could read and change the "
            "memory. Set EVENTMEM_TOKEN or --token-file (at least 16 characters), or bind to 127.0.0.1"
        )
    if not 0.5 <= args.request_timeout <= 3600:  # (NaN fails)
        raise InvalidInput(f"--request-timeout must be from 0.5 to 3600 seconds, not {args.request_timeout}")
    if not 0 <= args.port <= 65535:
        raise InvalidInput(f"--port must be from 0 to 65535, not {args.port}")
    entries = [parse_project_option(value) for value in args.project or ()]
    if args.projects_dir:
        entries += projects_in(Path(args.projects_dir))
    database_names = {
        path.resolve(): name for name, path in entries
    }  # (a project's name in a database, if one is served)
    if not entries:
        root = default_root()
        entries = [(_default_name(root.root), root.root)]
    store, store_name = getattr(args, "store", None), getattr(args, "project_name", None)
    projects = Projects(
        entries,
        lambda root: open_service(
            root,
            background_vectors=True,
            store=store,
            store_name=store_name or database_names.get(root.root.resolve()),
            sections=write_section,
        ),
        default_name=getattr(args, "default_project", None),
    )
    settings = GuardSettings(
        host=args.host,
        token=token,
        allowed_hosts=list(args.allow_host),
        cors_origins=list(args.cors_origin),
        rate_per_second=args.rate_limit,
        rate_burst=max(1, int(args.rate_limit * 5)),
    )
    app = create_app(projects, settings, build_server, tools=args.tools)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: uvicorn given a socket leaves Nagle on, and a response sent in
    # two writes then waits for the client's delayed ACK (measured: 44 ms a request instead of 1.4)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    sock.listen(128)
    port = sock.getsockname()[1]
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    config = uvicorn.Config(
        app,
        http=bounded_protocol(args.request_timeout),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return BoundHttpServer(uvicorn.Server(config), sock, f"http://{shown_host}:{port}", ", ".join(projects.by_name))


def _default_name(root: Path) -> str:
    """The folder's name when it is a valid project name, else ``default``."""
    from eventmem.adapters.http.projects import NAME_PATTERN

    return root.name if NAME_PATTERN.match(root.name) and ".." not in root.name else "default"
