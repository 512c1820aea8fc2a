"""The read view: the one way to read a runner's fold and indexes.

``with store.read() as view:`` holds the runner's lock for the block, so every answer of one view
comes from one state (one :class:`~eventmem.runner.derived.Derived`); callers never take the lock
themselves nor index the runner's arrays.
Positions (``int``) are the rows of the filter columns: a mask made by :meth:`ReadView.mask` and the
hits of the two searches speak them, and :meth:`ReadView.id_at` turns one into a memory id.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from eventmem.core.errors import JournalCorrupt
from eventmem.core.events import SCOPES
from eventmem.core.records import LinkRecord, MemoryRecord, RecordHead
from eventmem.core.state import State
from eventmem.journal.usage import UsageLog
from eventmem.runner.derived import Derived
from eventmem.runner.embedding import EmbeddingQueue

__all__ = ["Mask", "ReadView"]

Mask = npt.NDArray[np.bool_]
"""A boolean array over positions (see the module docstring)."""


class ReadView:
    """What one runner knows, read under its lock (see :meth:`Store.read`): its derived state, its
    embedding queue (for the query's vector and the vectors' status) and its usage counts."""

    def __init__(
        self, derived: Derived, embedding: EmbeddingQueue, usage: UsageLog, vector_status: Callable[[], str]
    ) -> None:
        self._derived = derived
        self._embedding = embedding
        self._usage = usage
        self._vector_status = vector_status

    # -- the fold -------------------------------------------------------------------------------

    @property
    def fold(self) -> State:
        """The folded state itself, for pure functions over a :class:`State` (not to be changed)."""
        return self._derived.state

    def record(self, memory_id: str) -> MemoryRecord | None:
        """The folded record of a memory, live or not; ``None`` if the journal never named it."""
        record: MemoryRecord | None = self._derived.state.memories.get(memory_id)
        return record

    def contents_at(self, positions: list[int], chars: int) -> list[str]:
        """The first ``chars`` characters of the content of the memories at ``positions``."""
        ids, memories = self._derived.table.ids, self._derived.state.memories
        return [record.content[:chars] if (record := memories.get(ids[p])) is not None else "" for p in positions]

    def visible(self, memory_id: str) -> MemoryRecord | None:
        """The record of a memory that was saved and is not deleted or expired by an event."""
        return self._derived.state.visible(memory_id)

    def visible_unkept(self, memory_id: str) -> MemoryRecord | None:
        """:meth:`visible`, for a read of many memories: not kept decoded (see :meth:`State.visible_unkept`)."""
        return self._derived.state.visible_unkept(memory_id)

    def visible_head(self, memory_id: str) -> MemoryRecord | RecordHead | None:
        """:meth:`visible_unkept`, of the record's id, type, title and creation alone (see
        :meth:`State.visible_head`)."""
        return self._derived.state.visible_head(memory_id)

    def memories(self) -> Mapping[str, MemoryRecord]:
        """Every memory the fold knows, by id (decoded on access after a snapshot load)."""
        return self._derived.state.memories

    def head_of(self, memory_id: str) -> str:
        """The id of the latest event about a memory: the ``prev`` of the next one written."""
        return self._derived.state.head_of(memory_id)

    def link_head_of(self, link_id: str) -> str:
        """The id of the latest event about a link: the ``prev`` of the next one written."""
        return self._derived.state.link_head_of(link_id)

    def link(self, link_id: str) -> LinkRecord | None:
        link: LinkRecord | None = self._derived.state.links.get(link_id)
        return link

    def links_of(self, memory_id: str) -> list[LinkRecord]:
        """The live links that have this memory at one end."""
        return self._derived.state.links_of(memory_id)

    def link_ids_of(self, memory_id: str) -> set[str]:
        """Every link (removed ones too) that ever had this memory at one end."""
        return set(self._derived.state.adjacency.get(memory_id, ()))

    def unknown_event_types(self) -> dict[str, int]:
        return dict(self._derived.state.unknown)

    def problems(self) -> list[JournalCorrupt]:
        """The corrupt lines the fold skipped (those a loaded snapshot covers too), in the order found."""
        return list(self._derived.problems.values())

    # -- derived per memory -----------------------------------------------------------------------

    def expires_at(self, record: MemoryRecord) -> float:
        """When a memory's TTL runs out (epoch seconds, usage extension included); inf without TTL."""
        return self._derived.expires_epoch(record.id, record)

    def alive(self, memory_id: str, now: float) -> bool:
        """Visible and not past its TTL at ``now``."""
        record = self._derived.state.visible(memory_id)
        return record is not None and self._derived.expires_epoch(memory_id, record) > now

    def superseded(self, memory_id: str) -> bool:
        """A live memory supersedes it (from the filter columns)."""
        derived = self._derived
        slot = derived.table.get(memory_id)
        return bool(slot is not None and derived.columns.columns.superseded[slot])

    def access_count(self, memory_id: str) -> int:
        """Accesses recorded in this clone's usage stream."""
        return self._usage.count(memory_id)

    def duplicates(self, text: str) -> list[str]:
        """Visible memories whose content normalises to the same text as ``text``."""
        return self._derived.columns.duplicates(text)

    def hidden(self) -> list[str]:
        """Memories the fold knows that are not visible (deleted, expired, or never saved)."""
        return self._derived.hidden_memories()

    # -- filtering --------------------------------------------------------------------------------

    def size(self) -> int:
        """The number of positions (the length of every mask)."""
        return len(self._derived.table)

    def id_at(self, position: int) -> str:
        return self._derived.table.ids[position]

    def ids(self, mask: Mask) -> list[str]:
        """The memory ids of the positions set in ``mask``, in position order (the fold's)."""
        slot_ids = self._derived.table.ids
        return [slot_ids[slot] for slot in np.flatnonzero(mask).tolist()]

    def position_of(self, memory_id: str) -> int | None:
        return self._derived.table.get(memory_id)

    def positions(self) -> Sequence[str]:
        """The memory id at every position, in order (not to be changed)."""
        return self._derived.table.ids

    def returnable(self, memory_id: str, now: float, *, superseded: bool = False) -> bool:
        """Visible, not past its expiry at ``now``, and (unless ``superseded``) not superseded."""
        derived = self._derived
        slot = derived.table.get(memory_id)
        if slot is None:
            return False
        cols = derived.columns.columns
        return bool(cols.live[slot] and cols.expires[slot] > now and (superseded or not cols.superseded[slot]))

    def mask(
        self,
        *,
        now: float | None = None,
        include_superseded: bool = False,
        kinds: Iterable[str] = (),
        scope: str | None = None,
        tags: Iterable[str] = (),
        min_importance: float | None = None,
        max_importance: float | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        updated_after: float | None = None,
        updated_before: float | None = None,
    ) -> Mask:
        """Positions that may be returned: visible, not past their TTL at ``now``, not superseded
        (unless ``include_superseded``), and passing every filter given (times in epoch seconds)."""
        derived = self._derived
        n = len(derived.table)
        cols = derived.columns.columns
        now = time.time() if now is None else now
        mask = derived.columns.returnable(now, include_superseded=include_superseded)
        kinds = tuple(kinds)
        if kinds:
            mask &= derived.columns.of_kinds(kinds)
        if scope in SCOPES:
            mask &= cols.scope[:n] == SCOPES.index(scope)
        if min_importance is not None:
            mask &= cols.importance[:n] >= min_importance
        if created_after is not None:
            mask &= cols.created[:n] >= created_after
        if created_before is not None:
            mask &= cols.created[:n] < created_before
        if max_importance is not None:
            mask &= cols.importance[:n] <= max_importance
        if updated_after is not None:
            mask &= cols.updated[:n] >= updated_after
        if updated_before is not None:
            mask &= cols.updated[:n] < updated_before
        for tag in tags:
            tagged = np.zeros(n, bool)
            slots = derived.columns.tagged(tag)
            if slots:
                tagged[np.fromiter(slots, np.int64, len(slots))] = True
            mask &= tagged
        return mask

    def of_kinds(self, kinds: Iterable[str], ids: Iterable[str] = ()) -> Mask:
        """Positions of the memories of these types, and of those named in ``ids`` (any state)."""
        derived = self._derived
        wanted = derived.columns.of_kinds(kinds)
        for memory_id in ids:
            slot = derived.table.get(memory_id)
            if slot is not None:
                wanted[slot] = True
        return wanted

    def due_for_expiry(self, now: float) -> list[str]:
        """Visible memories whose expiry column says their TTL ran out at ``now`` (a cheap pre-check)."""
        derived = self._derived
        n = len(derived.table)
        cols = derived.columns.columns
        return self.ids(cols.live[:n] & (cols.expires[:n] <= now))

    def importance_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self._derived.columns.columns.importance[positions].astype(np.float64)

    def created_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Creation (epoch seconds) of the memories at ``positions``."""
        return self._derived.columns.columns.created[positions].astype(np.float64)

    def saved_beside(
        self, positions: Sequence[int], among: Mask, steps: int, seconds: float
    ) -> list[tuple[int, int, int]]:
        """``(neighbour, lender, step)``: for each of ``positions`` (the lenders), the ``steps``
        positions ``among`` allows of the memories created just before it and the ``steps`` just
        after it, in creation time then id (``step`` 1 the closest), at most ``seconds`` apart. Read
        from the positions kept in that order (see :meth:`ColumnsProjector.creation_order`): one
        binary search finds a lender, and its neighbours are read outwards from it, one by one
        (numpy's calls cost more than they do); a sitting where more than a few memories are not
        allowed is read with numpy."""
        if not len(positions) or steps <= 0:
            return []
        columns = self._derived.columns
        order, saved = columns.creation_order(len(among))
        # (memoryviews: an item read from one is a Python float, int or bool, without numpy's call)
        created, times = cast("Sequence[float]", columns.columns.created.data), cast("Sequence[float]", saved.data)
        in_order, allowed = cast("Sequence[int]", order.data), cast("Sequence[bool]", among.data)
        last = len(times) - 1
        out: list[tuple[int, int, int]] = []
        for lender in positions:
            at = created[lender]
            here = bisect.bisect_left(times, at)
            while here <= last and in_order[here] != lender:  # (memories created at the same time: in id order)
                here += 1
            if here > last:
                continue
            found: list[tuple[int, int, int]] = []
            for way, edge in ((-1, at - seconds), (1, at + seconds)):
                step, place, read = 0, here + way, 0
                while (
                    step < steps and 0 <= place <= last and (times[place] >= edge if way < 0 else times[place] <= edge)
                ):
                    read += 1
                    if read > _FEW:
                        break
                    slot = in_order[place]
                    if allowed[slot]:
                        step += 1
                        found.append((slot, lender, step))
                    place += way
                else:
                    continue
                found = _beside_with_numpy(lender, here, order, saved, among, steps, seconds)
                break
            out += found
        return out

    def updated_at(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Last update (epoch seconds) of the memories at ``positions``."""
        return self._derived.columns.columns.updated[positions]

    # -- the keyword index --------------------------------------------------------------------------

    def keyword_search(
        self, text: str, limit: int, among: Mask | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (position, BM25 score) among ``among``; higher is better. Safe to run from
        another thread while the view is open (the keyword index takes no lock)."""
        return self._derived.keywords.search_slots(text, limit, among, beside_vectors=beside_vectors)

    def keyword_holds(self, word: str) -> bool:
        """Whether any memory holds ``word`` (or a form of its stem)."""
        return self._derived.keywords.holds(word)

    def keyword_count(self) -> int:
        return len(self._derived.keywords)

    def keyword_indexed(self, memory_id: str) -> bool:
        """Whether the memory's text is in the keyword index."""
        return self._derived.keywords.indexed(memory_id)

    # -- the vector index -----------------------------------------------------------------------------

    def vector_count(self) -> int:
        return len(self._derived.vectors)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._embedding.embed_query(text)

    def vector_search(
        self, vector: npt.NDArray[np.float32], limit: int, among: Mask | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Top ``limit`` positions by cosine among ``among`` (filtered before the cut), with the cosines."""
        return self._derived.vectors.search_slots(vector, limit, among)

    def vector_similarities(self, positions: list[int], vector: npt.NDArray[np.float32]) -> dict[int, float]:
        """The cosine of ``vector`` with each of ``positions`` that has a vector."""
        return self._derived.vectors.similarities(positions, vector)

    def vector_of(self, memory_id: str) -> npt.NDArray[np.float32] | None:
        return self._derived.vectors.vector_of(memory_id)

    def vector_status(self) -> str:
        """``ready``, ``loading``, ``embedding`` or ``unavailable`` (see :meth:`Store.vector_status`)."""
        return self._vector_status()

    def vector_note(self) -> str:
        return self._embedding.note(self._vector_status())

    @property
    def embedder_id(self) -> str:
        return self._embedding.embedder.model_id


_FEW = 32
"""Memories read one by one on each side of a lender before its sitting is read with numpy
(:meth:`ReadView.saved_beside`: a long sitting most of which the query's filters leave out)."""


def _beside_with_numpy(
    lender: int,
    here: int,
    order: npt.NDArray[np.int64],
    saved: npt.NDArray[np.float64],
    among: Mask,
    steps: int,
    seconds: float,
) -> list[tuple[int, int, int]]:
    """:meth:`ReadView.saved_beside` for one lender at ``here`` in ``order`` (the slots in creation
    time then id; ``saved`` their times), its sitting read with numpy."""
    at = float(saved[here])
    first = int(np.searchsorted(saved, at - seconds, side="left"))
    end = int(np.searchsorted(saved, at + seconds, side="right"))
    before, after = order[first:here], order[here + 1 : end]
    earlier = before[among[before]][::-1][:steps].tolist()
    later = after[among[after]][:steps].tolist()
    return [(slot, lender, step) for side in (earlier, later) for step, slot in enumerate(side, 1)]
