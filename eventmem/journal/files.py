"""File primitives: a cross-process lock, atomic replacement of derived files, and the check that
keeps every file eventmem opens inside its project.

Nothing outside the project: a project's files may come from someone else (a merged branch can
carry a symbolic link named ``.eventmem/cache``), so every component of a path below a project root
is checked with ``lstat`` before eventmem reads or writes it (:func:`check_inside`), and files are
created or appended with ``O_NOFOLLOW``. The root itself may be reached through links (a checkout
under ``/home -> /data/home``): only what is inside it is checked. The roots are the ones
:class:`eventmem.journal.project.ProjectPaths` was made for (:func:`confine`); the lock and the atomic
writes below check any path under one of them, so no caller can forget to.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, Self

from eventmem.core.errors import UnsafePath

__all__ = [
    "FileLock",
    "Replacement",
    "atomic_replace",
    "atomic_write",
    "check_inside",
    "check_path",
    "confine",
    "fsync_dir",
    "lstat_checked",
    "make_dirs",
    "open_append",
    "remove_leftover_temp_files",
]

_ROOTS: dict[str, None] = {}
"""Project roots (as given, not resolved) whose insides are checked; see :func:`confine`."""
_ROOTS_LOCK = threading.Lock()
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def confine(root: Path) -> None:
    """Check every path below ``root`` that the functions of this module open (idempotent)."""
    key = os.path.normpath(os.fspath(root))
    if key not in _ROOTS:
        with _ROOTS_LOCK:
            _ROOTS[key] = None
            _ROOT_OF.clear()  # (a path may be below the new root)


_ROOT_OF: dict[str, Path | None] = {}
""":func:`root_of` by absolute path, while no root is added (a catch-up asks for the same few paths)."""
_STEPS: dict[tuple[str, str, str], tuple[tuple[str, str, bool], ...]] = {}
"""The components :func:`check_inside` looks at, by (root, absolute path, kind): (path, path shown, a
folder?) for each. Only the names are kept: every component is looked at again on each check."""
_MEMO_ENTRIES = 4096
"""Either table above is emptied when it grows past this many entries (any path can be checked)."""


def root_of(path: Path) -> Path | None:
    """The innermost confined root that ``path`` is below (``None``: not in a project)."""
    given = os.fspath(path)
    try:
        return _ROOT_OF[given]
    except KeyError:
        pass
    roots = list(_ROOTS)
    text = os.path.normpath(given)
    best = ""
    for root in roots:
        if len(root) > len(best) and (text == root or text.startswith(root.rstrip(os.sep) + os.sep)):
            best = root
    found = Path(best) if best else None
    if os.path.isabs(given):  # (a relative one depends on the working directory)
        with _ROOTS_LOCK:
            if len(_ROOTS) == len(roots):  # (no root was added meanwhile: roots are never removed)
                if len(_ROOT_OF) >= _MEMO_ENTRIES:
                    _ROOT_OF.clear()
                _ROOT_OF[given] = found
    return found


def _steps(root: Path, path: Path, kind: str) -> tuple[tuple[str, str, bool], ...]:
    """(component, its path below the root as shown, must be a folder) for each component of ``path``
    below ``root``; raises :class:`UnsafePath` for a path outside the root."""
    key = (os.fspath(root), os.fspath(path), kind)
    steps = _STEPS.get(key)
    if steps is not None:
        return steps
    relative = os.path.relpath(os.path.normpath(key[1]), os.path.normpath(key[0]))
    parts = [] if relative == "." else relative.split(os.sep)
    if ".." in parts or os.path.isabs(relative):
        raise UnsafePath(f"{path} is not inside the project {root}; eventmem only reads and writes inside it")
    current = Path(root)
    found: list[tuple[str, str, bool]] = []
    for index, part in enumerate(parts):
        current = current / part
        want_folder = index < len(parts) - 1 or kind == "folder"
        found.append((os.fspath(current), "/".join(parts[: index + 1]), want_folder))
    steps = tuple(found)
    if os.path.isabs(key[0]) and os.path.isabs(key[1]):  # (a relative one depends on the working directory)
        if len(_STEPS) >= _MEMO_ENTRIES:
            _STEPS.clear()
        _STEPS[key] = steps
    return steps


def check_inside(root: Path, path: Path, *, kind: Literal["file", "folder"] = "file", create: bool = False) -> Path:
    """``path`` if it is a real descendant of ``root``: every component below the root that exists
    is a real folder (the last one a regular file or a folder, as ``kind`` says), none a symbolic
    link. ``create`` makes the missing folders (with ``kind="folder"``, ``path`` too). Raises
    :class:`UnsafePath` naming the path and what to do.

    Every component is looked at (``lstat``) on every call; only the split of ``path`` into its
    components is remembered, so that a check costs its system calls and little more."""
    _walk(root, path, kind, create)
    return path


def _walk(root: Path, path: Path, kind: str, create: bool) -> os.stat_result | None:
    """:func:`check_inside`'s checks; the ``lstat`` of ``path`` itself, ``None`` if it is missing."""
    steps = _steps(root, path, kind)
    if create and steps and not os.path.isdir(root):
        os.makedirs(root, exist_ok=True)  # the root itself (the global memory's, at first)
    info: os.stat_result | None = None
    for current, shown, want_folder in steps:
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if not (create and want_folder):
                return None  # nothing below exists yet; whoever creates it checks again
            try:
                os.mkdir(current)
            except FileExistsError:
                pass  # a racing process made it: checked below like any other
            info = os.lstat(current)
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            fix = "; `eventmem doctor --fix` does it" if _fixed_by_doctor(current) else ""
            raise UnsafePath(
                f"{shown} (in {root}) is a symbolic link to {os.readlink(current)}; eventmem never reads or "
                f"writes through links inside the project. Remove the link (replace it with a real "
                f"{'folder' if want_folder else 'file'}{fix}) and retry."
            )
        if want_folder and not stat.S_ISDIR(mode):
            raise UnsafePath(f"{shown} (in {root}) is not a folder; move it away and retry.")
        if not want_folder and not stat.S_ISREG(mode):
            raise UnsafePath(f"{shown} (in {root}) is not a regular file; move it away and retry.")
    return info


