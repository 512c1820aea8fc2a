"""Start ``eventmem serve --http --port 0`` as a real process and learn its address from stderr."""

from __future__ import annotations

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
