"""The journal: append-only JSONL segments, the only source of truth.

Writing: one writer at a time per journal directory (``flock`` on ``.eventmem/journal.lock``); the
whole batch of lines goes out in ``os.write`` calls on an ``O_APPEND`` descriptor, then ``fsync``.
A torn last line (a crash mid-write) is cut back by the next writer while it holds the lock. If a
write fails (disk full, read-only), the segment is cut back to its size before the write, so a
failed save leaves nothing behind.

Reading: a line counts only once its newline is on disk; an unterminated tail is the end of the log
for readers. A bad line followed by more data is corruption: reported with its file and byte offset,
never silently skipped or rewritten.
"""

from __future__ import annotations

import errno
import gc
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eventmem.codec import LineError, UnknownEvent, decode_line, decode_lines, encode_event
from eventmem.errors import JournalCorrupt, JournalUnwritable, LimitExceeded, UnsafePath
from eventmem.events import AnyEvent, Event
from eventmem.files import FileLock, fsync_dir
from eventmem.project import ProjectPaths

__all__ = ["Appended", "Journal", "ScanResult", "Segment", "name_of_segment"]

Decoded = AnyEvent | UnknownEvent


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment file; ``name`` is relative to ``.eventmem/`` (``journal/x.main.jsonl``)."""

    name: str
    path: Path
    size: int
    mtime_ns: int
    inode: int


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one append went: enough for a reader to move its cursor past it without reading it."""

    name: str
    """The segment, relative to ``.eventmem/``."""
    start: int
    """The segment's size before the append (after any torn tail was cut)."""
    data: bytes
    stat: tuple[int, int, int]
    """(size, mtime_ns, inode) of the segment just after the append."""


@dataclass(slots=True)
class ScanResult:
    events: list[Decoded] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    """Byte offset of each event's line (only filled when asked for)."""
    end: int = 0
    """Offset just past the last complete line read: where the next scan starts."""
    corrupt: list[JournalCorrupt] = field(default_factory=list)
    torn_tail: int = 0
    """Bytes after ``end`` that do not end in a newline yet (a write in progress or a torn write)."""