_RELINKED: Final = ("cache", "journal", "archive", "local")
"""The folders of a memory folder that ``eventmem doctor --fix`` makes real again (``journal/relink.py``)."""


def _fixed_by_doctor(path: str) -> bool:
    """Whether ``path``, a link, is one ``eventmem doctor --fix`` replaces: a folder of a project's
    ``.eventmem/`` it knows, or anything inside the cache."""
    parts = Path(path).parts
    if ".eventmem" not in parts[:-1]:
        return False
    last = len(parts) - 1 - parts[::-1].index(".eventmem")
    below = parts[last + 1 :]
    return (len(below) == 1 and below[0] in _RELINKED) or (len(below) > 1 and below[0] == "cache")


def check_path(path: Path, *, kind: Literal["file", "folder"] = "file") -> Path:
    """:func:`check_inside` for a path in any confined project (outside every project: unchecked)."""
    root = root_of(path)
    return path if root is None else check_inside(root, path, kind=kind)


def lstat_checked(path: Path) -> os.stat_result | None:
    """:func:`check_path` of a file, and its ``lstat`` from that check (``None``: it is missing)."""
    root = root_of(path)
    if root is not None and _steps(root, path, "file"):
        return _walk(root, path, "file", False)
    try:  # (outside every project, or a project's root itself: nothing below a root to check)
        return os.lstat(path)
    except FileNotFoundError:
        return None


def make_dirs(folder: Path) -> None:
    """``mkdir -p folder``; inside a project, only through real folders (:func:`check_inside`)."""
    root = root_of(folder)
    if root is None:
        folder.mkdir(parents=True, exist_ok=True)
    else:
        check_inside(root, folder, kind="folder", create=True)


def open_append(path: Path, flags: int = os.O_WRONLY, mode: int = 0o644) -> int:
    """A descriptor appending to ``path`` (created if missing), never through a symbolic link: its
    folders are checked and the file itself is opened with ``O_NOFOLLOW``."""
    make_dirs(path.parent)
    check_path(path)
    try:
        return os.open(path, flags | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, mode)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePath(f"{path} is a symbolic link; eventmem never writes through links. Remove it.") from exc
        raise


_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")
"""The name of :func:`atomic_write`'s temp file for ``target`` (``tempfile.mkstemp``'s eight characters)."""


