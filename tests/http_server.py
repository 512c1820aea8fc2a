"""Start ``eventmem serve --http --port 0`` as a real process and learn its address from stderr."""

from __future__ import annotations

import os
import re
import subprocess
import time
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
    with log.open("wb") as errors:
        proc = processes.spawn(
            [*eventmem_command("serve", "--http", "--port", "0", *args)],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    deadline = time.monotonic() + WAIT
    base = ""
    while not base:
        found = ADDRESS.search(log.read_text(encoding="utf-8", errors="replace"))
        if found:
            base = found.group(1).replace("0.0.0.0", "127.0.0.1")
            break
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)  # polling the log file for the address line, bounded by the deadline
    import httpx

    while True:
        try:
            httpx.get(base + "/api/v1/projects", timeout=5, headers=_auth(env))
            break
        except httpx.TransportError:
            pass
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
        assert time.monotonic() < deadline, "the server did not answer"
        time.sleep(0.05)
    yield base
    proc.terminate()
    proc.wait(timeout=WAIT)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text


def _auth(env: dict[str, str] | None) -> dict[str, str]:
    token = (env or {}).get("EVENTMEM_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}
