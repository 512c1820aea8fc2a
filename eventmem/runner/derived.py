"""The derived state: what a snapshot holds and a rebuild makes, owned by one object.

A :class:`Derived` is the fold of the journal and everything made from it: the projections (the
slot table, the filter columns, the keyword and vector indexes), the cursors that say how far each
segment is folded and the digests they go on from, the corrupt lines found, and the changes not yet
pushed. Catch-up (:mod:`~eventmem.runner.cursors`), projection (:mod:`~eventmem.runner.projection`)
and snapshots (:mod:`~eventmem.runner.snapshots`) work on one; the runner (:class:`~eventmem.runner.runner.Store`)
holds the current one and swaps in a new one (a rebuild, a snapshot loaded) under its lock. Nothing
here takes a lock, writes a file or embeds a text.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import numpy as np

from eventmem.core.errors import JournalCorrupt
from eventmem.core.ids import iso_to_epoch
from eventmem.core.records import MemoryRecord, MemoryRecords
from eventmem.core.state import State
from eventmem.projectors.columns import ColumnsProjector, SlotTable
from eventmem.projectors.keywords import KeywordsProjector, Texts, keyword_texts
from eventmem.projectors.keywords_bulk import Row
from eventmem.projectors.vectors import EmbedItem, VectorsProjector
from eventmem.runner.slot_digests import SlotDigests
from eventmem.runner.tuning import Tuning

__all__ = ["Cursor", "Derived", "Extension", "ttl_float"]

Extension = Callable[[str, MemoryRecord], float]
"""Seconds added to a memory's TTL (by its accesses: see :meth:`Store.usage_extension`)."""


class Cursor(msgspec.Struct, kw_only=True):
    """How far one segment has been applied, and a digest of the bytes applied."""

    offset: int = 0
    digest: bytes = b""
    stat: tuple[int, int, int] = (0, 0, 0)
    """(size, mtime_ns, inode) when last looked at: unchanged means nothing to do."""


