"""A keyword index as a snapshot stores it, and the SQLite database restored from it.

The stored form is :data:`FRAME`, the database's length (8 bytes), the serialized FTS5 database, then
the in-memory postings (none if they were not made): :func:`framed` and :func:`unframed`.

A process restores the database in memory (SQLite's ``deserialize``), or, with a folder, into a file
of its own there (:func:`restored_database`): a server, which holds it for hours. Deserialized, the
whole database is in the process's heap (about 370 bytes a memory: 37 MB at 100,000 memories); in a
file, the process keeps a page cache of :data:`PAGE_CACHE_KIB` and the rest is read through the
operating system's file cache, which other processes' needs can take back and which is read again
when asked. A ranked index asks FTS5 only for the words that are phrases
(:mod:`eventmem.projectors.postings`): at 100,000 memories a keyword search that asks one took 1.2
times as long at p50 from the file (``tools/bench_keywords.py``'s ``database_file``).

The file is removed from its folder as soon as SQLite holds it open, so no other process can open it
and a process that exits or is killed leaves nothing. A process killed in the milliseconds between
making the file and removing it leaves it behind: the next restore in that folder removes it once it
is older than :data:`ABANDONED_AFTER_SECONDS` and no process holds its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Final

__all__ = [
    "ABANDONED_AFTER_SECONDS",
    "FILE_PREFIX",
    "FRAME",
    "PAGE_CACHE_KIB",
    "framed",
    "restored_database",
    "unframed",
]

log = logging.getLogger("eventmem.projectors")

FRAME: Final = b"eventmem keywords 2\n"
"""The start of a stored keyword index (see the module's text)."""
FILE_PREFIX: Final = "keywords-"
"""The name of a restored database's file starts so (then ``tempfile``'s characters, then ``.sqlite``)."""
_FILE_SUFFIX: Final = ".sqlite"
PAGE_CACHE_KIB: Final = 2048
"""The page cache a database restored into a file keeps in the process (SQLite's default)."""
ABANDONED_AFTER_SECONDS: Final = 60.0
"""A restored database's file still in its folder after this long was left by a killed process."""


def framed(database: bytes, postings: bytes) -> bytes:
    """The stored form of a serialized database and its encoded postings (``b""``: none)."""
    return b"".join((FRAME, len(database).to_bytes(8, "little"), database, postings))


def unframed(data: bytes | memoryview) -> tuple[memoryview, bytes]:
    """(the database, the stored postings) of a stored index; :class:`ValueError` if it is not one."""
    view = memoryview(data)
    if bytes(view[: len(FRAME)]) != FRAME or len(view) < len(FRAME) + 8:
        raise ValueError("not a serialized keyword index")
    start = len(FRAME) + 8
    end = start + int.from_bytes(view[len(FRAME) : start], "little")
    if end > len(view):
        raise ValueError("a serialized keyword index cut short")
    return view[start:end], bytes(view[end:])  # (the postings copied: the thread reads them later)


def restored_database(database: memoryview, folder: Path | None) -> sqlite3.Connection:
    """A connection (autocommit, any thread) to the serialized ``database``: in a file of ``folder``
    already removed from it (see the module's text), else, without a folder or where the file cannot
    be made (a full disk, a read-only folder), in memory."""
    if folder is not None:
        in_file = _in_file(database, folder)
        if in_file is not None:
            return in_file
    db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    db.deserialize(database)
    return db


def _in_file(database: memoryview, folder: Path) -> sqlite3.Connection | None:
    _remove_abandoned(folder)
    path: str | None = None
    db: sqlite3.Connection | None = None
    try:
        fd, path = tempfile.mkstemp(prefix=FILE_PREFIX, suffix=_FILE_SUFFIX, dir=folder)
        with open(fd, "wb") as file:
            fcntl.flock(file, fcntl.LOCK_EX)  # (held until the file is removed: see _remove_abandoned)
            file.write(database)
            file.flush()
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            # a rollback journal in memory: a failed change is rolled back as in a database in memory;
            # nothing is synced (the file dies with the process)
            db.execute("PRAGMA journal_mode=MEMORY")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # (SQLite has read it)
            if os.stat(path).st_ino != os.fstat(file.fileno()).st_ino:
                raise OSError(f"{path} was replaced while it was written")
            os.unlink(path)
            path = None
        return db
    except (OSError, sqlite3.Error) as exc:
        log.info("the keyword index is kept in memory: its file in %s could not be made (%s)", folder, exc)
        if db is not None:
            db.close()
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return None


def _remove_abandoned(folder: Path) -> None:
    """Remove the restored databases' files a killed process left in ``folder``: older than
    :data:`ABANDONED_AFTER_SECONDS`, and no process holding the lock their maker holds while it writes."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(FILE_PREFIX) and e.name.endswith(_FILE_SUFFIX)]
    except OSError:
        return
    now = time.time()
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False) or now - entry.stat().st_mtime < ABANDONED_AFTER_SECONDS:
                continue
            # (not through a link, nor waiting on a pipe, if the name was swapped since it was listed)
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(entry.path)
            finally:
                os.close(fd)
            log.info("removed %s, a keyword index's file a killed process left", entry.path)
        except OSError:
            continue
