"""The database's disk full, for real: the sync's tables live in a tablespace on a small tmpfs, which a
sync fills until PostgreSQL cannot extend a file. The sync says so in one line and exits non-zero,
nothing past the last committed batch is in the database, and once the disk is bigger the next sync
(or the same ``--follow``) goes on and answers like a rebuild. Mounting needs root: elsewhere these
tests skip, as they do on an external server (its disk is not here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import ProcessGroup, eventmem_command
from test_postgres_faults import assert_like_a_rebuild, fill, sync_args
from test_postgres_sync import ids_now, rows, run, wait_for

from eventmem.service import MemoryService

pytestmark = pytest.mark.postgres

SMALL = "1m"
"""Room for the empty schema and a few memories, not for hundreds."""
BIG = "64m"
PASSWORD = "not-to-be-shown"


@dataclass
class SmallDisk:
    folder: Path

    def grow(self) -> None:
        """Free space the way an operator would: a bigger disk under the same files."""
        subprocess.run(["mount", "-o", f"remount,size={BIG}", str(self.folder)], check=True, capture_output=True)


def _mount(folder: Path, owner: tuple[int, int]) -> str | None:
    """Mount a small tmpfs on ``folder`` owned by the server's user; why not, if it cannot be."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    options = f"size={SMALL},mode=0700,uid={owner[0]},gid={owner[1]}"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        return f"mounting a tmpfs is not permitted here: {done.stderr.strip()}"
    return None


def _unmount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=True)  # (a file still held open)


@pytest.fixture
def small_disk(pg_server: Any, pg_uri: str) -> Iterator[SmallDisk]:
    """The test's database with every eventmem table on a small tmpfs of its own (a tablespace)."""
    if pg_server.external:
        pytest.skip("fills a disk of the server's: only a server the tests started, on this machine")
    folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-disk-"))  # (the server's user must reach it)
    reason = _mount(folder, pg_server.data_owner())
    if reason is not None:
        folder.rmdir()
        pytest.skip(reason)
    database = urlsplit(pg_uri).path.lstrip("/")
    space = f"eventmem_small_{database}"
    try:
        with pg_server.admin() as admin:
            admin.execute(f"CREATE TABLESPACE {space} LOCATION '{folder}'")
            admin.execute(f"ALTER DATABASE {database} SET default_tablespace = {space}")
        yield SmallDisk(folder)
    finally:
        try:
            pg_server.drop_database(database)
            with pg_server.admin() as admin:
                admin.execute(f"DROP TABLESPACE IF EXISTS {space}")
        finally:
            _unmount(folder)
            folder.rmdir()


def with_password(uri: str) -> str:
    """``uri`` with a password in it (the tests' server trusts its socket and ignores it)."""
    parts = urlsplit(uri)
    user = parts.username or "postgres"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{user}:{PASSWORD}@{host}", parts.path, parts.query, ""))


def positions(uri: str) -> list[tuple[Any, ...]]:
    return rows(uri, "SELECT segment, byte_offset, digest FROM eventmem_positions ORDER BY segment")


def saved_up_to_the_committed_position(uri: str, project: Path) -> set[str]:
    """The memories the journal's segments save before the offsets the database holds."""
    saved: set[str] = set()
    for segment, offset, _ in positions(uri):
        prefix = (project / ".eventmem" / segment).read_bytes()[:offset]
        saved.update(event["memory"] for event in map(json.loads, prefix.splitlines()) if event["type"] == "saved")
    return saved


def test_a_sync_into_a_full_disk_fails_in_one_line_keeps_what_was_committed_and_resumes_once_there_is_room(
    service: MemoryService, project: Path, pg_server: Any, pg_uri: str, small_disk: SmallDisk
) -> None:
    uri = with_password(pg_uri)
    first = fill(service, 10)
    run(*sync_args(uri, project))
    committed = positions(pg_uri)
    assert ids_now(pg_uri, "p") == first
    later = fill(service, 600) - first
    failed = run(*sync_args(uri, project), check=False)
    assert failed.returncode != 0
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "out of disk space" in failed.stderr
    assert "No space left on device" in failed.stderr
    assert PASSWORD not in failed.stderr + failed.stdout
    assert ids_now(pg_uri, "p") == first  # nothing of the failed batch
    assert positions(pg_uri) == committed  # the position never passed what was committed
    assert saved_up_to_the_committed_position(pg_uri, project) == first
    small_disk.grow()
    run(*sync_args(uri, project))
    assert ids_now(pg_uri, "p") == first | later
    assert_like_a_rebuild(pg_server, pg_uri, project)


def test_follow_outlives_a_full_disk_and_catches_up_once_there_is_room(
    service: MemoryService,
    project: Path,
    pg_server: Any,
    pg_uri: str,
    small_disk: SmallDisk,
    processes: ProcessGroup,
    tmp_path: Path,
) -> None:
    first = fill(service, 5)
    log = tmp_path / "follow.log"
    with open(log, "wb") as stderr:
        proc = processes.spawn(
            eventmem_command(*sync_args(with_password(pg_uri), project), "--follow"),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    wait_for(lambda: ids_now(pg_uri, "p") == first, "the first sync")
    later = fill(service, 600) - first
    wait_for(lambda: "out of disk space" in log.read_text(), "the follower to meet the full disk")
    assert proc.poll() is None  # still running
    # (batches that fitted were committed: the rows are those of the journal up to the position)
    assert first <= ids_now(pg_uri, "p") == saved_up_to_the_committed_position(pg_uri, project) < first | later
    small_disk.grow()
    wait_for(lambda: ids_now(pg_uri, "p") == first | later, "the follower to catch up once there is room")
    assert proc.poll() is None
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert "Traceback" not in text
    assert PASSWORD not in text
    assert_like_a_rebuild(pg_server, pg_uri, project)


def test_a_first_sync_that_does_not_fit_leaves_no_row_and_the_next_one_loads_everything(
    service: MemoryService, project: Path, pg_server: Any, pg_uri: str, small_disk: SmallDisk
) -> None:
    saved = fill(service, 600)
    failed = run(*sync_args(with_password(pg_uri), project), check=False)
    assert failed.returncode != 0
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "out of disk space" in failed.stderr
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_memories") == [(0,)]  # the load was one transaction
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_events") == [(0,)]
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_projects") == [(0,)]
    small_disk.grow()
    run(*sync_args(pg_uri, project))
    assert ids_now(pg_uri, "p") == saved
    assert_like_a_rebuild(pg_server, pg_uri, project)
