"""Shared fixtures: every test gets its own project directory (a real git repo) and its own
user-wide global memory, and no environment variable from the developer's shell leaks in."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import eventmem.store as store_module
from eventmem.project import RootChoice
from eventmem.service import MemoryService, open_service

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EVENTMEM_") or name in ("PROJECT_MEMORY_ROOT", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVENTMEM_GLOBAL_DIR", str(tmp_path / "global-memory"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "eventmem tests")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "tests@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "eventmem tests")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "tests@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(exist_ok=True)


@pytest.fixture(autouse=True)
def repository_memory_untouched() -> Iterator[None]:
    """No test may leave memory in the repository itself (a server started in the wrong root would)."""
    before = (REPO / ".eventmem").exists()
    yield
    assert before or not (REPO / ".eventmem").exists(), "a test wrote .eventmem/ into the repository"


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return result.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty git repository to keep memories in."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


@pytest.fixture
def service(project: Path) -> Iterator[MemoryService]:
    svc = open_service(RootChoice(project, "test"))
    yield svc
    svc.close()


def bulk_everywhere(*, snapshot_every_catch_up: bool = False) -> contextlib.ExitStack:
    """Small journals take the paths meant for large ones (see store.BULK_KEYWORDS_MIN): the
    keyword index filled by a thread, digests made by a thread, the cyclic GC paused; and, if asked,
    a snapshot due at every catch-up."""
    stack = contextlib.ExitStack()
    for name, value in (
        ("BULK_KEYWORDS_MIN", 0),
        ("HASH_AHEAD_BYTES", 0),
        ("GC_PAUSE_BYTES", 0),
    ):
        stack.enter_context(mock.patch.object(store_module, name, value))
    if snapshot_every_catch_up:
        stack.enter_context(mock.patch.object(store_module.Store, "_snapshot_due", lambda self: 1))
    return stack


def reopen(project: Path) -> MemoryService:
    """A fresh service on the same project, as another process would see it."""
    return open_service(RootChoice(project, "test"))


class ProcessGroup:
    """Spawned processes, each in its own process group, killed on teardown so none outlive a test."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = subprocess.Popen(args, start_new_session=True, **kwargs)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def processes() -> Iterator[ProcessGroup]:
    group = ProcessGroup()
    yield group
    group.kill_all()


def run_quick_benchmark(script: str, tmp_path: Path, timeout: float = 300) -> dict[str, Any]:
    """Run ``tools/<script> --quick --out FILE`` and return its JSON (checked to equal the file's)."""
    out = tmp_path / f"{script}.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / script), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == data
    return data


def eventmem_command(*args: str) -> list[str]:
    """The eventmem CLI, run with this interpreter (as a client config would run it)."""
    return [sys.executable, "-m", "eventmem", *args]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One PostgreSQL with pgvector for the session (see tests/postgres_server.py)."""
    pytest.importorskip("psycopg")
    from postgres_server import start_server

    server = start_server()
    yield server
    server.close()


@pytest.fixture
def pg_uri(pg_server: Any) -> Iterator[str]:
    """The address of a database of this test's own on the session's server."""
    name = pg_server.new_database()
    yield pg_server.uri_of(name)
    pg_server.drop_database(name)
