"""What the fold knows about each memory and link: the records it folds events into."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from eventmem.core.errors import SnapshotDamaged
from eventmem.core.stamps import id_of, ts_of

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_values

__all__ = ["REGISTERS", "LinkRecord", "MemoryRecord", "MemoryRecords", "RecordHead", "Status"]

Status = Literal["live", "deleted", "expired"]
REGISTERS = (
    "kind",
    "scope",
    "title",
    "content",
    "summary",
    "tags",
    "importance",
    "ttl_seconds",
    "project",
    "metadata",
    "source",
)
"""The fields of a memory that are last-writer-wins registers."""


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
    metadata: dict[str, str] = {}
    source: str = ""
    stamps: dict[str, str] = {}
    created_stamp: str = ""
    origin_created: str = ""
    """When the store it was imported from says it was made (``""``: made here, at ``created_stamp``)."""
    origin_updated: str = ""
    """When the store it was imported from last changed it (``""``: as ``origin_created``)."""
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
    depths: dict[str, int] = {}
    """The causal depth of the events about this memory that have one above 0, by event id."""

    @property
    def status(self) -> Status:
        return _status(self.deleted_stamp, self.expired_stamp, self.restored_stamp)

    @property
    def head_stamp(self) -> str:
        """The stamp of the greatest event about this memory in the fold's order."""
        return max(self.updated_stamp, self.deleted_stamp, self.expired_stamp, self.restored_stamp)

    @property
    def head(self) -> str:
        """The id of the greatest event about this memory: the ``prev`` of the next one written."""
        return id_of(self.head_stamp)

    @property
    def created_at(self) -> str:
        """When it was made: here, or (an import) in the store it came from."""
        return self.origin_created or ts_of(self.created_stamp)

    @property
    def updated_at(self) -> str:
        """When it last changed: here, or (an import not changed since) in the store it came from."""
        if self.origin_created and self.updated_stamp == self.created_stamp:
            return self.origin_updated or self.origin_created
        return ts_of(self.updated_stamp)

    @property
    def ttl_set_at(self) -> str:
        """When the TTL in force was set: the clock its expiry counts from."""
        return ts_of(self.stamps.get("ttl_seconds", self.created_stamp))

    def write(self, field: str, value: object, stamp: str) -> bool:
        if stamp <= self.stamps.get(field, ""):
            return False
        self.stamps[field] = stamp
        setattr(self, field, value)
        return True


def _status(deleted_stamp: str, expired_stamp: str, restored_stamp: str) -> Status:
    tomb = max(deleted_stamp, expired_stamp)
    if not tomb or tomb <= restored_stamp:
        return "live"
    return "deleted" if deleted_stamp >= expired_stamp else "expired"


class RecordHead(msgspec.Struct, kw_only=True, gc=False):
    """A :class:`MemoryRecord`'s id, type, title, creation and liveness, decoded from its encoding
    without the rest (its texts, its registers): for a read that orders or picks many memories
    before it reads them a few at a time. Its fields are the record's, with the same defaults."""

    id: str
    exists: bool = False
    kind: str = "general"
    title: str = ""
    created_stamp: str = ""
    deleted_stamp: str = ""
    expired_stamp: str = ""
    restored_stamp: str = ""

    @property
    def status(self) -> Status:
        return _status(self.deleted_stamp, self.expired_stamp, self.restored_stamp)


_Decoded = TypeVar("_Decoded", MemoryRecord, RecordHead)
_RECORD = msgspec.msgpack.Decoder(MemoryRecord)
_HEAD = msgspec.msgpack.Decoder(RecordHead)
_MISSING: Any = object()
RawReader = Callable[[msgspec.Raw], bytes | msgspec.Raw]
"""Where an encoded record's bytes are read from when it is decoded (a snapshot's file, not its map)."""


class MemoryRecords(dict[str, MemoryRecord]):
    """The fold's memories by id. Those of a loaded snapshot stay encoded until first asked for.

    A cold start then decodes one small entry per memory instead of every record: a query reads its
    top hits, a save its own memory. Each record is decoded once, under a lock, so two threads
    never end up holding different copies of one memory; listing every value decodes the rest.
    Fresh states (the fold from the journal) hold only records and pay nothing for this.
    """

    __slots__ = ("_encoded", "_lock", "_read", "damaged")

    def __init__(self, encoded: Mapping[str, msgspec.Raw] | None = None, read: RawReader | None = None) -> None:
        super().__init__()
        self._read = read
        """Reads one record's bytes to decode it (see :class:`~eventmem.runner.snapshots.MappedRecords`);
        listing every value decodes them where they lie."""
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

    def _decode_one(self, memory_id: str, raw: msgspec.Raw, *, read: bool = True) -> MemoryRecord:
        return self._decoded(memory_id, raw, _RECORD, read=read)

    def _decoded(
        self, memory_id: str, raw: msgspec.Raw, decoder: msgspec.msgpack.Decoder[_Decoded], *, read: bool = True
    ) -> _Decoded:
        try:
            record = decoder.decode(self._read(raw) if read and self._read is not None else raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.damaged = True
            raise SnapshotDamaged(memory_id, str(exc)) from exc
        if record.id != memory_id:
            self.damaged = True
            raise SnapshotDamaged(memory_id, f"holds memory {record.id}")
        return record

    def held(self, memory_id: str) -> MemoryRecord | msgspec.Raw | None:
        """The record as held now: still encoded (bytes that never change), or decoded; not decoded here."""
        value: MemoryRecord | msgspec.Raw | None = dict.get(self, memory_id)
        return value

    def read(self, memory_id: str, held: MemoryRecord | msgspec.Raw) -> MemoryRecord:
        """A record :meth:`held` gave, decoded without being kept (from any thread)."""
        return self._decode_one(memory_id, held) if isinstance(held, msgspec.Raw) else held

    def read_head(self, memory_id: str, held: MemoryRecord | msgspec.Raw) -> MemoryRecord | RecordHead:
        """:meth:`read`, of the record's :class:`RecordHead` alone when it is still encoded."""
        return self._decoded(memory_id, held, _HEAD) if isinstance(held, msgspec.Raw) else held

    def decode_all(self) -> None:
        if not self._encoded:
            return
        with self._lock:
            for memory_id, value in list(dict.items(self)):
                if isinstance(value, msgspec.Raw):
                    dict.__setitem__(self, memory_id, self._decode_one(memory_id, value, read=False))
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
    depths: dict[str, int] = {}
    """The causal depth of the events about this link that have one above 0, by event id."""

    @property
    def head(self) -> str:
        """The id of the greatest event about this link: the ``prev`` of the next one written."""
        return id_of(max(self.added_stamp, self.removed_stamp))

    @property
    def alive(self) -> bool:
        return bool(self.added_stamp) and not self.removed_stamp
