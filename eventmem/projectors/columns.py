"""The filter columns projector: per-memory arrays for filtering before the top-k cut, tag sets and
dedup keys.

In process, over a :class:`SlotTable` the runner owns: a memory keeps one position (slot) for the
life of the projection, the row of every column, of the keyword index and of the vector index.
One code path: :meth:`ColumnsProjector.apply` sets every column of a batch's memories with one
array assignment each, so a rebuild (one batch of every memory) and a save (one memory) run the
same code. Tag sets are made on the first tag filter, not on a bulk load or a restore.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.core.dedup import dedup_key
from eventmem.core.events import KINDS, SCOPES
from eventmem.core.ids import iso_to_epoch, isos_to_epochs
from eventmem.core.records import MemoryRecord
from eventmem.projectors.base import Batch, SegmentPosition

__all__ = ["KEYS_BESIDE_FROM", "Columns", "ColumnsProjector", "SlotTable", "make_dedup_keys"]

log = logging.getLogger("eventmem.projectors.columns")

KEYS_BESIDE_FROM = 500
"""Memories changed at once (a merged branch) from which their dedup keys are made after the call,
by a server's thread (see :meth:`ColumnsProjector.unmade_keys`): about 20 us a memory."""

_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_SCOPE_CODE = {scope: code for code, scope in enumerate(SCOPES)}


class SlotTable:
    """Memory id <-> slot, in the order memories were first projected."""

    def __init__(self, ids: list[str] | None = None) -> None:
        self.ids: list[str] = ids if ids is not None else []
        self.of: dict[str, int] = {memory_id: slot for slot, memory_id in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, memory_id: str) -> int | None:
        return self.of.get(memory_id)

    def replace(self, ids: list[str]) -> None:
        """Hold ``ids`` (slot order) instead, in place: the projectors share this object."""
        self.ids = ids
        self.of = {memory_id: slot for slot, memory_id in enumerate(ids)}

    def extend(self, ids: list[str]) -> None:
        """Give new memories the next slots, in order."""
        start = len(self.ids)
        self.ids.extend(ids)
        self.of.update(zip(ids, range(start, start + len(ids)), strict=True))

    def assign(self, memory_id: str) -> tuple[int, bool]:
        """The memory's slot, and whether it was new."""
        slot = self.of.get(memory_id)
        if slot is not None:
            return slot, False
        slot = self.of[memory_id] = len(self.ids)
        self.ids.append(memory_id)
        return slot, True


@dataclass
class Columns:
    """Per-slot arrays for filtering before the top-k cut."""

    live: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(1024, bool))
    superseded: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(1024, bool))
    kind: npt.NDArray[np.int16] = field(default_factory=lambda: np.full(1024, -1, np.int16))
    scope: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(1024, np.int8))
    importance: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(1024, np.float32))
    created: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(1024, np.float64))
    updated: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(1024, np.float64))
    expires: npt.NDArray[np.float64] = field(default_factory=lambda: np.full(1024, np.inf, np.float64))

    NAMES = ("live", "superseded", "kind", "scope", "importance", "created", "updated", "expires")
    FILL = (False, False, -1, 0, 0.0, 0.0, 0.0, np.inf)

    def grow(self, size: int) -> None:
        if size <= len(self.live):
            return
        new = max(size, len(self.live) * 2)
        for name, fill in zip(self.NAMES, self.FILL, strict=True):
            old = getattr(self, name)
            grown = np.full(new, fill, dtype=old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)

    def dump(self, count: int) -> bytes:
        """The first ``count`` entries of every column, back to back."""
        return b"".join(getattr(self, name)[:count].tobytes() for name in self.NAMES)

    def load(self, data: bytes | memoryview, count: int) -> bool:
        """Fill the first ``count`` entries from :meth:`dump` output; False if it does not fit."""
        self.grow(count)
        if len(data) != sum(getattr(self, name).dtype.itemsize for name in self.NAMES) * count:
            return False
        position = 0
        for name in self.NAMES:
            column = getattr(self, name)
            size = column.dtype.itemsize * count
            column[:count] = np.frombuffer(data, dtype=column.dtype, count=count, offset=position)
            position += size
        return True