class Journal:
    def __init__(self, paths: ProjectPaths, *, durable: bool = True, max_segment_bytes: int = 0) -> None:
        self.paths = paths
        self.durable = durable
        self.max_segment_bytes = max_segment_bytes
        self.lock = FileLock(paths.lock_file)
        self.refused: dict[str, str] = {}
        """Segments (or folders) the last :meth:`segments` left out, by name, with the reason: symbolic
        links and other entries that are not real files inside the project."""

    # -- reading -------------------------------------------------------------------------------

    def segments(self) -> list[Segment]:
        """Every segment, archive first, sorted by name (order does not change the fold). A folder or a
        segment that is a symbolic link (or not a regular file) is never read: it is left out and
        named in :attr:`refused`."""
        found: list[Segment] = []
        refused: dict[str, str] = {}
        for folder in (self.paths.archive_dir, self.paths.journal_dir):
            try:
                self.paths.inside(folder, kind="folder")
                entries = list(os.scandir(folder))
            except UnsafePath as exc:
                refused[folder.name + "/"] = str(exc)
                continue
            except FileNotFoundError:
                continue
            for entry in entries:
                if not entry.name.endswith(".jsonl"):
                    continue
                name = name_of_segment(entry.path)
                if not entry.is_file(follow_symlinks=False):
                    kind = "a symbolic link" if entry.is_symlink() else "not a regular file"
                    refused[name] = f"{name} is {kind}; it is not read. Remove it (or replace it with the real file)."
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append(Segment(name, Path(entry.path), st.st_size, st.st_mtime_ns, st.st_ino))
        found.sort(key=lambda s: s.name)
        self.refused = refused
        return found

    @staticmethod
    def scan(path: Path, start: int = 0, *, with_offsets: bool = False, name: str = "") -> ScanResult:
        """Decode complete lines from byte ``start`` on. Corrupt lines are collected, not raised."""
        result = ScanResult(end=start)
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read()
        except FileNotFoundError:
            return result
        last = data.rfind(b"\n")
        complete = data[: last + 1]
        result.torn_tail = len(data) - len(complete)
        result.end = start + len(complete)
        if not complete:
            return result
        label = name or str(path)
        was_enabled = gc.isenabled()
        gc.disable()  # a bulk decode makes many young objects; the cyclic GC would cost 2/3 of it
        try:
            fast = None if with_offsets else decode_lines(complete)
            if fast is not None:
                result.events = fast
                return result
            position = start
            for line in complete.split(b"\n")[:-1]:
                if line.strip():
                    try:
                        result.events.append(decode_line(line))
                        if with_offsets:
                            result.offsets.append(position)
                    except LineError as exc:
                        result.corrupt.append(JournalCorrupt(label, position, str(exc)))
                position += len(line) + 1
        finally:
            if was_enabled:
                gc.enable()
        return result

    def iter_all(self, *, with_offsets: bool = False) -> Iterator[tuple[Segment, ScanResult]]:
        for segment in self.segments():
            yield segment, self.scan(segment.path, 0, with_offsets=with_offsets, name=segment.name)

    # -- writing -------------------------------------------------------------------------------

    def append(self, events: Sequence[Event], *, locked: bool = False) -> str:
        """Append events as lines of this clone's segment for the current branch.

        Returns the segment's name. Raises :class:`JournalUnwritable` when the disk refuses (the
        segment is cut back to where it was) and :class:`LimitExceeded` when the segment is full.
        ``locked``: the caller already holds :attr:`lock` (taking it again would wait forever).
        """
        appended = self.append_located(events, locked=locked)
        return appended.name if appended is not None else ""

    def append_located(self, events: Sequence[Event], *, locked: bool = False) -> Appended | None:
        """:meth:`append`, telling where the lines went (``None`` when there was nothing to write)."""
        data = b"".join(encode_event(event) for event in events)
        if not data:
            return None
        try:
            self.paths.ensure()
            segment = self.paths.inside(self.paths.journal_dir / self.paths.segment_name())
            if locked:
                return self._append_locked(segment, data)
            with self.lock.hold():
                return self._append_locked(segment, data)
        except OSError as exc:
            raise JournalUnwritable(describe_os_error(exc)) from exc

    def _append_locked(self, segment: Path, data: bytes) -> Appended:
        created = not segment.exists()
        fd = os.open(segment, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            size = _repair_torn_tail(fd)
            if self.max_segment_bytes and size + len(data) > self.max_segment_bytes:
                raise LimitExceeded(
                    f"journal segment {segment.name} would grow past {self.max_segment_bytes} bytes "
                    "(max_segment_bytes); run `eventmem compact` to archive old history, "
                    "or raise the limit in .eventmem/config.toml"
                )
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if self.durable:
                    _sync_data(fd)
                after = os.fstat(fd)
            except OSError:
                try:  # leave nothing half-written behind
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)
        if created and self.durable:
            fsync_dir(segment.parent)
        stat = (after.st_size, after.st_mtime_ns, after.st_ino)
        return Appended(name_of_segment(segment), size, data, stat)

    def repair(self) -> list[str]:
        """Cut torn tails off every segment of this journal (under the lock). Returns what was cut."""
        repaired: list[str] = []
        with self.lock.hold():
            for segment in self.segments():
                if segment.name.startswith("archive/"):
                    continue
                fd = os.open(segment.path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    if _repair_torn_tail(fd) != segment.size:
                        repaired.append(segment.name)
                finally:
                    os.close(fd)
        return repaired


def name_of_segment(path: str | os.PathLike[str]) -> str:
    """A segment's name as cursors and snapshots know it: its folder and file (``journal/x.main.jsonl``)."""
    folder, file = os.path.split(os.fspath(path))
    return f"{os.path.basename(folder)}/{file}"


def _sync_data(fd: int) -> None:
    """Put an append on disk: ``fdatasync`` where there is one (the data and the size, which is
    what reading it back needs; 10-15% cheaper than ``fsync``, which also writes the times)."""
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)


def _repair_torn_tail(fd: int) -> int:
    """Truncate an unterminated last line; returns the (new) size. Caller holds the lock."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    if os.pread(fd, 1, size - 1) == b"\n":
        return size
    position = size
    chunk = 64 * 1024
    while position > 0:
        start = max(0, position - chunk)
        block = os.pread(fd, position - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            os.ftruncate(fd, keep)
            return keep
        position = start
    os.ftruncate(fd, 0)
    return 0


def describe_os_error(exc: OSError) -> str:
    reason = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.ELOOP: "it is a symbolic link, and eventmem never writes through links (remove it)",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    where = f" ({exc.filename})" if exc.filename else ""
    return (
        f"could not write to the memory journal: {reason}{where}. "
        "Nothing was saved; free space or fix permissions and retry."
    )
