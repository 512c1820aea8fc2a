"""The fold: memory state as a pure function of the *set* of events.

Every rule here is commutative, associative and idempotent, so any order of the same events (two
branches merged either way, two processes interleaved, a replay that sees a line twice) folds to
the same state:

- each field is a last-writer-wins register keyed by the event's *stamp* (see :func:`key_of`):
  its causal depth, then ``ts``, then the event id, written so that string order is the fold's
  order. The depth of an event is 1 + the depth of its ``prev`` (the event that was the
  memory's, or link's, head when it was written) when that names a known event about the same
  memory or link; 1 when it names a known event about something else (a forger gains no more
  than by naming the memory's first event); 0 without a ``prev``, or with one not seen (yet). A
  line stamped in the year 9999 therefore wins only against what was written without seeing it:
  an edit made after it names it as ``prev`` and sorts after it. A journal of events without
  ``prev`` folds by time, as it always did;
- the events of one fold call are folded together (:meth:`State.fold`): depths are computed over
  the whole batch, and of several lines with one event id the one whose canonical line has the
  smallest SHA-256 digest is folded, whatever the order. A later batch that would change what an
  earlier one folded (the ``prev`` of an orphan arrives, or a new version of a known event id)
  marks the state stale: its owner folds the journal again from scratch;
- deleted and expired are tombstones (the greatest stamp of each kind); a memory is dead while its
  greatest tombstone is newer than its greatest restore, so later updates never resurrect it;
- ``created_at`` is the earliest ``saved``; an event id seen before is a no-op.

No IO here: the runner (:mod:`eventmem.runner`) feeds events in and keeps the indexes in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.event_ids import EventIds
from eventmem.core.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.records import REGISTERS, LinkRecord, MemoryRecord, MemoryRecords, RawReader, RecordHead
from eventmem.core.stamps import NO_DEPTH, depth_digits, event_digest, key_of, normalize_ts

__all__ = ["State", "StoredState"]


class State(msgspec.Struct, kw_only=True):
    """The folded state of one journal (all segments, archive included)."""

    memories: dict[str, MemoryRecord] = {}
    links: dict[str, LinkRecord] = {}
    seen: EventIds = msgspec.field(default_factory=EventIds)
    """Every event id folded (see :mod:`eventmem.core.event_ids`)."""
    unknown: dict[str, int] = {}
    """Events of types newer than this version, counted by type."""
    adjacency: dict[str, set[str]] = {}
    """Link ids by the memories they touch, for graph walks."""
    awaited: set[str] = set()
    """Ids named as ``prev`` by folded events but not seen yet: such an event has depth 0 until
    its ``prev`` arrives, and then the state is stale (see :meth:`fold`)."""
    conflicts: dict[str, bytes] = {}
    """Event ids seen on more than one line: the digest of the version folded (the smallest)."""
    unread: dict[str, bytes] = {}
    """Events folded before their line was read back (a process's own appends), by digest."""

    def memory(self, memory_id: str) -> MemoryRecord:
        record = self.memories.get(memory_id)
        if record is None:
            record = self.memories[memory_id] = MemoryRecord(id=memory_id)
        return record

    def link(self, link_id: str) -> LinkRecord:
        record = self.links.get(link_id)
        if record is None:
            record = self.links[link_id] = LinkRecord(id=link_id)
        return record

    def head_of(self, memory_id: str) -> str:
        """The ``prev`` of a new event about this memory: the id of its head event (``""``: none)."""
        record = self.memories.get(memory_id)
        return record.head if record is not None else ""

    def link_head_of(self, link_id: str) -> str:
        """The ``prev`` of a new event about this link: the id of its head event (``""``: none)."""
        link = self.links.get(link_id)
        return link.head if link is not None else ""

    def key_of_event(self, event: AnyEvent) -> str:
        """The fold's stamp of an event (see :func:`key_of`), from the depth folded for it."""
        subject = _subject(event)
        return key_of(self._folded_depth(subject, event.id) if subject is not None else 0, event.ts, event.id)

    def apply(self, event: AnyEvent | UnknownEvent) -> tuple[str, ...]:
        """Fold one event in; returns the ids of memories whose visible state may have changed.
        An event id seen before is a no-op (see :meth:`fold` for what a caller that can fold
        again from scratch learns from it)."""
        touched, _ = self.fold((event,))
        return tuple(touched)

    def written(self, events: Sequence[AnyEvent]) -> list[str]:
        """Fold events this process has just appended; their lines, read back later, are no-ops."""
        for event in events:
            self.unread[event.id] = event_digest(event)
        touched, _ = self.fold(events)
        return touched

    def fold(self, events: Sequence[AnyEvent | UnknownEvent]) -> tuple[list[str], bool]:
        """Fold a batch of events in; returns (memories whose visible state may have changed, stale).

        Stale means that the state now differs from a fold of the same events from scratch and
        its owner should fold again (everything in one batch): an event arrived that a folded
        event names as ``prev`` (its depth and its successors' change: the event is folded, the
        depths are left), or another version of a folded event id that might win (not folded)."""
        stale = False
        batch: dict[str, AnyEvent | UnknownEvent] = {event.id: event for event in events}
        digests: dict[str, bytes] = {}
        seen, awaited = self.seen, self.awaited
        if len(batch) == len(events) and seen.isdisjoint(batch) and awaited.isdisjoint(batch):
            events = ()  # (the common case: new ids only, each once, none awaited)
        else:
            batch = {}
        for event in events:
            event_id = event.id
            if event_id in seen:
                stale = self._seen_again(event) or stale
                continue
            if awaited and event_id in awaited:
                stale = True
            other = batch.setdefault(event_id, event)
            if other is event:
                continue
            if event_id not in digests:
                digests[event_id] = event_digest(other)
            digest = event_digest(event)
            if digest < digests[event_id]:
                batch[event_id], digests[event_id] = event, digest
        for event_id, digest in digests.items():
            self.conflicts[event_id] = digest
        depths = self._depths(batch)
        self.seen.add_new(batch)  # (none held: the fast path checked the batch, the other skipped them)
        touched: list[str] = []
        apply, extend = self._apply, touched.extend
        if not depths:  # (the common case: no event of the batch has a prev)
            for event in batch.values():
                extend(apply(event, NO_DEPTH))
            return touched, stale
        for event_id, event in batch.items():
            if event_id not in depths:
                extend(apply(event, NO_DEPTH))
                continue
            depth = depths[event_id]
            extend(apply(event, depth_digits(depth)))
            subject = _subject(event)
            if subject is not None:
                owner = self.memory(subject[1]) if subject[0] == "memory" else self.link(subject[1])
                owner.depths[event_id] = depth
        return touched, stale

    def _seen_again(self, event: AnyEvent | UnknownEvent) -> bool:
        """A line with a folded event id: whether the fold could differ with it (stale)."""
        expected = self.unread.pop(event.id, None)
        if expected is not None:
            return event_digest(event) != expected
        folded = self.conflicts.get(event.id)
        return folded is None or event_digest(event) < folded

    def _depths(self, batch: Mapping[str, AnyEvent | UnknownEvent]) -> dict[str, int]:
        """The causal depth of each event of ``batch`` that has one above 0 (see the module doc).

        A chain of ``prev`` is followed through the batch, then the folded events; an event in a
        ``prev`` cycle (only forged lines make one) counts as having no ``prev``."""
        depths: dict[str, int] = {}
        done: set[str] = set()
        for start in [event for event in batch.values() if getattr(event, "prev", "")]:
            if start.id in done or isinstance(start, UnknownEvent):
                continue
            path: list[str] = []
            on_path: dict[str, int] = {}
            current: AnyEvent | UnknownEvent = start
            base = 0
            while True:
                on_path[current.id] = len(path)
                path.append(current.id)
                prev = "" if isinstance(current, UnknownEvent) else current.prev
                subject = _subject(current)
                if not prev or subject is None:
                    base = 0
                    break
                ahead = batch.get(prev)
                if ahead is None:
                    if prev in self.seen:
                        base = self._folded_depth(subject, prev) + 1
                    else:
                        self.awaited.add(prev)
                        base = 0
                    break
                if _subject(ahead) != subject:
                    base = 1
                    break
                if prev in done:
                    base = depths.get(prev, 0) + 1
                    break
                if prev in on_path:  # a cycle: its members count as having no prev
                    cycle = path[on_path[prev] :]
                    del path[on_path[prev] :]
                    done.update(cycle)
                    base = 1 if path else 0
                    break
                current = ahead
            for event_id in reversed(path):
                if base:
                    depths[event_id] = base
                done.add(event_id)
                base += 1
        return depths

    def _folded_depth(self, subject: tuple[str, str], event_id: str) -> int:
        """The depth of a folded event, as a ``prev`` about ``subject`` sees it (0 if not about it)."""
        kind, subject_id = subject
        owner: MemoryRecord | LinkRecord | None = (
            self.memories.get(subject_id) if kind == "memory" else self.links.get(subject_id)
        )
        return 0 if owner is None or not owner.depths else owner.depths.get(event_id, 0)

    def _apply(self, event: AnyEvent | UnknownEvent, depth: str) -> tuple[str, ...]:
        """Fold one event in at ``depth`` (its digits, see :func:`key_of`); its id is in ``seen`` already."""
        if isinstance(event, UnknownEvent):
            self.unknown[event.type] = self.unknown.get(event.type, 0) + 1
            return ()
        stamp = depth + normalize_ts(event.ts) + event.id
        match event:
            case MemorySaved():
                record = self.memories.get(event.memory)
                if record is None:  # the common case, a new memory: every register is this event's
                    record = self.memories[event.memory] = MemoryRecord(
                        id=event.memory,
                        exists=True,
                        kind=event.kind,
                        scope=event.scope,
                        title=event.title,
                        content=event.content,
                        summary=event.summary,
                        tags=event.tags,
                        importance=event.importance,
                        ttl_seconds=event.ttl_seconds,
                        project=event.project,
                        metadata=event.metadata,
                        source=event.source,
                        stamps=dict.fromkeys(REGISTERS, stamp),
                        created_stamp=stamp,
                        origin_created=normalize_ts(event.created_at) if event.created_at else "",
                        origin_updated=normalize_ts(event.updated_at) if event.updated_at else "",
                        created_by=event.by,
                        updated_stamp=stamp,
                        updated_by=event.by,
                        events=1,
                    )
                    return (record.id,)
                record.events += 1
                if not record.exists or stamp < record.created_stamp:
                    record.created_stamp, record.created_by = stamp, event.by
                    record.origin_created = normalize_ts(event.created_at) if event.created_at else ""
                    record.origin_updated = normalize_ts(event.updated_at) if event.updated_at else ""
                record.exists = True
                for field in REGISTERS:
                    record.write(field, getattr(event, field), stamp)
                self._touch(record, stamp, event.by)
                return (record.id,)
            case MemoryUpdated():
                record = self.memory(event.memory)
                record.events += 1
                for field in REGISTERS:
                    value = getattr(event, field, msgspec.UNSET)
                    if value is not msgspec.UNSET:
                        record.write(field, value, stamp)
                self._touch(record, stamp, event.by)
                return (record.id,)
            case MemoryPromoted():
                record = self.memory(event.memory)
                record.events += 1
                record.write("ttl_seconds", None, stamp)
                record.promoted_stamp = max(record.promoted_stamp, stamp)
                self._touch(record, stamp, event.by)
                return (record.id,)
            case MemoryDeleted():
                record = self.memory(event.memory)
                record.events += 1
                record.deleted_stamp = max(record.deleted_stamp, stamp)
                return (record.id,)
            case MemoryExpired():
                record = self.memory(event.memory)
                record.events += 1
                record.expired_stamp = max(record.expired_stamp, stamp)
                return (record.id,)
            case MemoryRestored():
                record = self.memory(event.memory)
                record.events += 1
                record.restored_stamp = max(record.restored_stamp, stamp)
                return (record.id,)
            case LinkAdded():
                link = self.link(event.link)
                left: tuple[str, ...] = ()  # a link moved to other ends changes what its old ends see too
                if stamp > link.added_stamp:
                    left = tuple(end for end in (link.source, link.target) if end)
                    for end in left:
                        self.adjacency.get(end, set()).discard(link.id)
                    link.source, link.target = event.source, event.target
                    self.adjacency.setdefault(link.source, set()).add(link.id)
                    self.adjacency.setdefault(link.target, set()).add(link.id)
                    link.relation, link.strength, link.context = event.relation, event.strength, event.context
                    link.added_stamp, link.added_by = stamp, event.by
                return (event.source, event.target, *left)
            case LinkRemoved():
                link = self.link(event.link)
                link.removed_stamp = max(link.removed_stamp, stamp)
                return (link.source, link.target) if link.source else ()
            case MemoryArchived():
                for memory_id in event.memories:
                    record = self.memory(memory_id)
                    record.archived = True
                    record.archived_stamp = max(record.archived_stamp, stamp)
                return ()

    @staticmethod
    def _touch(record: MemoryRecord, stamp: str, by: str) -> None:
        if stamp > record.updated_stamp:
            record.updated_stamp, record.updated_by = stamp, by

    def visible(self, memory_id: str) -> MemoryRecord | None:
        """The memory if it exists and is live (not deleted, not expired by an event)."""
        return _live(self.memories.get(memory_id))

    def visible_unkept(self, memory_id: str) -> MemoryRecord | None:
        """:meth:`visible`, for a read of many memories: a record still encoded (after a snapshot load)
        is decoded for the caller alone, not kept decoded (about 2 KB a memory, for as long as the
        process runs). Read it, do not change it."""
        memories = self.memories
        if not isinstance(memories, MemoryRecords):
            return self.visible(memory_id)
        held = memories.held(memory_id)
        return _live(memories.read(memory_id, held) if held is not None else None)

    def visible_head(self, memory_id: str) -> MemoryRecord | RecordHead | None:
        """:meth:`visible_unkept`, of the memory's :class:`RecordHead` alone when its record is still
        encoded (its texts are not decoded): for a read that orders many memories."""
        memories = self.memories
        if not isinstance(memories, MemoryRecords):
            return self.visible(memory_id)
        held = memories.held(memory_id)
        head = memories.read_head(memory_id, held) if held is not None else None
        if head is None or not head.exists or head.status != "live":
            return None
        return head

    def links_of(self, memory_id: str) -> list[LinkRecord]:
        links = (self.links[link_id] for link_id in self.adjacency.get(memory_id, ()))
        return sorted((link for link in links if link.alive), key=lambda link: link.added_stamp)


def _subject(event: AnyEvent | UnknownEvent) -> tuple[str, str] | None:
    """What an event is about, for its ``prev``: ("memory", id), ("link", id) or nothing."""
    if isinstance(event, (LinkAdded, LinkRemoved)):
        return ("link", event.link)
    if isinstance(event, (MemoryArchived, UnknownEvent)):
        return None
    return ("memory", event.memory)


class StoredState(msgspec.Struct, kw_only=True):
    """How a snapshot holds a :class:`State`: the same fields, each memory left encoded."""

    memories: dict[str, msgspec.Raw] = {}
    links: dict[str, LinkRecord] = {}
    seen: EventIds = msgspec.field(default_factory=EventIds)
    unknown: dict[str, int] = {}
    adjacency: dict[str, set[str]] = {}
    awaited: set[str] = set()
    conflicts: dict[str, bytes] = {}
    unread: dict[str, bytes] = {}

    def state(self, read: RawReader | None = None) -> State:
        """The state, its memories left encoded (``read``: where a record's bytes are read from)."""
        return State(
            memories=MemoryRecords(self.memories, read),
            links=self.links,
            seen=self.seen,
            unknown=self.unknown,
            adjacency=self.adjacency,
            awaited=self.awaited,
            conflicts=self.conflicts,
            unread=self.unread,
        )


def _live(record: MemoryRecord | None) -> MemoryRecord | None:
    """``record`` if it exists and is live (not deleted, not expired by an event)."""
    if record is None or not record.exists or record.status != "live":
        return None
    return record
