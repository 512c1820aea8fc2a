"""Start ``eventmem serve --http --port 0`` as a real process and learn its address from stderr; or run
the same server in this process, on a thread, for tests of what it answers rather than of its process."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import ProcessGroup, eventmem_command

WAIT = 60.0
"""Seconds: a bound on every wait, far above what a loaded machine needs."""
ADDRESS = re.compile(r"serving (http://\S+?)/ \(projects")


@contextmanager
def http_server(
    processes: ProcessGroup, cwd: Path, *args: str, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:PORT``) of a server started in ``cwd`` with ``args``;
    waits until the server answers (whatever the answer: a rate limit or a token may refuse it).
    Its stderr goes to ``log`` (default: ``cwd/../http-server.log``)."""
    log = log or cwd.parent / "http-server.log"
    proc = processes.spawn(
        [*eventmem_command("serve", "--http", "--port", "0", *args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    found: list[str] = []
    announced = threading.Event()

    def drain() -> None:
        """Copy the server's stderr to ``log``; signal once the address line came (or the process ended)."""
        assert proc.stderr is not None
        with log.open("wb") as copy:
            for line in proc.stderr:
                copy.write(line)
                copy.flush()
                if not found and (match := ADDRESS.search(line.decode("utf-8", "replace"))):
                    found.append(match.group(1).replace("0.0.0.0", "127.0.0.1"))
                    announced.set()
        announced.set()

    reader = threading.Thread(target=drain, name="http-server-stderr", daemon=True)
    reader.start()
    assert announced.wait(WAIT), "the server did not start"
    assert found, log.read_text(encoding="utf-8", errors="replace")
    base = found[0]
    import httpx

    # the socket listens before the address is printed: the first request is queued, never refused
    httpx.get(base + "/api/v1/projects", timeout=WAIT, headers=_auth(env))
    yield base
    proc.terminate()
    proc.wait(timeout=WAIT)
    reader.join(WAIT)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text


def _auth(env: dict[str, str] | None) -> dict[str, str]:
    token = (env or {}).get("EVENTMEM_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


@contextmanager
def http_server_in_process(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """The base URL of ``eventmem serve --http --port 0 *args`` built as the command builds it (its
    parser, options and checks), listening on a real port of this machine, served by uvicorn on a thread
    of this process: the same server as :func:`http_server` without a process start (about 2 s of
    imports). ``env`` is this process's environment while the server runs. Fails the test on any
    error the server logged."""
    import httpx

    from eventmem.adapters.command_line import chosen_root
    from eventmem.adapters.http.cli import bind_http
    from eventmem.adapters.mcp.server import build_server
    from eventmem.main import build_main_parser

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    errors = _ErrorRecords()
    logging.getLogger().addHandler(errors)
    try:
        os.environ.update(env or {})
        os.chdir(cwd)
        parsed = build_main_parser().parse_args(["serve", "--http", "--port", "0", *args])
        bound = bind_http(parsed, lambda: chosen_root(parsed.root), build_server)
        serving = threading.Thread(target=bound.run, name="http-server-in-process", daemon=True)
        serving.start()
        try:
            httpx.get(bound.url + "/api/v1/projects", timeout=WAIT, headers=_auth(env))
            yield bound.url
        finally:
            bound.stop()
            serving.join(WAIT)
            assert not serving.is_alive(), "the in-process server did not stop"
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logging.getLogger().removeHandler(errors)
    assert not errors.failures, errors.failures


class _ErrorRecords(logging.Handler):
    """Every record logged with a traceback or at ERROR and above, as text (a server process's stderr
    would have shown them)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.failures.append(self.format(record))
