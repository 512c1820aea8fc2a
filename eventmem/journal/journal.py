"""The journal: append-only JSONL segments, the only source of truth.

Writing: one writer at a time per journal directory (``flock`` on ``.eventmem/journal.lock``); the
whole batch of lines goes out in ``os.write`` calls on an ``O_APPEND`` descriptor, then ``fsync``.
The next writer, holding the lock, settles an unterminated last line: a complete event that only
lost its newline (an editor, a web edit) gets the newline back; anything else (a crash mid-write)
is copied to ``.eventmem/cache/quarantine/`` and then cut, so repair never destroys a byte. If a
write fails (disk full, read-only), the segment is cut back to its size before the write, so a
failed save leaves nothing behind.

Reading: segments are read in chunks, with bounded memory whatever a line's length. Every line goes
through one decoder (:func:`decode_stream`, also used for bytes from git and by compaction): it
becomes a valid event or is reported with its file, byte offset and line number, never silently
skipped or rewritten. An unterminated last line is folded when it is a complete valid event (the
cursor then stands just past it, before the newline to come); otherwise it is the end of the log
for readers (a write in progress or a torn write).
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eventmem.core.codec import LineError, decode_line, encode_event
from eventmem.core.errors import JournalCorrupt, JournalUnwritable, LimitExceeded, UnsafePath
from eventmem.core.events import Event
from eventmem.core.limits import MAX_LINE_BYTES
from eventmem.journal.decoder import (
    ScanResult,
    decode_stream,
    number_lines,
    refuse_unreadable,
)
from eventmem.journal.files import FileLock, atomic_replace, atomic_write, fsync_dir, remove_leftover_temp_files
from eventmem.journal.project import ProjectPaths

__all__ = [
    "Appended",
    "Journal",
    "Segment",
    "name_of_segment",
]

log = logging.getLogger("eventmem.journal.journal")


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
    """The bytes written: the events' lines, after the newline an unterminated last line lacked."""
    stat: tuple[int, int, int]
    """(size, mtime_ns, inode) of the segment just after the append."""


