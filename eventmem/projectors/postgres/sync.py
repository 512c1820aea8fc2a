"""Folding a journal into batches, and keeping a projector in step with it.

:class:`JournalFeed` reads one journal (a project's ``.eventmem/``, or the global memory) with the
journal's own segment listing and total decoder, folds it with the pure :class:`~eventmem.core.state.State`
and turns what changed into :class:`~eventmem.projectors.base.Batch` es, each with the position (byte
offset and prefix digest) of every segment it covers. :class:`FoldFeed` does the same for a process that
keeps a fold of the journal anyway (a server's in-process store, :class:`Fold`): it reads the journal's
lines up to where that fold stands, for the events and the memories they touch, and takes the records
from it instead of folding the journal a second time. :class:`ProjectSync` drives a projector: on start
it goes on from the position the projector holds when every segment still begins with the bytes that
position names, and projects the journal again otherwise (a rebase or a checkout rewrote a segment).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.errors import EventmemError
from eventmem.core.events import AnyEvent, LinkAdded, LinkRemoved, MemoryArchived
from eventmem.core.ids import iso_to_epoch
from eventmem.core.records import LinkRecord, MemoryRecord, MemoryRecords
from eventmem.core.state import State
from eventmem.journal.journal import Journal, Segment
from eventmem.journal.project import ProjectPaths
from eventmem.projectors.base import Batch, Projected, ProjectionGone, Projector, SegmentPosition

__all__ = [
    "Fold",
    "FoldFeed",
    "JournalFeed",
    "ProjectSync",
    "batch_of",
    "expires_at",
    "is_superseded",
    "segment_key",
    "touched_by",
]

log = logging.getLogger("eventmem.sync")

Decoded = AnyEvent | UnknownEvent

_COPY = msgspec.msgpack.Encoder()
_RECORD = msgspec.msgpack.Decoder(MemoryRecord)
_LINK = msgspec.msgpack.Decoder(LinkRecord)
TRIES = 5
"""How many times a :class:`FoldFeed` reads again when the journal or the fold moved while it read."""


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
    copied: bool = False,
) -> Batch:
    """What folding ``events`` into ``state`` changed (``everything``: the whole state, for a load).
    ``copied``: the batch holds copies of the records and links (the state goes on changing in another
    thread), and an encoded record is decoded for it without being kept decoded in the state."""
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
        record = _visible_copy(state, memory_id) if copied else state.visible(memory_id)
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
    if copied:
        links = [_LINK.decode(_COPY.encode(link)) for link in links]
    return Batch(tuple(upserts), tuple(removals), tuple(links), tuple(events), dict(position))


def _visible_copy(state: State, memory_id: str) -> MemoryRecord | None:
    """A copy of the memory if it is visible (:meth:`State.visible`), decoded from its encoding when the
    state holds it encoded (and left so)."""
    memories = state.memories
    held = memories.held(memory_id) if isinstance(memories, MemoryRecords) else memories.get(memory_id)
    if held is None:
        return None
    if isinstance(memories, MemoryRecords) and isinstance(held, msgspec.Raw):
        record = memories.read(memory_id, held)  # (decoded for the batch alone: a copy already)
    else:
        record = _RECORD.decode(_COPY.encode(held))
    return record if record.exists and record.status == "live" else None


def touched_by(state: State, events: Iterable[Decoded]) -> list[str]:
    """The memories whose projection ``events`` may have changed, ``state`` having folded them: what
    :meth:`State.fold` returned for them, but the ends a link had before an event moved it (the state
    no longer holds them; the projector sets their flag again from its rows, see
    :func:`~eventmem.projectors.postgres.links.write_links`)."""
    touched: list[str] = []
    for event in events:
        if isinstance(event, LinkAdded):
            touched += (event.source, event.target)
            link = state.links.get(event.link)
            if link is not None and link.source:
                touched += (link.source, link.target)
        elif isinstance(event, LinkRemoved):
            link = state.links.get(event.link)
            if link is not None and link.source:
                touched += (link.source, link.target)
        elif not isinstance(event, (MemoryArchived, UnknownEvent)):
            touched.append(event.memory)
    return list(dict.fromkeys(touched))


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


class Fold(Protocol):
    """A fold of one journal that its process keeps anyway (a server's in-process store), read by a
    :class:`FoldFeed` instead of folding the journal a second time."""

    def folded(self) -> tuple[object, dict[str, tuple[int, bytes]]]:
        """Catch up with the journal; returns a token of the fold, and where it stands in each segment
        (by name: the bytes folded and their prefix digest, as :class:`SegmentPosition` names them)."""
        ...

    def batch(
        self, token: object, events: Sequence[Decoded], position: dict[str, SegmentPosition], *, everything: bool
    ) -> Batch | None:
        """:func:`batch_of` the memories ``events`` touched (:func:`touched_by`; ``everything``: all),
        copied from the fold as it is now, which has folded them; ``None`` when the fold is no longer
        the one ``token`` names (folded again from scratch since)."""
        ...


@dataclass
class _Reading:
    """Where each segment of one journal was last read to."""

    root: Path
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    problems: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.journal = Journal(ProjectPaths(self.root), durable=False)

    def position(self) -> dict[str, SegmentPosition]:
        return _position_of(self.cursors)

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

    def _report(self, problems: Iterable[object]) -> None:
        for problem in problems:
            key = (str(getattr(problem, "path", "")), int(getattr(problem, "offset", 0)))
            if key not in self.problems:
                self.problems.add(key)
                log.error("%s", problem)


@dataclass
class JournalFeed(_Reading):
    """One journal, folded in memory, read on from where it was last read."""

    state: State = field(default_factory=State)

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
        hasher.update(_bytes(segment, start, result.end) or b"")
        self.cursors[segment.name] = _Cursor(result.end, hasher, (segment.size, segment.mtime_ns, segment.inode))
        return result.events

    def _decode_prefix(self, segment: Segment, data: bytes) -> list[Decoded]:
        from eventmem.journal.decoder import decode_bytes

        result = decode_bytes(data, segment.name)
        self._report(result.corrupt)
        return result.events


@dataclass
class FoldFeed(_Reading):
    """One journal read on from where it was last read, up to where the process's own fold of it stands
    (:class:`Fold`), whose records its batches carry: the journal is folded once in the process.

    Each read takes the fold's position first (the fold caught up), then the lines up to it, their bytes
    checked against the fold's digests: a journal rewritten or a fold folded again while it read is read
    again, up to :data:`TRIES` times. Cursors move only once a batch is made."""

    fold: Fold = field(kw_only=True)

    def full(self) -> Batch:
        """Everything, as the fold holds it: a batch for a projector's ``load``."""
        batch = self._taken(lambda segment: (0, _hasher()), {}, everything=True)
        if batch is None:
            raise EventmemError(f"the journal at {self.root} kept changing while it was read for PostgreSQL")
        return batch

    def resume(self, position: dict[str, SegmentPosition]) -> Batch | None:
        """What lies past ``position``, as the fold holds it (``None``: a segment no longer begins with
        the bytes ``position`` names, or ends before them; the journal must be projected again)."""
        segments = {segment_key(s.name) for s in self.journal.segments()}
        if any(key not in segments for key in position):
            return None

        def start_of(segment: Segment) -> tuple[int, hashlib.blake2b]:
            hasher, known = _hasher(), position.get(segment_key(segment.name))
            if known is None:
                return 0, hasher
            if _prefix(segment, known.offset, hasher) is None or hasher.digest() != known.digest:
                raise _Rewritten
            return known.offset, hasher

        def check(ends: dict[str, tuple[int, bytes]]) -> None:
            if any(ends.get(name, (0, b""))[0] < known.offset for name, known in _by_name(self, position)):
                raise _Rewritten  # (the fold, caught up, ends before it: the segment is no longer what it was)

        return self._taken(start_of, {}, check=check)

    def tail(self) -> Batch | None:
        """What the fold took since the last read (``None``: a segment was rewritten or removed; the
        journal must be projected again)."""
        present = {s.name for s in self.journal.segments()}
        if any(name not in present for name in self.cursors):
            return None

        def start_of(segment: Segment) -> tuple[int, hashlib.blake2b]:
            cursor = self.cursors.get(segment.name)
            if cursor is None:
                return 0, _hasher()
            if segment.size < cursor.offset:
                raise _Rewritten
            if cursor.stat != (segment.size, segment.mtime_ns, segment.inode) and not cursor.only_appended(segment):
                check = _hasher()  # (touched but not grown: rewritten in place?)
                if _prefix(segment, cursor.offset, check) is None or check.digest() != cursor.hasher.digest():
                    raise _Rewritten
            return cursor.offset, cursor.hasher.copy()

        return self._taken(start_of, self.cursors)

    def _taken(
        self,
        start_of: Callable[[Segment], tuple[int, hashlib.blake2b]],
        kept: dict[str, _Cursor],
        *,
        everything: bool = False,
        check: Callable[[dict[str, tuple[int, bytes]]], None] | None = None,
    ) -> Batch | None:
        """The batch of what the fold took past ``kept`` (each segment read from where ``start_of``
        says), the cursors moved past it; ``None`` when a segment was rewritten (``start_of`` or
        ``check`` of the fold's ends raise :class:`_Rewritten`) or the journal or the fold kept moving
        for :data:`TRIES` reads."""
        try:
            for _ in range(TRIES):
                token, ends = self.fold.folded()
                if check is not None:
                    check(ends)
                read = self._read_up_to(ends, dict(kept), start_of)
                if read is None:
                    continue
                events, cursors = read
                if not events and not everything:
                    self.cursors = cursors
                    return Batch((), (), position=self.position())
                batch = self.fold.batch(token, events, _position_of(cursors), everything=everything)
                if batch is not None:
                    self.cursors = cursors
                    return batch
        except _Rewritten:
            return None
        return None

    def _read_up_to(
        self,
        ends: dict[str, tuple[int, bytes]],
        cursors: dict[str, _Cursor],
        start_of: Callable[[Segment], tuple[int, hashlib.blake2b]],
    ) -> tuple[list[Decoded], dict[str, _Cursor]] | None:
        """The events of every segment from where ``start_of`` says (its offset and the digest state
        there) up to the fold's end of it, and the cursors past them (``cursors`` updated); ``None``
        when the bytes are not those the fold read (written again since: read again)."""
        from eventmem.journal.decoder import decode_bytes

        events: list[Decoded] = []
        for segment in self.journal.segments():
            stat = (segment.size, segment.mtime_ns, segment.inode)
            cursor = cursors.get(segment.name)
            if cursor is not None and cursor.stat == stat:
                continue  # (nothing appended since it was read)
            start, hasher = start_of(segment)
            end, digest = ends.get(segment.name, (0, b""))
            if end <= start:  # (the fold has not read past it yet: the next read takes the rest)
                cursors[segment.name] = _Cursor(start, hasher, _stat_at(segment, start))
                continue
            data = _bytes(segment, start, end)
            if data is None:
                return None
            hasher.update(data)
            if hasher.digest() != digest:
                return None
            decoded = decode_bytes(data, segment.name)
            self._report(decoded.corrupt)
            events.extend(decoded.events)
            cursors[segment.name] = _Cursor(end, hasher, _stat_at(segment, end))
        return events, cursors


def _stat_at(segment: Segment, offset: int) -> tuple[int, int, int]:
    """The stat a cursor at ``offset`` keeps: the segment's own when read to its end, else one that no
    stat equals, so that the next look reads on from ``offset`` whatever the segment's stat then."""
    return (segment.size, segment.mtime_ns, segment.inode) if segment.size == offset else (offset, -1, segment.inode)


class _Rewritten(Exception):
    """A segment no longer begins with the bytes read of it: the journal must be projected again."""


def _position_of(cursors: dict[str, _Cursor]) -> dict[str, SegmentPosition]:
    return {segment_key(name): SegmentPosition(c.offset, c.hasher.digest()) for name, c in sorted(cursors.items())}


def _by_name(reading: _Reading, position: dict[str, SegmentPosition]) -> list[tuple[str, SegmentPosition]]:
    """``position``'s entries by the name of the segment they are of."""
    keys = {segment_key(s.name): s.name for s in reading.journal.segments()}
    return [(keys[key], known) for key, known in position.items() if key in keys]


def _bytes(segment: Segment, start: int, end: int) -> bytes | None:
    """The bytes of the segment from ``start`` to ``end`` (``None``: it is shorter, or no longer a
    file of its own: a segment swapped for a symbolic link is not followed, as the journal's scan
    does not follow it)."""
    if end <= start:
        return b""
    try:
        with os.fdopen(os.open(segment.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW), "rb") as handle:
            handle.seek(start)
            data = handle.read(end - start)
    except OSError:
        return None
    return data if len(data) == end - start else None


def _prefix(segment: Segment, length: int, hasher: hashlib.blake2b) -> bytes | None:
    """The first ``length`` bytes of the segment, fed to ``hasher`` (``None``: as :func:`_bytes`)."""
    data = _bytes(segment, 0, length)
    if data is not None:
        hasher.update(data)
    return data


@runtime_checkable
class CountsEvents(Protocol):
    """A projection that can say how many of a journal's events it holds (each id once)."""

    def events_held(self) -> int: ...


class ProjectSync:
    """Keeps one projector in step with one journal (folded by its feed, or by ``fold``: the process's own
    fold of it)."""

    def __init__(self, projector: Projector, root: Path, fold: Fold | None = None) -> None:
        self.projector = projector
        self.feed: JournalFeed | FoldFeed = JournalFeed(root) if fold is None else FoldFeed(root, fold=fold)

    def start(self) -> int:
        """Bring the projector up to the journal; returns the number of events it took."""
        held = self.projector.position() if self.projector.restore(None) else None
        batch = self.feed.resume(held) if held is not None else None
        if batch is None:
            if held is not None:
                log.info("the journal at %s was rewritten (rebase, checkout): projecting it again", self.feed.root)
            return self._load()
        if batch.events or batch.upserts or batch.removals or batch.position != held:
            try:
                self.projector.apply(batch)
            except ProjectionGone:  # (dropped by another writer since its position was read)
                return self._load()
        if isinstance(self.feed, JournalFeed) and isinstance(self.projector, CountsEvents):
            # (its position says in step; its events must be the journal's: rows a writer left behind
            # a batch it applied onto a project another sync had dropped, before that was noticed)
            held_events, folded = self.projector.events_held(), len(self.feed.state.seen)
            if held_events != folded:
                log.warning(
                    "the database holds %d events of %s's %d though in step with it: projecting it again",
                    held_events,
                    self.feed.root,
                    folded,
                )
                return self._load()
        return len(batch.events)

    def catch_up(self) -> int:
        """Take what was appended since; returns the number of events taken."""
        batch = self.feed.tail()
        if batch is None:
            log.info("the journal at %s was rewritten (rebase, checkout): projecting it again", self.feed.root)
            return self._load()
        if batch.events or batch.upserts or batch.removals:
            try:
                self.projector.apply(batch)
            except ProjectionGone:
                log.warning(
                    "the database no longer holds %s's rows (another sync dropped them): projecting it again",
                    self.feed.root,
                )
                return self._load()
        return len(batch.events)

    def _load(self) -> int:
        batch = self.feed.full()
        self.projector.load(batch)
        return len(batch.events)
