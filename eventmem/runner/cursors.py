"""Cursors: how far each journal segment is applied, and reading the journal past them.

A cursor keeps a segment's applied byte offset, the prefix digest of those bytes and the stat it was
taken at: a stat that did not change means nothing to read; a segment that shrank, vanished or was
rewritten (its prefix digest differs) makes the runner rebuild. A large catch-up digests the
segments in a second thread (hashlib works without the GIL) and runs with the cyclic GC paused.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent
from eventmem.journal.journal import Appended, Segment, name_of_segment
from eventmem.runner.embedding import Progress
from eventmem.runner.projection import sync, sync_all

if TYPE_CHECKING:
    from eventmem.runner.runner import Store

__all__ = ["Cursor", "adopt_segments", "catch_up_once", "cursor_past", "is_current", "make_hashers"]

log = logging.getLogger("eventmem.runner")


class Cursor(msgspec.Struct, kw_only=True):
    """How far one segment has been applied, and a digest of the bytes applied."""

    offset: int = 0
    digest: bytes = b""
    stat: tuple[int, int, int] = (0, 0, 0)
    """(size, mtime_ns, inode) when last looked at: unchanged means nothing to do."""


def is_current(store: Store, paths: Iterable[str]) -> bool:
    """Whether every segment at ``paths`` is, by a stat, exactly as this store last applied it.

    No lock and no read: the watcher asks this first, so that this process's own appends (which
    the watcher sees like anyone else's) cost it a stat each instead of a catch-up."""
    cursors = store.cursors
    for path in paths:
        cursor = cursors.get(name_of_segment(path))
        try:
            st = os.stat(path)
        except OSError:
            return False
        if cursor is None or cursor.stat != (st.st_size, st.st_mtime_ns, st.st_ino):
            return False
    return True


def catch_up_once(store: Store, progress: Progress | None) -> int:
    segments = store.journal.segments()
    present = {s.name for s in segments}
    if any(name not in present for name in store.cursors):
        return -1
    work: list[tuple[Segment, Cursor]] = []
    for segment in segments:
        cursor = store.cursors.get(segment.name)
        stat = (segment.size, segment.mtime_ns, segment.inode)
        if cursor is None:
            cursor = Cursor()
        elif cursor.stat == stat:
            continue
        elif segment.size < cursor.offset:
            return -1
        elif not only_appended(segment, cursor):  # (touched but not grown: rewritten in place?)
            if prefix_digest(segment, cursor.offset) != cursor.digest:
                return -1
        work.append((segment, cursor))
    if not work:
        return 0  # (nothing appended anywhere: the usual case)
    total = sum(s.size - c.offset for s, c in work)
    if total < store.tuning.gc_pause_bytes:
        return apply_work(store, work, total, progress)
    # the fold makes many objects that live on: the cyclic GC would scan them again and again
    enabled = gc.isenabled()
    gc.disable()
    try:
        return apply_work(store, work, total, progress)
    finally:
        if enabled:
            gc.enable()


def apply_work(store: Store, work: list[tuple[Segment, Cursor]], total: int, progress: Progress | None) -> int:
    done = 0
    count = 0
    fresh = not store.state.seen
    events: list[AnyEvent | UnknownEvent] = []
    # a large catch-up digests the segments in a thread (hashlib works without the GIL)
    ahead = (
        HashAhead([(s, c.offset, store._hashers.get(s.name)) for s, c in work])
        if total >= store.tuning.hash_ahead_bytes
        else None
    )
    try:
        for index, (segment, cursor) in enumerate(work):
            result = store.journal.scan(segment.path, cursor.offset, name=segment.name)
            for problem in result.corrupt:
                if (problem.path, problem.offset) not in store.problems:
                    log.error("%s", problem)
                    store.problems[(problem.path, problem.offset)] = problem
            events.extend(result.events)
            count += len(result.events)
            hasher = ahead.hasher(index, result.end) if ahead is not None else None
            if hasher is None:
                hasher = hasher_from(store._hashers.get(segment.name), segment, cursor.offset, result.end)
            store._hashers[segment.name] = hasher
            store.cursors[segment.name] = Cursor(
                offset=result.end,
                digest=hasher.digest(),
                stat=(segment.size, segment.mtime_ns, segment.inode),
            )
            done += segment.size - cursor.offset
            if progress is not None:
                progress(done, total)
    finally:
        if ahead is not None:
            ahead.stop()
    # one batch, so that a prev in a later segment and every copy of an event id are seen together
    folded, stale = store.state.fold(events)
    if stale and not fresh:
        log.info("events arrived that change what was folded before (an awaited prev, another copy of an id)")
        return -1
    touched = set(folded)
    if touched:
        if len(store.table):
            sync(store, touched)
        else:
            sync_all(store, touched, snapshot_due=store.events_since_snapshot + count >= store._snapshot_due())
    store.events_since_snapshot += count
    return count


