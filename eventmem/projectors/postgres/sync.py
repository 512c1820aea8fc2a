"""Folding a journal into batches, and keeping a projector in step with it.

:class:`JournalFeed` reads one journal (a project's ``.eventmem/``, or the global memory) with the
journal's own segment listing and total decoder, folds it with the pure :class:`~eventmem.core.state.State`
and turns what changed into :class:`~eventmem.projectors.base.Batch` es, each with the position (byte
offset and prefix digest) of every segment it covers. :class:`ProjectSync` drives a projector: on start
it goes on from the position the projector holds when every segment still begins with the bytes that
position names, and projects the journal again otherwise (a rebase or a checkout rewrote a segment).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent, LinkAdded, LinkRemoved
from eventmem.core.ids import iso_to_epoch
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.core.state import State
from eventmem.journal.journal import Journal, Segment
from eventmem.journal.project import ProjectPaths
from eventmem.projectors.base import Batch, Projected, Projector, SegmentPosition

__all__ = ["JournalFeed", "ProjectSync", "batch_of", "expires_at", "is_superseded", "segment_key"]

log = logging.getLogger("eventmem.sync")

Decoded = AnyEvent | UnknownEvent


def segment_key(name: str) -> str:
    """A segment's name as positions name it: valid UTF-8 (a file name's undecodable bytes, kept by
    Python as lone surrogates, which no database text takes, become ``\\udcXX``)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return name


def _hasher() -> hashlib.blake2b:
    return hashlib.blake2b(digest_size=16)


def is_superseded(state: State, memory_id: str) -> bool:
    """A visible memory names this one as the target of a ``supersedes`` link."""
    return any(
        link.relation == "supersedes" and link.target == memory_id and state.visible(link.source) is not None
        for link in state.links_of(memory_id)
    )


def expires_at(record: MemoryRecord) -> float:
    """Epoch seconds at which the memory's TTL runs out (``inf``: none). The in-process store also
    extends it by local use, which is not in the journal."""
    if record.ttl_seconds is None:
        return math.inf
    try:
        return iso_to_epoch(record.ttl_set_at) + float(record.ttl_seconds)
    except (ValueError, OverflowError):
        return math.inf if record.ttl_seconds > 0 else -math.inf


def batch_of(
    state: State,
    touched: Iterable[str],
    events: Sequence[Decoded],
    position: dict[str, SegmentPosition],
    *,
    everything: bool = False,
) -> Batch:
    """What folding ``events`` into ``state`` changed (``everything``: the whole state, for a load)."""
    order = list(dict.fromkeys(state.memories if everything else touched))
    seen = set(order)
    for memory_id in list(order):  # a memory's "superseded" depends on its superseder being visible
        for link in state.links_of(memory_id):
            if link.relation == "supersedes" and link.target not in seen:
                seen.add(link.target)
                order.append(link.target)
    upserts: list[Projected] = []
    removals: list[str] = []
    for memory_id in order:
        record = state.visible(memory_id)
        if record is None:
            if not everything:
                removals.append(memory_id)
            continue
        upserts.append(Projected(record, is_superseded(state, memory_id), expires_at(record)))
    if everything:
        links: list[LinkRecord] = [link for link in state.links.values() if link.alive]
    else:
        changed = dict.fromkeys(e.link for e in events if isinstance(e, (LinkAdded, LinkRemoved)))
        links = [state.links[link_id] for link_id in changed if link_id in state.links]
    return Batch(tuple(upserts), tuple(removals), tuple(links), tuple(events), dict(position))


@dataclass(slots=True)
class _Cursor:
    offset: int
    hasher: hashlib.blake2b
    stat: tuple[int, int, int]
    """(size, mtime_ns, inode) when read: unchanged means nothing to read."""

    def only_appended(self, segment: Segment) -> bool:
        """The segment is the file last read, grown since (a rewrite in place is told by its digest)."""
        size, mtime_ns, inode = self.stat
        return segment.inode == inode and segment.mtime_ns >= mtime_ns and segment.size > size