def remove_leftover_temp_files(folder: Path, targets: Callable[[str], bool]) -> list[tuple[str, int]]:
    """Remove the temp files :func:`atomic_write` left in ``folder`` for the file names ``targets``
    accepts: a writer killed (``SIGKILL``, power loss) between creating its temp file and renaming
    it leaves one behind, as large as what it was writing. The caller holds the lock every writer of
    those names holds, so none of them is being written. Links and folders are left alone. Best
    effort: a file that cannot be removed stays, and the write that asked goes on. The (name, size)
    of each removed."""
    removed: list[tuple[str, int]] = []
    check_path(folder, kind="folder")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.fullmatch(entry.name)
        if match is None or not targets(match["target"]):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                os.unlink(entry.path)
                removed.append((entry.name, info.st_size))
        except OSError:
            continue
    return removed


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | memoryview, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the new one, never a mix.

    Temp file in the same directory (written through the descriptor that created it), fsync,
    rename, fsync the directory; the temp file is removed if anything fails.
    """
    _replace(path, data, None, durable)


def atomic_replace(path: Path, write: Callable[[Path], object], *, durable: bool = True) -> None:
    """:func:`atomic_write` of the file that ``write`` writes at the temp path it is given (for
    writers that take a file name, such as FAISS's)."""
    _replace(path, b"", write, durable)


def _replace(path: Path, data: bytes | memoryview, write: Callable[[Path], object] | None, durable: bool) -> None:
    """Inside a project the folders are checked (:func:`check_inside`); the temp file is created
    with ``O_EXCL`` (never through a link) and the rename replaces a link at ``path`` rather than
    following it."""
    make_dirs(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable and write is None:
                os.fsync(fd)
        finally:
            os.close(fd)
        if write is not None:
            write(tmp)
            if durable:
                fd = os.open(tmp, os.O_RDONLY | _NOFOLLOW)
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


class Replacement:
    """A new version of ``path`` written in pieces into a temp file (named as :func:`atomic_write`
    names its own), hashed as it is written: :meth:`replace` puts it at ``path`` (readers see the old
    file or the new one), and it is removed when the ``with`` block ends otherwise. For files compared
    and replaced without being held whole in memory.

    The temp file is made in ``scratch`` (``path``'s folder by default): a folder that others watch
    (a tracked ``.ai/``) then sees a temp file only when the file changes. Renamed from there when
    both are on one file system; else copied into a temp file beside ``path``, then renamed."""

    def __init__(self, path: Path, scratch: Path | None = None) -> None:
        self.path = path
        folder = path.parent if scratch is None else scratch
        make_dirs(path.parent)
        make_dirs(folder)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        self._temp = Path(name)
        self._file = os.fdopen(fd, "wb", buffering=1 << 16)
        self._sha256 = hashlib.sha256()
        self._placed = False

    def write(self, data: bytes) -> None:
        self._sha256.update(data)
        self._file.write(data)

    @property
    def sha256(self) -> str:
        """The hex SHA-256 of what was written so far."""
        return self._sha256.hexdigest()

    def replace(self, *, durable: bool = True) -> None:
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())
        self._file.close()
        try:
            os.replace(self._temp, self.path)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            atomic_replace(self.path, lambda beside: shutil.copyfile(self._temp, beside), durable=durable)
            os.unlink(self._temp)
        self._placed = True
        if durable:
            fsync_dir(self.path.parent)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._file.close()
        if not self._placed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._temp)


class FileLock:
    """An exclusive ``flock`` on a dedicated lock file, shared by every process of a project.

    ``flock`` belongs to the open file description, so other opens of other files in this process
    never drop it (POSIX ``lockf`` locks do). The kernel releases it when the process dies, so a
    killed writer leaves no stale lock behind.

    A thread that holds it may take it again (work the holder runs, such as a promotion deferred until
    after a reply, may append too): a second ``flock`` on another open of the file would wait for the
    first forever. Other threads and processes still wait.
    """

    _held = threading.local()
    """Per thread: the lock files it holds, and how many times."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def hold(self, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the lock for the block; with ``blocking=False`` yields ``False`` when it is taken."""
        held: dict[str, int] = self._held.__dict__.setdefault("paths", {})
        key = os.path.abspath(self.path)
        if held.get(key):
            held[key] += 1
            try:
                yield True
            finally:
                held[key] -= 1
            return
        with self._flock(blocking=blocking) as locked:
            if not locked:
                yield False
                return
            held[key] = 1
            try:
                yield True
            finally:
                del held[key]

    @contextlib.contextmanager
    def _flock(self, *, blocking: bool) -> Iterator[bool]:
        make_dirs(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o644)
        except OSError as exc:
            if os.path.islink(self.path):
                raise UnsafePath(f"the lock file {self.path} is a symbolic link; remove it and retry") from exc
            raise
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