def cursor_past(store: Store, appended: Appended, count: int) -> bool:
    """Move the cursor of the segment just appended to past the append, from the bytes written
    (no read), when it stood exactly where the append began; else leave it to a catch-up."""
    cursor = store.cursors.get(appended.name)
    hasher = store._hashers.get(appended.name)
    if (
        cursor is None
        or hasher is None
        or cursor.offset != appended.start
        or cursor.stat[2] != appended.stat[2]
        or appended.stat[0] != appended.start + len(appended.data)
    ):
        return False
    hasher = hasher.copy()
    hasher.update(appended.data)
    store._hashers[appended.name] = hasher
    store.cursors[appended.name] = Cursor(offset=appended.stat[0], digest=hasher.digest(), stat=appended.stat)
    store.events_since_snapshot += count
    return True


def adopt_segments(store: Store, names: Iterable[str]) -> None:
    """Take the current bytes of segments this process just rewrote as applied, without a rebuild.

    For compaction, which moves lines between segments without changing the set of events: the
    caller holds the journal lock and had caught up before rewriting, so every event in them is
    already folded. A vanished segment is forgotten."""
    with store.lock:
        present = {s.name: s for s in store.journal.segments()}
        for name in names:
            segment = present.get(name)
            if segment is None:
                store.cursors.pop(name, None)
                store._hashers.pop(name, None)
                continue
            hasher = prefix_hasher(segment, segment.size)
            store._hashers[name] = hasher
            store.cursors[name] = Cursor(
                offset=segment.size,
                digest=hasher.digest(),
                stat=(segment.size, segment.mtime_ns, segment.inode),
            )


def make_hashers(store: Store, names: list[str]) -> None:
    """Hash the applied prefix of these segments, for catch-ups to go on from (one that comes
    first hashes it itself)."""
    with store.lock:
        segments = {s.name: s for s in store.journal.segments()}
    for name in names:
        with store.lock:
            cursor = store.cursors.get(name)
        segment = segments.get(name)
        if cursor is None or segment is None or name in store._hashers:
            continue
        try:
            hasher = prefix_hasher(segment, cursor.offset)
        except OSError:
            continue
        with store.lock:
            if name not in store._hashers and store.cursors.get(name) == cursor:
                store._hashers[name] = hasher


def only_appended(segment: Segment, cursor: Cursor) -> bool:
    """The segment is the file the cursor last read, only grown since (or untouched)."""
    size, mtime_ns, inode = cursor.stat
    if segment.inode != inode or segment.mtime_ns < mtime_ns:
        return False
    return segment.size > size or (segment.size == size and segment.mtime_ns == mtime_ns)


def stat_after_load(segment: Segment, offset: int) -> tuple[int, int, int]:
    """A verified cursor's stat: the segment's own when fully covered (nothing to re-check), else one
    that makes the next catch-up read the tail without hashing the prefix again."""
    if segment.size == offset:
        return (segment.size, segment.mtime_ns, segment.inode)
    return (offset, -1, segment.inode)


def hasher_from(hasher: hashlib.blake2b | None, segment: Segment, start: int, end: int) -> hashlib.blake2b:
    """A segment's digest state at ``end``: ``hasher`` (at ``start``, or made from the prefix) fed
    the bytes in between. ``hasher`` itself is left as it was."""
    hasher = hasher.copy() if hasher is not None else prefix_hasher(segment, start)
    if end > start:
        with open(segment.path, "rb") as handle:
            handle.seek(start)
            hasher.update(handle.read(end - start))
    return hasher


class HashAhead:
    """Digests segments from their cursor to their size in a thread, while the caller decodes and
    folds them; a segment whose complete lines end elsewhere (a torn tail, bytes appended since
    the stat) is left to the caller."""

    def __init__(self, items: list[tuple[Segment, int, hashlib.blake2b | None]]) -> None:
        self._items = items
        self._done = [threading.Event() for _ in items]
        self._hashers: list[hashlib.blake2b | None] = [None] * len(items)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eventmem-digests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for index, (segment, start, hasher) in enumerate(self._items):
            try:
                if not self._stop.is_set():
                    self._hashers[index] = hasher_from(hasher, segment, start, segment.size)
            except OSError:
                pass  # the caller reads it again, and reports what goes wrong
            finally:
                self._done[index].set()

    def hasher(self, index: int, end: int) -> hashlib.blake2b | None:
        """The digest state of item ``index`` at byte ``end``, or ``None`` if it was made for
        another length (or could not be made)."""
        self._done[index].wait()
        segment = self._items[index][0]
        return self._hashers[index] if end == segment.size else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def prefix_hasher(segment: Segment, length: int) -> hashlib.blake2b:
    hasher = hashlib.blake2b(digest_size=16)
    with open(segment.path, "rb") as handle:
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(remaining, 1 << 20))
            if not chunk:
                break
            hasher.update(chunk)
            remaining -= len(chunk)
    return hasher


def prefix_digest(segment: Segment, length: int) -> bytes:
    return prefix_hasher(segment, length).digest()