@dataclass
class JournalFeed:
    """One journal, folded in memory, read on from where it was last read."""

    root: Path
    state: State = field(default_factory=State)
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    problems: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.journal = Journal(ProjectPaths(self.root), durable=False)

    def position(self) -> dict[str, SegmentPosition]:
        return {
            segment_key(name): SegmentPosition(c.offset, c.hasher.digest()) for name, c in sorted(self.cursors.items())
        }

    def full(self) -> Batch:
        """Everything, folded from scratch: a batch for a projector's ``load``."""
        self.state, self.cursors = State(), {}
        events: list[Decoded] = []
        for segment in self.journal.segments():
            events.extend(self._read(segment, 0, _hasher()))
        self.state.fold(events)
        return batch_of(self.state, (), events, self.position(), everything=True)

    def resume(self, position: dict[str, SegmentPosition]) -> Batch | None:
        """Fold the journal, and return what lies past ``position`` (``None``: a segment no longer
        begins with the bytes ``position`` names; the journal must be projected again)."""
        self.state, self.cursors = State(), {}
        segments = {s.name: s for s in self.journal.segments()}
        if any(key not in {segment_key(name) for name in segments} for key in position):
            return None
        before: list[Decoded] = []
        after: list[Decoded] = []
        for name, segment in segments.items():
            known = position.get(segment_key(name))
            start = 0
            hasher = _hasher()
            if known is not None:
                prefix = _prefix(segment, known.offset, hasher)
                if prefix is None or hasher.digest() != known.digest:
                    return None
                before.extend(self._decode_prefix(segment, prefix))
                start = known.offset
            after.extend(self._read(segment, start, hasher))
        self.state.fold(before)
        touched, stale = self.state.fold(after)
        if stale:  # the tail changes what the prefix folded to: load it all
            return None
        return batch_of(self.state, touched, after, self.position())

    def unchanged(self) -> bool:
        """Whether no segment was added, removed or touched since the last read (a look at the files'
        sizes and times only: nothing to take)."""
        segments = self.journal.segments()
        if len(segments) != len(self.cursors):
            return False
        for segment in segments:
            cursor = self.cursors.get(segment.name)
            if cursor is None or cursor.stat != (segment.size, segment.mtime_ns, segment.inode):
                return False
        return True

    def tail(self) -> Batch | None:
        """What was appended since the last read (``None``: a segment was rewritten or removed, or
        the new events change what was folded before; the journal must be projected again)."""
        segments = self.journal.segments()
        present = {s.name for s in segments}
        if any(name not in present for name in self.cursors):
            return None
        events: list[Decoded] = []
        for segment in segments:
            cursor = self.cursors.get(segment.name)
            if cursor is None:
                events.extend(self._read(segment, 0, _hasher()))
                continue
            if cursor.stat == (segment.size, segment.mtime_ns, segment.inode):
                continue
            if segment.size < cursor.offset:
                return None
            if not cursor.only_appended(segment):  # (touched but not grown: rewritten in place?)
                check = _hasher()
                if _prefix(segment, cursor.offset, check) is None or check.digest() != cursor.hasher.digest():
                    return None
            if segment.size > cursor.offset:
                events.extend(self._read(segment, cursor.offset, cursor.hasher))
        if not events:
            return Batch((), (), position=self.position())
        touched, stale = self.state.fold(events)
        if stale:
            return None
        return batch_of(self.state, touched, events, self.position())

    def _read(self, segment: Segment, start: int, hasher: hashlib.blake2b) -> list[Decoded]:
        result = self.journal.scan(segment.path, start, name=segment.name)
        self._report(result.corrupt)
        if result.end > start:
            with open(segment.path, "rb") as handle:
                handle.seek(start)
                hasher.update(handle.read(result.end - start))
        self.cursors[segment.name] = _Cursor(result.end, hasher, (segment.size, segment.mtime_ns, segment.inode))
        return result.events

    def _decode_prefix(self, segment: Segment, data: bytes) -> list[Decoded]:
        from eventmem.journal.decoder import decode_bytes

        result = decode_bytes(data, segment.name)
        self._report(result.corrupt)
        return result.events

    def _report(self, problems: Iterable[object]) -> None:
        for problem in problems:
            key = (str(getattr(problem, "path", "")), int(getattr(problem, "offset", 0)))
            if key not in self.problems:
                self.problems.add(key)
                log.error("%s", problem)


def _prefix(segment: Segment, length: int, hasher: hashlib.blake2b) -> bytes | None:
    """The first ``length`` bytes of the segment, fed to ``hasher`` (``None``: it is shorter)."""
    try:
        with open(segment.path, "rb") as handle:
            data = handle.read(length)
    except OSError:
        return None
    if len(data) < length:
        return None
    hasher.update(data)
    return data


class ProjectSync:
    """Keeps one projector in step with one journal."""

    def __init__(self, projector: Projector, root: Path) -> None:
        self.projector = projector
        self.feed = JournalFeed(root)

    def start(self) -> int:
        """Bring the projector up to the journal; returns the number of events it took."""
        held = self.projector.position() if self.projector.restore(None) else None
        batch = self.feed.resume(held) if held is not None else None
        if batch is None:
            if held is not None:
                log.info("the journal at %s was rewritten (rebase, checkout): projecting it again", self.feed.root)
            batch = self.feed.full()
            self.projector.load(batch)
        elif batch.events or batch.upserts or batch.removals or batch.position != held:
            self.projector.apply(batch)
        return len(batch.events)

    def catch_up(self) -> int:
        """Take what was appended since; returns the number of events taken."""
        batch = self.feed.tail()
        if batch is None:
            log.info("the journal at %s was rewritten (rebase, checkout): projecting it again", self.feed.root)
            batch = self.feed.full()
            self.projector.load(batch)
        elif batch.events or batch.upserts or batch.removals:
            self.projector.apply(batch)
        return len(batch.events)