class _Saved(msgspec.Struct, array_like=True):
    """The projection as :meth:`ColumnsProjector.snapshot` writes it."""

    count: int
    columns: bytes
    dedup: msgspec.Raw = msgspec.Raw(b"\xc0")
    """Each visible memory's dedup key (decoded on the first duplicate lookup)."""


class _Restored(msgspec.Struct, array_like=True):
    count: int
    columns: memoryview
    dedup: msgspec.Raw = msgspec.Raw(b"\xc0")


class ColumnsProjector:
    """Filter columns, tag sets and dedup keys over a :class:`SlotTable`.

    ``records`` looks up a visible memory's folded record: tag sets (after a bulk load or a restore)
    and damaged dedup keys are made from it on first use."""

    name = "columns"
    version = 1

    def __init__(self, table: SlotTable, records: Callable[[str], MemoryRecord | None]) -> None:
        self.table = table
        self._records = records
        self.reset()

    def reset(self) -> None:
        self.columns = Columns()
        self._changes = 0
        """Counts the changes to the columns (see :meth:`returnable`)."""
        self._kept: dict[bool, tuple[tuple[int, int], float, float, npt.NDArray[np.bool_]]] = {}
        """By ``include_superseded``: the last :meth:`returnable` mask, with (changes, count) and the
        span of ``now`` it holds for."""
        self._order: tuple[tuple[int, int], npt.NDArray[np.int64], npt.NDArray[np.float64]] | None = None
        """The slots in creation order and their times, with the (changes, count) they hold for."""
        self._tag_slots: dict[str, set[int]] = {}
        self._slot_tags: dict[int, tuple[str, ...]] = {}
        self._tags_built = True
        self._keys: dict[str, bytes] = {}
        """Dedup key of each visible memory."""
        self._groups: dict[bytes, set[str]] | None = {}
        """Memory ids by dedup key; ``None``: made from ``_keys`` on the next lookup."""
        self._encoded: msgspec.Raw | None = None
        """Dedup keys restored and not decoded yet; ``_keys`` then holds the changes since."""
        self._unmade: list[MemoryRecord] | None = None
        """The records of a load, or of a large change (a merged branch), whose dedup keys are not made
        yet (see :meth:`unmade_keys`); ``_keys`` then holds the changes since, as for ``_encoded``."""
        self._below: dict[str, bytes] = {}
        """While keys are unmade: the keys (or, over ``_encoded``, the changes) from before those records."""

    # -- the contract ---------------------------------------------------------------------------

    def apply(self, batch: Batch) -> None:
        table, cols = self.table, self.columns
        self._changes += 1
        if batch.removals:
            gone = [slot for memory_id in batch.removals if (slot := table.get(memory_id)) is not None]
            cols.live[gone] = False
            for slot in gone:
                self._untag(slot)
            self._forget_keys(batch.removals)
        upserts = batch.upserts
        if not upserts:
            return
        records = [p.record for p in upserts]
        cols.grow(len(table))
        of = table.of
        slots = np.fromiter((of[r.id] for r in records), np.int64, len(records))
        kind_code, scope_code = _KIND_CODE.get, _SCOPE_CODE.get
        cols.live[slots] = True
        cols.kind[slots] = [kind_code(r.kind, -1) for r in records]
        cols.scope[slots] = [scope_code(r.scope, 0) for r in records]
        cols.importance[slots] = [r.importance for r in records]
        created = _epochs([r.created_at for r in records])
        cols.created[slots] = created
        updated = [i for i, r in enumerate(records) if r.updated_stamp and r.updated_stamp != r.created_stamp]
        if updated:
            created[updated] = _epochs([records[i].updated_at for i in updated])
        cols.updated[slots] = created
        cols.expires[slots] = [p.expires_at for p in upserts]
        cols.superseded[slots] = [p.superseded for p in upserts]
        if self._tags_built:
            for slot, record in zip(slots.tolist(), records, strict=True):
                if record.tags or slot in self._slot_tags:
                    self._tag(slot, record.tags)
        self._learn_keys(records)

    def creation_order(self, count: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The slots below ``count`` in creation order, ties by memory id (the journal's own order:
        every fold of it gives the same), and their creation times, kept for the state they were made
        at. After a change, the kept order is checked against the column (one pass) and the new slots
        are inserted into it: a save costs a copy, not a sort; the slots are sorted again only when a
        kept one's time changed, or at the first ask."""
        key = (self._changes, count)
        kept = self._order
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        created = self.columns.created[:count]
        if kept is not None and len(kept[1]) <= count and np.array_equal(created[kept[1]], kept[2]):
            known = len(kept[1])
            added = created[known:]
            inner = np.argsort(added, kind="stable")
            at = np.searchsorted(kept[2], added[inner], side="right")  # (after the kept ones of the same time)
            order = np.insert(kept[1], at, inner + known)
            saved = np.insert(kept[2], at, added[inner])
        else:
            order = np.argsort(created, kind="stable").astype(np.int64)
            saved = created[order]
        _ties_by_id(order, saved, self.table.ids)
        self._order = (key, order, saved)
        return order, saved

    def load(self, batch: Batch) -> None:
        """:meth:`apply` to an empty projection; the tag sets wait for the first tag filter."""
        self.reset()
        self._tags_built = False
        self.apply(batch)

    def expire_at(self, expiries: Iterable[tuple[str, float]]) -> None:
        """Move the expiry of visible memories (their usage changed)."""
        cols, of = self.columns, self.table.of
        for memory_id, expires in expiries:
            slot = of.get(memory_id)
            if slot is not None and cols.live[slot] and cols.expires[slot] != expires:
                cols.expires[slot] = expires
                self._changes += 1

    def position(self) -> dict[str, SegmentPosition] | None:
        return None  # (the runner keeps the cursors of in-process projections)

    def snapshot(self) -> bytes:
        count = len(self.table)
        self._settle_keys()
        return msgspec.msgpack.encode(_Saved(count, self.columns.dump(count), msgspec.Raw(_encode_keys(self._keys))))

    def restore(self, data: bytes | memoryview | None) -> bool:
        """Take back :meth:`snapshot` output made over the same slot table (restored first)."""
        self.reset()
        if data is None:
            return False
        try:
            saved = msgspec.msgpack.decode(data, type=_Restored)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("ignoring damaged filter columns: %s", exc)
            return False
        if saved.count != len(self.table) or not self.columns.load(saved.columns, saved.count):
            self.reset()
            return False
        self._tags_built = False
        if bytes(saved.dedup) != b"\xc0":
            self._encoded = saved.dedup
            self._groups = None
        else:
            self._rebuild_keys()
        return True

    def close(self) -> None:
        pass

    # -- queries ------------------------------------------------------------------------------------

    def select(
        self, *, now: float, kinds: Iterable[str] = (), tags: Iterable[str] = (), include_superseded: bool = False
    ) -> list[str]:
        """The memories a default query may return at ``now`` (visible, not past their TTL, not
        superseded unless asked), of these types and with every one of these tags, in slot order."""
        count = len(self.table)
        cols = self.columns
        mask = cols.live[:count] & (cols.expires[:count] > now)
        if not include_superseded:
            mask &= ~cols.superseded[:count]
        kinds = tuple(kinds)
        if kinds:
            mask &= self.of_kinds(kinds)
        for tag in tags:
            tagged = np.zeros(count, bool)
            tagged[list(self.tagged(tag))] = True
            mask &= tagged
        ids = self.table.ids
        return [ids[slot] for slot in np.flatnonzero(mask).tolist()]

    def returnable(self, now: float, *, include_superseded: bool = False) -> npt.NDArray[np.bool_]:
        """A mask over slots, the caller's to change: visible, not past the expiry at ``now``, and not
        superseded unless ``include_superseded``.

        The last one is kept while no column changes, for the moments from its ``now`` to the next
        expiry after it (in which ``expires > now`` gives the same answer), and copied out."""
        count = len(self.table)
        kept = self._kept.get(include_superseded)
        if kept is not None and kept[0] == (self._changes, count) and kept[1] <= now < kept[2]:
            return kept[3].copy()
        cols = self.columns
        expires = cols.expires[:count]
        later = expires > now
        mask = cols.live[:count] & later
        if not include_superseded:
            mask &= ~cols.superseded[:count]
        until = float(np.min(expires, where=later, initial=np.inf))
        self._kept[include_superseded] = ((self._changes, count), now, until, mask)
        return mask.copy()

    def visible(self) -> npt.NDArray[np.bool_]:
        """A mask over slots: the visible memories."""
        return self.columns.live[: len(self.table)]

    def of_kinds(self, kinds: Iterable[str]) -> npt.NDArray[np.bool_]:
        """A mask over slots: memories of one of these types."""
        count = len(self.table)
        column = self.columns.kind[:count]
        mask = np.zeros(count, bool)
        for code in {_KIND_CODE[kind] for kind in kinds if kind in _KIND_CODE}:
            mask |= column == code  # (np.isin takes a hundred times as long over 100k slots)
        return mask

    def tagged(self, tag: str) -> set[int]:
        """The visible slots carrying ``tag``."""
        if not self._tags_built:
            self._tags_built = True
            live = self.columns.live
            for memory_id, slot in self.table.of.items():
                if live[slot] and (record := self._records(memory_id)) is not None and record.tags:
                    self._tag(slot, record.tags)
        return self._tag_slots.get(tag, set())

    def duplicates(self, text: str) -> list[str]:
        """Visible memories whose content normalises to the same text (see :func:`dedup_key`)."""
        self._settle_keys()
        groups = self._groups
        if groups is None:
            groups = self._groups = {}
            for memory_id, key in self._keys.items():
                groups.setdefault(key, set()).add(memory_id)
        return sorted(groups.get(dedup_key(text), ()))

    def with_expiry(self) -> list[str]:
        """Visible memories that have a finite expiry (a TTL)."""
        count = len(self.table)
        cols, ids = self.columns, self.table.ids
        return [ids[slot] for slot in np.flatnonzero(cols.live[:count] & np.isfinite(cols.expires[:count])).tolist()]

    def expiring(self, memory_ids: Iterable[str]) -> list[str]:
        """Those of these memories that are visible and have a finite expiry: a memory without a TTL
        never expires, however much it is used, so its record need not be read."""
        cols, of = self.columns, self.table.of
        return [
            m
            for m in memory_ids
            if (slot := of.get(m)) is not None and cols.live[slot] and np.isfinite(cols.expires[slot])
        ]

    # -- inside -------------------------------------------------------------------------------------

    def _untag(self, slot: int) -> None:
        if not self._tags_built:
            return
        for tag in self._slot_tags.pop(slot, ()):
            self._tag_slots.get(tag, set()).discard(slot)

    def _tag(self, slot: int, tags: tuple[str, ...]) -> None:
        self._untag(slot)
        self._slot_tags[slot] = tags
        for tag in tags:
            self._tag_slots.setdefault(tag, set()).add(slot)

    def _learn_keys(self, records: list[MemoryRecord]) -> None:
        keys, groups = self._keys, self._groups
        first = not keys and groups is not None and not groups and self._encoded is None
        if self._unmade is None and (first or len(records) >= KEYS_BESIDE_FROM):
            # made later (see unmade_keys), laid over the keys as they are now
            self._below, self._keys, self._unmade, self._groups = keys, {}, records, None
            return
        for record in records:
            key = dedup_key(record.content)
            old = keys.get(record.id)
            if old == key:
                continue
            keys[record.id] = key
            if groups is not None:
                if old is not None:
                    groups.get(old, set()).discard(record.id)
                groups.setdefault(key, set()).add(record.id)

    def _forget_keys(self, memory_ids: Iterable[str]) -> None:
        keys, groups = self._keys, self._groups
        for memory_id in memory_ids:
            if self._encoded is not None or self._unmade is not None:
                keys[memory_id] = b""  # (a removal, replayed once the restored or made keys are in)
                continue
            old = keys.pop(memory_id, None)
            if old is not None and groups is not None:
                groups.get(old, set()).discard(memory_id)

    def unmade_keys(self) -> list[MemoryRecord] | None:
        """The records whose dedup keys are still to make, or ``None``: a load leaves them, so that a
        server's first answer does not wait for them (a tenth of a fresh clone's start), and so does a
        change of :data:`KEYS_BESIDE_FROM` memories or more (a merged branch: its next call does not
        wait for them); :func:`make_dedup_keys` makes them off the lock and :meth:`install_keys` takes
        them. Whatever needs them first (a duplicate lookup, a snapshot) makes them itself."""
        return self._unmade

    def install_keys(self, records: list[MemoryRecord], keys: dict[str, bytes]) -> None:
        """Take the dedup keys :func:`make_dedup_keys` made of ``records`` (from :meth:`unmade_keys`),
        unless they were made meanwhile: laid over the keys from before them, the changes since on top."""
        if self._unmade is records:
            self._install(keys)

    def _settle_keys(self) -> None:
        if self._unmade is not None:
            self._install(make_dedup_keys(self._unmade))
        elif self._encoded is not None:
            self._install({})

    def _install(self, made: dict[str, bytes]) -> None:
        """The keys, in layers from the bottom: those a restore kept encoded (decoded now), the changes
        before the unmade records, ``made`` (their keys), the changes since."""
        encoded, self._encoded = self._encoded, None
        below, self._below, self._unmade = self._below, {}, None
        keys: dict[str, bytes] = {}
        if encoded is not None:
            try:
                keys = msgspec.msgpack.decode(encoded, type=dict[str, bytes])
            except (msgspec.DecodeError, msgspec.ValidationError):
                self._rebuild_keys()
                return
        _lay(keys, below)
        keys.update(made)
        _lay(keys, self._keys)
        self._keys, self._groups = keys, None

    def _rebuild_keys(self) -> None:
        """Dedup keys made again from the records (saved ones were damaged or missing)."""
        cols, keys = self.columns, {}
        for memory_id, slot in self.table.of.items():
            if cols.live[slot] and (record := self._records(memory_id)) is not None:
                keys[memory_id] = dedup_key(record.content)
        self._keys, self._groups, self._encoded, self._unmade, self._below = keys, None, None, None, {}


def _lay(keys: dict[str, bytes], changes: dict[str, bytes]) -> None:
    """Put ``changes`` (a key, or ``b""`` for a memory gone) over ``keys``, in place."""
    for memory_id, key in changes.items():
        if key:
            keys[memory_id] = key
        else:
            keys.pop(memory_id, None)


def make_dedup_keys(records: list[MemoryRecord]) -> dict[str, bytes]:
    """Each record's dedup key, by memory id (see :meth:`ColumnsProjector.unmade_keys`)."""
    return dict(zip((r.id for r in records), map(dedup_key, (r.content for r in records)), strict=True))


def _epochs(times: list[str]) -> npt.NDArray[np.float64]:
    """Epoch seconds of ISO times (numpy's parse pays from a few dozen on: one by one below that)."""
    if len(times) > 32:
        return isos_to_epochs(times)
    return np.array([iso_to_epoch(t) for t in times], np.float64)


def _encode_keys(keys: dict[str, bytes]) -> bytes:
    return msgspec.msgpack.encode(keys)


def _ties_by_id(order: npt.NDArray[np.int64], saved: npt.NDArray[np.float64], ids: Sequence[str]) -> None:
    """Order each run of slots created at the same time (``saved``: the times, in order) by memory id,
    in place: a few runs, if any (memories saved or imported within one clock tick)."""
    tied = np.flatnonzero(saved[1:] == saved[:-1])
    if not len(tied):
        return
    starts = tied[np.concatenate(([True], tied[1:] != tied[:-1] + 1))].tolist()
    ends = (tied[np.concatenate((tied[1:] != tied[:-1] + 1, [True]))] + 2).tolist()
    for start, end in zip(starts, ends, strict=True):
        order[start:end] = sorted(order[start:end].tolist(), key=ids.__getitem__)