class Journal:
    def __init__(self, paths: ProjectPaths, *, durable: bool = True, max_segment_bytes: int = 0) -> None:
        self.paths = paths
        self.durable = durable
        self.max_segment_bytes = max_segment_bytes
        self.lock = FileLock(paths.lock_file)
        self.refused: dict[str, str] = {}
        """Segments (or folders) the last :meth:`segments` left out, by name, with the reason: symbolic
        links and other entries that are not real files inside the project."""
        self._quarantine_dir = os.fspath(paths.cache_dir / QUARANTINE)
        self._rolled: dict[str, int] = {}
        """The number of this clone's segment being filled, by its first segment's name (1: that one)."""
        self._last_name = ""
        self._listed: dict[str, tuple[str, Path]] = {}
        """(name, path) of each segment file seen, by its path as listed (a catch-up lists the same few)."""

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
                known = self._listed.get(entry.path)
                if known is None:
                    known = self._listed[entry.path] = (name_of_segment(entry.path), Path(entry.path))
                name, path = known
                if not entry.is_file(follow_symlinks=False):
                    kind = "a symbolic link" if entry.is_symlink() else "not a regular file"
                    refused[name] = f"{name} is {kind}; it is not read. Remove it (or replace it with the real file)."
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append(Segment(name, path, st.st_size, st.st_mtime_ns, st.st_ino))
        if len(self._listed) > 2 * len(found) + 64:  # (segments removed by compaction)
            self._listed = {}
        found.sort(key=lambda s: s.name)
        self.refused = refused
        return found

    @staticmethod
    def scan(path: Path, start: int = 0, *, with_offsets: bool = False, name: str = "") -> ScanResult:
        """Decode the lines from byte ``start`` on, in chunks. Corrupt lines are collected, not raised."""
        try:  # (a segment swapped for a link after it was listed is not followed)
            handle = os.fdopen(os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW), "rb")
        except FileNotFoundError:
            return ScanResult(end=start)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            return ScanResult(end=start, corrupt=[JournalCorrupt(name or str(path), 0, "is a symbolic link: not read")])
        label = name or str(path)
        with handle:
            handle.seek(start)
            result = decode_stream(handle.read, start, label, with_offsets=with_offsets)
            if result.corrupt and start == 0:
                handle.seek(0)
                number_lines(handle.read, result.corrupt)
        return result

    def iter_all(self, *, with_offsets: bool = False) -> Iterator[tuple[Segment, ScanResult]]:
        for segment in self.segments():
            yield segment, self.scan(segment.path, 0, with_offsets=with_offsets, name=segment.name)

    # -- writing -------------------------------------------------------------------------------

    def append(self, events: Sequence[Event], *, locked: bool = False) -> str:
        """Append events as lines of this clone's segment for the current branch.

        Returns the segment's name (the last one written, when the events filled one and went on in
        the next). Raises :class:`JournalUnwritable` when the disk refuses (the segment is cut back to
        where it was). ``locked``: the caller already holds :attr:`lock` (taking it again would wait
        forever).
        """
        appended = self.append_located(events, locked=locked)
        return appended.name if appended is not None else self._last_name

    def append_located(self, events: Sequence[Event], *, locked: bool = False) -> Appended | None:
        """:meth:`append`, telling where the lines went (``None`` when there was nothing to write, or
        when they went into more than one segment: the reader then reads them back).

        A segment that would grow past ``max_segment_bytes`` is full: the lines go on in this
        clone's next segment for the branch (``<writer>.<branch>.<n>.jsonl``), a batch larger than a
        segment split between lines (each part appended whole; a line larger than a segment alone in
        a new one)."""
        lines = [encode_event(event) for event in events]
        data = b"".join(lines)
        if not data:
            return None
        refuse_unreadable(data)
        try:
            self.paths.ensure()
            if locked:
                return self._append_rolling(lines, data)
            with self.lock.hold():
                return self._append_rolling(lines, data)
        except OSError as exc:
            raise JournalUnwritable(describe_os_error(exc)) from exc

    def _append_rolling(self, lines: list[bytes], data: bytes) -> Appended | None:
        base = self.paths.segment_name()
        number = self._rolled.get(base, 1)
        limit = self.max_segment_bytes
        pending = lines if limit and len(data) > limit else [data]
        appended: Appended | None = None
        parts = 0
        while pending:
            segment = self.paths.inside(self.paths.journal_dir / _numbered(base, number))
            size = _size(segment)
            taken, room = 0, limit - size
            if limit:
                while taken < len(pending) and (len(pending[taken]) <= room or (taken == 0 and size == 0)):
                    room -= len(pending[taken])
                    taken += 1
            else:
                taken = len(pending)
            if taken == 0:
                number += 1  # full: on in the next segment
                continue
            try:
                appended = self._append_locked(segment, b"".join(pending[:taken]))
            except LimitExceeded:  # (filled by another process since its size was read)
                number += 1
                continue
            parts += 1
            self._last_name = appended.name
            pending = pending[taken:]
        self._rolled[base] = number
        return appended if parts == 1 else None

    def _append_locked(self, segment: Path, data: bytes) -> Appended:
        created = not segment.exists()
        fd = os.open(segment, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            size, newline = self._settle_tail(fd, segment)
            data = newline + data
            if self.max_segment_bytes and size and size + len(data) > self.max_segment_bytes:
                raise LimitExceeded(f"journal segment {segment.name} is full (max_segment_bytes)")
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
        """Settle the last line of every live segment (under the lock): give a complete event back its
        newline, quarantine and cut a torn tail. Returns the segments changed."""
        repaired: list[str] = []
        with self.lock.hold():
            for segment in self.segments():
                if segment.name.startswith("archive/"):
                    continue
                if self.settle(segment.path):
                    repaired.append(segment.name)
        return repaired

    def read_settled(self, path: Path) -> bytes:
        """A live segment's bytes after :meth:`settle` (as a writer would: a torn tail is quarantined,
        then cut); the caller holds the lock and is about to :meth:`rewrite_segment` it."""
        self.settle(path)
        return self.paths.inside(path).read_bytes()

    def rewrite_segment(self, path: Path, live: bytes, *, archive: Path, archived: bytes) -> None:
        """Move lines of a live segment into a new archive segment; the caller holds the lock.

        The archive segment is written first (temp file, fsync, rename, fsync of its folder), then the
        live segment is replaced by ``live`` the same way: a crash between the two leaves lines in
        both places (duplicates the fold ignores), never a line in neither. Raises
        :class:`JournalUnwritable` when the disk refuses (the live segment is then unchanged). Temp
        files an earlier rewrite left when it was killed are removed first (they are not segments, but
        ``git add`` would take them)."""
        try:
            for folder in (self.paths.journal_dir, self.paths.archive_dir):
                for name, size in remove_leftover_temp_files(folder, lambda target: target.endswith(".jsonl")):
                    log.info("removed %s (%d bytes), left by a segment rewrite that was killed", name, size)
            atomic_write(self.paths.inside(archive), archived, durable=self.durable)
            atomic_write(self.paths.inside(path), live, durable=self.durable)
        except OSError as exc:
            raise JournalUnwritable(describe_os_error(exc)) from exc

    def settle(self, path: Path) -> bool:
        """:meth:`repair` of one segment; the caller holds the lock. Whether it changed."""
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            before = os.fstat(fd).st_size
            size, newline = self._settle_tail(fd, path)
            if newline:
                os.pwrite(fd, newline, size)
                if self.durable:
                    _sync_data(fd)
            return bool(newline) or size != before
        finally:
            os.close(fd)

    def _settle_tail(self, fd: int, path: Path) -> tuple[int, bytes]:
        """Deal with an unterminated last line before an append; the caller holds the lock.

        Returns the size to append at and ``b"\\n"`` when the last line is a complete event that
        only lacks its newline (kept: the newline goes first), else ``b""``. Anything else after the
        last newline is copied to the quarantine folder, then cut."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size, b""
        keep = _last_line_start(fd, size)
        if size - keep <= MAX_LINE_BYTES:
            try:
                decode_line(os.pread(fd, size - keep, keep))
            except LineError:
                pass
            else:
                return size, b"\n"
        try:
            self._quarantine(fd, path, keep, size)
        except (OSError, UnsafePath) as exc:  # no copy, no cut: the bytes stay, a corrupt line readers report
            log.warning("could not quarantine the torn tail of %s (%s): it is kept as a corrupt line", path.name, exc)
            return size, b"\n"
        os.ftruncate(fd, keep)
        return keep, b""

    def _quarantine(self, fd: int, path: Path, start: int, end: int) -> Path:
        """Copy bytes ``start``-``end`` of a segment to ``.eventmem/cache/quarantine/`` (atomically)."""
        moment = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(moment)) + f".{int(moment % 1 * 1e6):06d}Z"
        target = self.paths.cache_dir / QUARANTINE / f"{path.name}.{start}.{stamp}.bin"

        def copy(tmp: Path) -> None:
            with open(tmp, "wb") as out:
                position = start
                while position < end:
                    block = os.pread(fd, min(end - position, 1_048_576), position)
                    if not block:
                        break
                    out.write(block)
                    position += len(block)

        atomic_replace(target, copy, durable=self.durable)
        return target

    def quarantined(self) -> list[str]:
        """A sentence for each torn tail kept in the quarantine folder (until someone deletes it)."""
        folder = self._quarantine_dir
        if not os.access(folder, os.F_OK):  # (the usual case, told without raising an error)
            return []
        try:
            files = sorted((e for e in os.scandir(folder) if e.name.endswith(".bin")), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        notes = []
        for entry in files:
            segment, _, rest = entry.name.removesuffix(".bin").partition(".jsonl.")
            offset = rest.split(".", 1)[0]
            where = f"journal/{segment}.jsonl at byte {offset}" if segment else entry.name
            notes.append(
                f"a torn last line of {where} was not a complete event: it was cut and saved to "
                f".eventmem/cache/{QUARANTINE}/{entry.name} (delete that file once checked)"
            )
        return notes


QUARANTINE = "quarantine"


def name_of_segment(path: str | os.PathLike[str]) -> str:
    """A segment's name as cursors and snapshots know it: its folder and file (``journal/x.main.jsonl``)."""
    folder, file = os.path.split(os.fspath(path))
    return f"{os.path.basename(folder)}/{file}"


def _sync_data(fd: int) -> None:
    """Put an append on disk: ``fdatasync`` where there is one (the data and the size, which is
    what reading it back needs; 10-15% cheaper than ``fsync``, which also writes the times)."""
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)


def _last_line_start(fd: int, size: int) -> int:
    """Offset just past the last newline of the first ``size`` bytes (0 when there is none)."""
    position = size
    chunk = 64 * 1024
    while position > 0:
        start = max(0, position - chunk)
        block = os.pread(fd, position - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
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


def _numbered(name: str, number: int) -> str:
    """The ``number``-th segment of a writer on a branch: ``w.b.jsonl``, then ``w.b.2.jsonl``, …"""
    return name if number <= 1 else f"{name.removesuffix('.jsonl')}.{number}.jsonl"


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0