class Derived:
    """The fold, its projections and its cursors (see the module docstring); empty when made.

    ``submit`` takes the texts the vector projector wants embedded (the runner's embedding queue),
    ``backlog`` says whether it still has some to hand back; ``extension`` is the usage's extension of
    a TTL. ``tuning`` says where the projectors' bulk paths begin (fixed for the life of this object);
    ``keywords_folder``, where a restored keyword index keeps its database (see :class:`KeywordsProjector`)."""

    def __init__(
        self,
        dim: int,
        tuning: Tuning,
        submit: Callable[[list[EmbedItem]], None],
        extension: Extension,
        backlog: Callable[[], bool] = lambda: False,
        keywords_folder: Path | None = None,
    ) -> None:
        self.tuning = tuning
        self.extension = extension
        self.state = State()
        self.cursors: dict[str, Cursor] = {}
        self.hashers: dict[str, hashlib.blake2b] = {}
        """Per segment, the digest state at its cursor (a catch-up goes on from it)."""
        self.table = SlotTable()
        """Memory id <-> slot: the row of the filter columns, the keyword index and the vector index
        (the projectors hold it)."""
        self.slot_hashes = SlotDigests()
        """Per slot, the digest of the text indexed (see :func:`~eventmem.runner.projection.sync`):
        unchanged means no re-index."""
        self.columns = ColumnsProjector(self.table, self.visible)
        self.keywords = KeywordsProjector(
            self.table,
            bulk_from=tuning.bulk_keywords_min,
            postings_from=tuning.postings_from,
            backlog=backlog,
            rows_of=self.keyword_rows,
            folder=keywords_folder,
        )
        self.vectors = VectorsProjector(self.table, dim, submit, ann_from=tuning.ann_from, backlog=backlog)
        self.problems: dict[tuple[str, int], JournalCorrupt] = {}
        """The corrupt lines the fold skipped, by (segment, offset)."""
        self.events_since_snapshot = 0
        self.changed: set[str] = set()
        """Memories whose visible state changed since the runner's ``drain_changes`` (for push updates)."""
        self.changed_all = True
        self.encoded_state: tuple[State, int, bytes] | None = None
        """The fold encoded ahead of a snapshot, while the keyword index was being filled (see
        :func:`~eventmem.runner.snapshots.encoded_fold`)."""
        self.embeddings_end: int | None = None
        """Where the embedding cache ended when the snapshot this was loaded from was taken."""

    def backlog_done(self) -> None:
        """The embedding queue handed back every vector of a backlog: what waited for it starts (the
        approximate vector index, trained on them all; the in-memory keyword postings)."""
        self.vectors.backlog_done()
        self.keywords.backlog_done()

    def visible(self, memory_id: str) -> MemoryRecord | None:
        return self.state.visible(memory_id)

    def keyword_rows(self, slots: list[int]) -> Callable[[], list[Row]]:
        """What a thread calls for the keyword rows of ``slots`` as the fold holds them now (the keyword
        index holds no texts): the texts of decoded records are taken now (the fold changes records
        in place), encoded ones (bytes that never change) are decoded by the thread, not kept."""
        memories, ids = self.state.memories, self.table.ids
        encoded = memories if isinstance(memories, MemoryRecords) and memories.encoded else None
        held: list[Texts | tuple[str, msgspec.Raw]] = []
        for slot in slots:
            memory_id = ids[slot]
            value = encoded.held(memory_id) if encoded is not None else memories[memory_id]
            if value is None:
                raise KeyError(f"the fold holds no memory {memory_id} of keyword row {slot}")
            held.append((memory_id, value) if isinstance(value, msgspec.Raw) else keyword_texts(value))

        def rows() -> list[Row]:
            out: list[Row] = []
            for slot, value in zip(slots, held, strict=True):
                if len(value) == 2:  # (an encoded record, decoded here)
                    assert encoded is not None
                    out.append((slot, *keyword_texts(encoded.read(*value))))
                else:
                    out.append((slot, *value))
            return out

        return rows

    def expires_epoch(self, memory_id: str, record: MemoryRecord) -> float:
        """When a memory's TTL runs out (epoch seconds, the usage's extension included); inf without TTL."""
        if record.ttl_seconds is None:
            return math.inf
        base = iso_to_epoch(record.ttl_set_at) + ttl_float(record.ttl_seconds)
        return base + self.extension(memory_id, record)

    def refresh_expiries(self, memory_ids: Iterable[str]) -> None:
        """Recompute these memories' expiry column, after their usage changed."""
        expiries = []
        for memory_id in self.columns.expiring(memory_ids):
            record = self.state.visible(memory_id)
            if record is not None:
                expiries.append((memory_id, self.expires_epoch(memory_id, record)))
        if expiries:
            self.columns.expire_at(expiries)

    def hidden_memories(self) -> list[str]:
        """Memories the fold knows that are not live now (deleted, expired, or never saved): found
        from the live column, without looking at (or decoding) the live ones."""
        ids = self.table.ids
        hidden = [ids[slot] for slot in np.flatnonzero(~self.columns.visible()).tolist()]
        hidden += self.state.memories.keys() - self.table.of.keys()
        return hidden

    def wants_vector(self, slot: int) -> bool:
        """Whether a slot is live (its vector is still wanted)."""
        return slot < len(self.table) and bool(self.columns.visible()[slot])

    def snapshot_due(self, every_events: int) -> int:
        """Events to fold before the next snapshot: at least ``every_events`` (the setting), and a
        tenth of the journal, so that snapshot writes stay a small share of the work as memory grows."""
        if self.tuning.snapshot_every is not None:
            return self.tuning.snapshot_every
        return max(every_events, len(self.state.seen) // 10)

    def drain_changes(self) -> tuple[bool, set[str]]:
        """What changed since the last call: (everything?, memory ids)."""
        everything, changed = self.changed_all, self.changed
        self.changed_all, self.changed = False, set()
        return everything, changed


def ttl_float(seconds: int) -> float:
    """A TTL as a float; one too large for a float (a journal line may carry any integer) is infinite."""
    try:
        return float(seconds)
    except OverflowError:
        return math.inf if seconds > 0 else -math.inf
