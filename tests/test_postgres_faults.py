"""Faults between a sync and its database: a transaction killed, the server stopped mid-sync and
started again, a connection dropped or the server stopped under ``--follow``. Nothing half-written is
ever committed, the next sync (or the follower itself) goes on, and the answers equal a rebuild's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import REPO, ProcessGroup, eventmem_command
from pg_answers import answers
from test_postgres_sync import ids_now, rows, run, wait_for

from eventmem.projectors.postgres.schema import migrate
from eventmem.service import MemoryService

pytestmark = pytest.mark.postgres

SYNC = "eventmem sync"
"""The sync's application_name in pg_stat_activity."""


def fill(service: MemoryService, count: int = 40) -> set[str]:
    return {service.save(f"Memory number {i} about topic {i % 7}.", title=f"note {i}").id for i in range(count)}


def sync_args(uri: str, project: Path) -> list[str]:
    return ["sync", "--to", uri, "--project", f"p={project}", "--no-global"]


def backend_of_sync(uri: str, *, waiting_on_a_lock: bool = False) -> int:
    """The pid of the sync's server process (once it is connected, or waiting on a lock)."""
    found: list[int] = []

    def look() -> bool:
        sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
        if waiting_on_a_lock:
            sql += " AND wait_event_type = 'Lock'"
        found[:] = [r[0] for r in rows(uri, sql, SYNC)]
        return bool(found)

    wait_for(look, "the sync's connection")
    return found[0]


@pytest.fixture
def lock_positions(pg_uri: str) -> Iterator[Callable[[], Any]]:
    """Open a transaction that holds writes to the positions table back (reads pass): a sync's
    load then writes every row and blocks on the positions, mid-transaction."""
    held: list[Any] = []

    def hold() -> Any:
        with psycopg.connect(pg_uri) as setup:
            migrate(setup)
        conn = psycopg.connect(pg_uri)
        conn.execute("LOCK TABLE eventmem_positions IN EXCLUSIVE MODE")
        held.append(conn)
        return conn

    yield hold
    for conn in held:
        conn.close()


def assert_like_a_rebuild(pg_server: Any, uri: str, project: Path) -> None:
    rebuilt = pg_server.uri_of(pg_server.new_database())
    run(*sync_args(rebuilt, project))
    with psycopg.connect(uri) as synced, psycopg.connect(rebuilt) as fresh:
        assert answers(synced, "p") == answers(fresh, "p")


def test_a_sync_whose_transaction_is_killed_commits_nothing_and_the_next_completes(
    service: MemoryService,
    project: Path,
    pg_server: Any,
    pg_uri: str,
    lock_positions: Callable[[], Any],
    processes: ProcessGroup,
) -> None:
    saved = fill(service)
    held = lock_positions()
    proc = processes.spawn(
        eventmem_command(*sync_args(pg_uri, project)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    backend = backend_of_sync(pg_uri, waiting_on_a_lock=True)
    rows(pg_uri, "SELECT pg_terminate_backend(%s)", backend)
    assert proc.wait(timeout=60) == 1
    assert proc.stderr is not None
    error = proc.stderr.read().decode()
    assert len(error.strip().splitlines()) == 1, error
    assert "lost the connection to PostgreSQL" in error
    held.rollback()
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_memories") == [(0,)]
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_projects") == [(0,)]
    run(*sync_args(pg_uri, project))
    assert ids_now(pg_uri, "p") == saved
    assert_like_a_rebuild(pg_server, pg_uri, project)


def test_a_database_stopped_mid_sync_and_started_again_loses_nothing(
    service: MemoryService,
    project: Path,
    pg_server: Any,
    pg_uri: str,
    lock_positions: Callable[[], Any],
    processes: ProcessGroup,
) -> None:
    if pg_server.external:
        pytest.skip("stops the server: only one the tests started")
    first = fill(service, 10)
    run(*sync_args(pg_uri, project))
    later = fill(service, 30) - first
    lock_positions()
    proc = processes.spawn(
        eventmem_command(*sync_args(pg_uri, project)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    backend_of_sync(pg_uri, waiting_on_a_lock=True)
    pg_server.stop()
    assert proc.wait(timeout=60) == 1
    assert proc.stderr is not None
    assert len(proc.stderr.read().decode().strip().splitlines()) == 1
    pg_server.start()
    assert ids_now(pg_uri, "p") == first  # the first sync's commit, none of the second's rows
    run(*sync_args(pg_uri, project))
    assert ids_now(pg_uri, "p") == first | later
    assert_like_a_rebuild(pg_server, pg_uri, project)


def test_follow_goes_on_after_its_connection_is_dropped(
    service: MemoryService, project: Path, pg_server: Any, pg_uri: str, processes: ProcessGroup
) -> None:
    first = fill(service, 5)
    proc = processes.spawn(
        eventmem_command(*sync_args(pg_uri, project), "--follow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(lambda: ids_now(pg_uri, "p") == first, "the first sync")
    rows(pg_uri, "SELECT pg_terminate_backend(%s)", backend_of_sync(pg_uri))
    later = service.save("Saved after the connection was dropped.").id
    try:
        wait_for(lambda: ids_now(pg_uri, "p") == first | {later}, "the follower to reconnect and take the save")
    except AssertionError:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        assert proc.stderr is not None
        raise AssertionError(f"the follower said: {proc.stderr.read().decode()!r}") from None
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert_like_a_rebuild(pg_server, pg_uri, project)


def test_follow_waits_out_a_stopped_database(
    service: MemoryService, project: Path, pg_server: Any, pg_uri: str, processes: ProcessGroup
) -> None:
    if pg_server.external:
        pytest.skip("stops the server: only one the tests started")
    first = fill(service, 5)
    proc = processes.spawn(
        eventmem_command(*sync_args(pg_uri, project), "--follow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(lambda: ids_now(pg_uri, "p") == first, "the first sync")
    pg_server.stop()
    later = service.save("Saved while the database was down.").id
    pg_server.start()
    wait_for(lambda: ids_now(pg_uri, "p") == first | {later}, "the follower to take the save once the server is back")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_a_sigterm_to_the_test_process_leaves_no_server_behind(pg_server: Any) -> None:
    if pg_server.external:
        pytest.skip("about the server the tests start")
    with subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "postgres_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO / "tests",
    ) as proc:
        try:
            assert proc.stdout is not None
            pid_text, pgdata = proc.stdout.readline().decode().split()
            postmaster = int(pid_text)
            os.kill(postmaster, 0)  # (running)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == -signal.SIGTERM
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    wait_for(lambda: not _running(postmaster), "the server to stop")
    assert not Path(pgdata).exists()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
