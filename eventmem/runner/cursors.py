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
from typing import NamedTuple

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent
from eventmem.journal.journal import Appended, Journal, Segment, name_of_segment
from eventmem.runner.deferral import Deferral
from eventmem.runner.derived import Cursor, Derived
from eventmem.runner.embedding import EmbeddingQueue, Progress
from eventmem.runner.projection import records_before, sync, sync_all

__all__ = [
    "Cursor",
    "Reading",
    "adopt_segments",
    "catch_up_once",
    "cursor_past",
    "is_current",
    "make_hashers",
]

log = logging.getLogger("eventmem.runner")


class Reading(NamedTuple):
    """What a catch-up reads and projects with, besides the derived state: the journal, the
    embedding queue and the deferral (see :func:`~eventmem.runner.projection.sync`), and the
    configured number of events between snapshots."""

    journal: Journal
    embedding: EmbeddingQueue
    deferral: Deferral
    snapshot_every: int


def is_current(derived: Derived, paths: Iterable[str]) -> bool:
    """Whether every segment at ``paths`` is, by a stat, exactly as this store last applied it.

    No lock and no read: the watcher asks this first, so that this process's own appends (which
    the watcher sees like anyone else's) cost it a stat each instead of a catch-up."""
    cursors = derived.cursors
    for path in paths:
        cursor = cursors.get(name_of_segment(path))
        try:
            st = os.stat(path)
        except OSError:
            return False
        if cursor is None or cursor.stat != (st.st_size, st.st_mtime_ns, st.st_ino):
            return False
    return True


def catch_up_once(
    derived: Derived, reading: Reading, progress: Progress | None, *, snapshot_later: bool = False
) -> int:
    """Fold and project what was appended past the cursors; the count of events, or -1 when a
    segment changed under them (a rebuild is due). ``snapshot_later``: a snapshot this makes due is
    not taken right after it (a server takes it a moment after the call), so the fold of a start
    without one is not encoded for it beside the keyword index's load."""
    segments = reading.journal.segments()
    present = {s.name for s in segments}
    if any(name not in present for name in derived.cursors):
        return -1
    work: list[tuple[Segment, Cursor]] = []
    for segment in segments:
        cursor = derived.cursors.get(segment.name)
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
    if total < derived.tuning.gc_pause_bytes:
        return apply_work(derived, reading, work, total, progress, snapshot_later)
    # the fold makes many objects that live on: the cyclic GC would scan them again and again
    enabled = gc.isenabled()
    gc.disable()
    try:
        return apply_work(derived, reading, work, total, progress, snapshot_later)
    finally:
        if enabled:
            gc.enable()


def apply_work(
    derived: Derived,
    reading: Reading,
    work: list[tuple[Segment, Cursor]],
    total: int,
    progress: Progress | None,
    snapshot_later: bool,
) -> int:
    done = 0
    count = 0
    fresh = not derived.state.seen
    events: list[AnyEvent | UnknownEvent] = []
    # a large catch-up digests the segments in a thread (hashlib works without the GIL)
    ahead = (
        HashAhead([(s, c.offset, derived.hashers.get(s.name)) for s, c in work])
        if total >= derived.tuning.hash_ahead_bytes
        else None
    )
    try:
        for index, (segment, cursor) in enumerate(work):
            result = reading.journal.scan(segment.path, cursor.offset, name=segment.name)
            for problem in result.corrupt:
                if (problem.path, problem.offset) not in derived.problems:
                    log.error("%s", problem)
                    derived.problems[(problem.path, problem.offset)] = problem
            events.extend(result.events)
            count += len(result.events)
            hasher = ahead.hasher(index, result.end) if ahead is not None else None
            if hasher is None:
                hasher = hasher_from(derived.hashers.get(segment.name), segment, cursor.offset, result.end)
            derived.hashers[segment.name] = hasher
            derived.cursors[segment.name] = Cursor(
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
    before = records_before(derived, events)
    folded, stale = derived.state.fold(events)
    if stale and not fresh:
        log.info("events arrived that change what was folded before (an awaited prev, another copy of an id)")
        return -1
    touched = set(folded)
    if touched:
        if len(derived.table):
            sync(derived, touched, reading.embedding, reading.deferral, before=before)
        else:
            due = derived.events_since_snapshot + count >= derived.snapshot_due(reading.snapshot_every)
            sync_all(derived, touched, encode_ahead=due and not snapshot_later and not reading.embedding.busy)
    derived.events_since_snapshot += count
    return count


def cursor_past(derived: Derived, appended: Appended, events: list[AnyEvent]) -> bool:
    """Move the cursor of the segment just appended to past the append, from the bytes written
    (no read), when it stood exactly where the append began, and take ``events`` (its lines, already
    folded) as read; else leave it to a catch-up."""
    cursor = derived.cursors.get(appended.name)
    hasher = derived.hashers.get(appended.name)
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
    derived.hashers[appended.name] = hasher
    derived.cursors[appended.name] = Cursor(offset=appended.stat[0], digest=hasher.digest(), stat=appended.stat)
    derived.events_since_snapshot += len(events)
    for event in events:  # (their lines will not be read back)
        derived.state.unread.pop(event.id, None)
    return True


def adopt_segments(derived: Derived, journal: Journal, names: Iterable[str]) -> None:
    """Take the current bytes of segments this process just rewrote as applied, without a rebuild.

    For compaction, which moves lines between segments without changing the set of events: the
    caller holds the journal lock and had caught up before rewriting, so every event in them is
    already folded. A vanished segment is forgotten."""
    present = {s.name: s for s in journal.segments()}
    for name in names:
        segment = present.get(name)
        if segment is None:
            derived.cursors.pop(name, None)
            derived.hashers.pop(name, None)
            continue
        hasher = prefix_hasher(segment, segment.size)
        derived.hashers[name] = hasher
        derived.cursors[name] = Cursor(
            offset=segment.size,
            digest=hasher.digest(),
            stat=(segment.size, segment.mtime_ns, segment.inode),
        )


def make_hashers(derived: Derived, journal: Journal, lock: threading.RLock, names: list[str]) -> None:
    """Hash the applied prefix of these segments, for catch-ups to go on from (one that comes
    first hashes it itself); ``lock`` guards ``derived`` (the runner's)."""
    with lock:
        segments = {s.name: s for s in journal.segments()}
    for name in names:
        with lock:
            cursor = derived.cursors.get(name)
        segment = segments.get(name)
        if cursor is None or segment is None or name in derived.hashers:
            continue
        try:
            hasher = prefix_hasher(segment, cursor.offset)
        except OSError:
            continue
        with lock:
            if name not in derived.hashers and derived.cursors.get(name) == cursor:
                derived.hashers[name] = hasher


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
