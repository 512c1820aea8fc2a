"""The fold: memory state as a pure function of the *set* of events.

Every rule here is commutative, associative and idempotent, so any order of the same events (two
branches merged either way, two processes interleaved, a replay that sees a line twice) folds to
the same state:

- each field is a last-writer-wins register keyed by the stamp ``ts + event id`` (both fixed
  width, so string order is time order, with the event id breaking ties);
- deleted and expired are tombstones (the greatest stamp of each kind); a memory is dead while its
  greatest tombstone is newer than its greatest restore, so later updates never resurrect it;
- ``created_at`` is the earliest ``saved``; an event id seen before is a no-op.

No IO here: :mod:`eventmem.store` feeds events in and keeps the indexes in step.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from eventmem.codec import UnknownEvent
from eventmem.errors import SnapshotDamaged
from eventmem.events import (
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
from eventmem.ids import parse_iso, to_iso

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_values

__all__ = ["LinkRecord", "MemoryRecord", "MemoryRecords", "State", "Status", "StoredState", "stamp_of"]

Status = Literal["live", "deleted", "expired"]
_TS_WIDTH = len("2026-01-01T00:00:00.000000Z")
_REGISTERS = ("kind", "scope", "title", "content", "summary", "tags", "importance", "ttl_seconds", "project")


def normalize_ts(ts: str) -> str:
    """Fixed-width UTC form of a timestamp, so that stamps compare as strings."""
    if len(ts) == _TS_WIDTH and ts.endswith("Z"):
        return ts
    try:
        return to_iso(parse_iso(ts))
    except ValueError:
        return ts.ljust(_TS_WIDTH, "0")[:_TS_WIDTH]


def stamp_of(ts: str, event_id: str) -> str:
    return normalize_ts(ts) + event_id


class MemoryRecord(msgspec.Struct, kw_only=True, gc=False):
    """What the fold knows about one memory. Registers hold ``(stamp, value)`` by field name."""

    id: str
    exists: bool = False
    """A ``saved`` event was seen (an update can arrive first, from another branch)."""
    kind: str = "general"
    scope: str = "project"
    title: str = ""
    content: str = ""
    summary: str = ""
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    ttl_seconds: int | None = None
    project: str = ""
    stamps: dict[str, str] = {}
    created_stamp: str = ""
    created_by: str = ""
    updated_stamp: str = ""
    updated_by: str = ""
    deleted_stamp: str = ""
    expired_stamp: str = ""
    restored_stamp: str = ""
    promoted_stamp: str = ""
    archived: bool = False
    archived_stamp: str = ""
    """The latest ``archived`` event naming this memory: events older than it were looked at."""
    events: int = 0

    @property
    def status(self) -> Status:
        tomb = max(self.deleted_stamp, self.expired_stamp)
        if not tomb or tomb <= self.restored_stamp:
            return "live"
        return "deleted" if self.deleted_stamp >= self.expired_stamp else "expired"

    @property
    def created_at(self) -> str:
        return self.created_stamp[:_TS_WIDTH]

    @property
    def updated_at(self) -> str:
        return self.updated_stamp[:_TS_WIDTH]

    @property
    def ttl_set_at(self) -> str:
        """When the TTL in force was set: the clock its expiry counts from."""
        return self.stamps.get("ttl_seconds", self.created_stamp)[:_TS_WIDTH]

    def write(self, field: str, value: object, stamp: str) -> bool:
        if stamp <= self.stamps.get(field, ""):
            return False
        self.stamps[field] = stamp
        setattr(self, field, value)
        return True


_RECORD = msgspec.msgpack.Decoder(MemoryRecord)
_MISSING: Any = object()


class MemoryRecords(dict[str, MemoryRecord]):
    """The fold's memories by id. Those of a loaded snapshot stay encoded until first asked for.

    A cold start then decodes one small entry per memory instead of every record: a query reads its
    top hits, a save its own memory. Each record is decoded once, under a lock, so two threads
    never end up holding different copies of one memory; listing every value decodes the rest.
    Fresh states (the fold from the journal) hold only records and pay nothing for this.
    """

    __slots__ = ("_encoded", "_lock", "damaged")

    def __init__(self, encoded: Mapping[str, msgspec.Raw] | None = None) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._encoded = 0
        self.damaged = False
        """A record did not decode (see :class:`SnapshotDamaged`): the owner must rebuild."""
        if encoded:
            dict.update(self, encoded)
            self._encoded = len(encoded)

    @property
    def encoded(self) -> int:
        """How many records are still encoded."""
        return self._encoded

    def _decode(self, memory_id: str, value: object) -> MemoryRecord:
        with self._lock:
            current = dict.get(self, memory_id, _MISSING)
            if isinstance(current, msgspec.Raw):
                record = self._decode_one(memory_id, current)
                dict.__setitem__(self, memory_id, record)
                self._encoded -= 1
                return record
            if current is _MISSING:  # removed meanwhile: hand back what the caller found
                return self._decode_one(memory_id, value) if isinstance(value, msgspec.Raw) else value  # type: ignore[return-value]
            return current  # type: ignore[no-any-return]

    def _decode_one(self, memory_id: str, raw: msgspec.Raw) -> MemoryRecord:
        try:
            record = _RECORD.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.damaged = True
            raise SnapshotDamaged(memory_id, str(exc)) from exc
        if record.id != memory_id:
            self.damaged = True
            raise SnapshotDamaged(memory_id, f"holds memory {record.id}")
        return record

    def decode_all(self) -> None:
        if not self._encoded:
            return
        with self._lock:
            for memory_id, value in list(dict.items(self)):
                if isinstance(value, msgspec.Raw):
                    dict.__setitem__(self, memory_id, self._decode_one(memory_id, value))
                    self._encoded -= 1

    def __getitem__(self, memory_id: str) -> MemoryRecord:
        value = dict.__getitem__(self, memory_id)
        if self._encoded and isinstance(value, msgspec.Raw):
            return self._decode(memory_id, value)
        return value

    def get(self, memory_id: str, default: Any = None) -> Any:
        value = dict.get(self, memory_id, _MISSING)
        if value is _MISSING:
            return default
        if self._encoded and isinstance(value, msgspec.Raw):
            return self._decode(memory_id, value)
        return value

    def pop(self, memory_id: str, default: Any = _MISSING) -> Any:
        self.decode_all()
        if default is _MISSING:
            return dict.pop(self, memory_id)
        return dict.pop(self, memory_id, default)

    def values(self) -> dict_values[str, MemoryRecord]:
        self.decode_all()
        return dict.values(self)

    def items(self) -> dict_items[str, MemoryRecord]:
        self.decode_all()
        return dict.items(self)

    def copy(self) -> dict[str, MemoryRecord]:
        self.decode_all()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self.decode_all()
        if isinstance(other, MemoryRecords):
            other.decode_all()
        return dict.__eq__(self, other)

    __hash__ = None


class LinkRecord(msgspec.Struct, kw_only=True, gc=False):
    id: str
    source: str = ""
    target: str = ""
    relation: str = "related_to"
    strength: float = 1.0
    context: str = ""
    added_stamp: str = ""
    added_by: str = ""
    removed_stamp: str = ""

    @property
    def alive(self) -> bool:
        return bool(self.added_stamp) and not self.removed_stamp


class State(msgspec.Struct, kw_only=True):
    """The folded state of one journal (all segments, archive included)."""

    memories: dict[str, MemoryRecord] = {}
    links: dict[str, LinkRecord] = {}
    seen: set[str] = set()
    unknown: dict[str, int] = {}
    """Events of types newer than this version, counted by type."""
    adjacency: dict[str, set[str]] = {}
    """Link ids by the memories they touch, for graph walks."""

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

    def apply(self, event: AnyEvent | UnknownEvent) -> tuple[str, ...]:
        """Fold one event in; returns the ids of memories whose visible state may have changed."""
        if event.id in self.seen:
            return ()
        self.seen.add(event.id)
        if isinstance(event, UnknownEvent):
            self.unknown[event.type] = self.unknown.get(event.type, 0) + 1
            return ()
        stamp = stamp_of(event.ts, event.id)
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
                        stamps=dict.fromkeys(_REGISTERS, stamp),
                        created_stamp=stamp,
                        created_by=event.by,
                        updated_stamp=stamp,
                        updated_by=event.by,
                        events=1,
                    )
                    return (record.id,)
                record.events += 1
                if not record.exists or stamp < record.created_stamp:
                    record.created_stamp, record.created_by = stamp, event.by
                record.exists = True
                for field in _REGISTERS:
                    record.write(field, getattr(event, field), stamp)
                self._touch(record, stamp, event.by)
                return (record.id,)
            case MemoryUpdated():
                record = self.memory(event.memory)
                record.events += 1
                for field in _REGISTERS:
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
        record = self.memories.get(memory_id)
        if record is None or not record.exists or record.status != "live":
            return None
        return record

    def links_of(self, memory_id: str) -> list[LinkRecord]:
        links = (self.links[link_id] for link_id in self.adjacency.get(memory_id, ()))
        return sorted((link for link in links if link.alive), key=lambda link: link.added_stamp)


class StoredState(msgspec.Struct, kw_only=True):
    """How a snapshot holds a :class:`State`: the same fields, each memory left encoded."""

    memories: dict[str, msgspec.Raw] = {}
    links: dict[str, LinkRecord] = {}
    seen: set[str] = set()
    unknown: dict[str, int] = {}
    adjacency: dict[str, set[str]] = {}

    def state(self) -> State:
        return State(
            memories=MemoryRecords(self.memories),
            links=self.links,
            seen=self.seen,
            unknown=self.unknown,
            adjacency=self.adjacency,
        )
