"""File primitives: a cross-process lock and atomic replacement of derived files."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["FileLock", "atomic_replace", "atomic_write", "fsync_dir"]


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | memoryview, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the new one, never a mix.

    Temp file in the same directory, fsync, rename, fsync the directory; the temp file is removed
    if anything fails.
    """
    atomic_replace(path, lambda tmp: tmp.write_bytes(data), durable=durable)


def atomic_replace(path: Path, write: Callable[[Path], object], *, durable: bool = True) -> None:
    """:func:`atomic_write` of the file that ``write`` writes at the temp path it is given (for
    writers that take a file name, such as FAISS's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class FileLock:
    """An exclusive ``flock`` on a dedicated lock file, shared by every process of a project.

    ``flock`` belongs to the open file description, so other opens of other files in this process
    never drop it (POSIX ``lockf`` locks do). The kernel releases it when the process dies, so a
    killed writer leaves no stale lock behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def hold(self, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the lock for the block; with ``blocking=False`` yields ``False`` when it is taken."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
