"""The vector projector: FAISS ``IndexIDMap2`` over a flat float16 index, keyed by each memory's slot.

Vectors are unit length, so inner product is cosine similarity. ``IndexIDMap2`` keeps ids stable
through deletes (a bare flat index renumbers on removal). The scan is exhaustive over float16
codes (``IndexScalarQuantizer`` with ``QT_fp16``): at 100k memories a query streams 77 MB and takes
about 3 ms on one core, half of float32, with the same top 10 on the retrieval benchmarks.

From ``ann_from`` vectors on (``Tuning.ann_from``, environment ``EVENTMEM_ANN_FROM``), a search takes
its candidates from an approximate index (:mod:`eventmem.projectors.ann`: what it guarantees, and
what was measured) and re-ranks them with these exact codes (float32 first, exactly those in reach of
the top ``k``); a filter that allows fewer than two fifths of ``ann_from`` memories (20k by default:
where the exact scan of the allowed slots becomes the faster one, measured at 100k) is answered by
that scan, so a selective filter never loses recall.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from eventmem.core.records import MemoryRecord
from eventmem.embedders.embedcache import content_hash
from eventmem.projectors.ann import DEFAULT_ANN_FROM, ApproximateIndex, candidate_count, in_slot_order
from eventmem.projectors.base import Batch, Projected, SegmentPosition
from eventmem.projectors.columns import SlotTable
from eventmem.projectors.float16_rows import StoredRows

logging.getLogger("faiss.loader").setLevel(logging.WARNING)
import faiss  # noqa: E402  (the loader logs at INFO on import)

__all__ = ["EmbedItem", "VectorIndex", "VectorsProjector", "embed_text"]

faiss.omp_set_num_threads(1)  # one eventmem server per AI client: threads would only contend

Slots = npt.NDArray[np.int64]
EmbedItem = tuple[int, str, bytes]
"""(slot, text to embed, the text's content hash)"""


def embed_text(record: MemoryRecord) -> str:
    """The text a memory's vector is made from."""
    parts = [record.title, record.content]
    if record.tags:
        parts.append(" ".join(record.tags))
    return "\n".join(p for p in parts if p)


class VectorIndex:
    def __init__(self, dim: int, ann_from: int = DEFAULT_ANN_FROM) -> None:
        self.dim = dim
        # exact scan over float16 codes: half the memory and time of float32, same top-k in practice
        flat = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        self._index: Any = faiss.IndexIDMap2(flat)
        self._present = np.zeros(0, bool)
        """Slots in the index. ``IndexIDMap2.remove_ids`` rebuilds its whole id map, O(n), even when
        none of the ids is there: only slots that are present are removed (a new memory's never is)."""
        self._mapped = False
        """The codes are a read-only view of a file (see :meth:`load`): copied before any change."""
        self._owning = threading.Lock()
        self._path: Path | None = None
        self._approx = ApproximateIndex(dim, ann_from)
        """Candidates for a search above ``ann_from`` vectors (see :mod:`eventmem.projectors.ann`)."""
        self._stored: StoredRows | None = None
        """The codes read in place by slot, until the index changes."""

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def _mark(self, slots: Slots, value: bool) -> None:
        top = int(np.max(slots)) if len(slots) else -1
        if top >= len(self._present):
            grown = np.zeros(max(top + 1, 2 * len(self._present)), np.bool_)
            grown[: len(self._present)] = self._present
            self._present = grown
        self._present[slots] = value

    def _in_index(self, slots: Slots) -> Slots:
        known = slots[slots < len(self._present)]
        return known[self._present[known]]

    def upsert(self, slots: Slots, vectors: npt.NDArray[np.float32], *, settled: bool = True) -> None:
        """Put these vectors in (replacing the slots' earlier ones). ``settled``: no other vectors are
        on their way (see :meth:`refresh`)."""
        if len(slots) == 0:
            return
        self.own()
        self._stored = None
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        present = self._in_index(slots)
        if len(present):
            self._index.remove_ids(present)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._index.add_with_ids(vectors, slots)
        self._mark(slots, True)
        self._approx.changed(slots, self._index.reconstruct_batch(slots))  # (as the exact codes hold them)
        if settled:
            self.refresh()

    def remove(self, slots: Slots, *, settled: bool = True) -> None:
        if len(slots):
            self.own()
            self._stored = None
            slots = np.ascontiguousarray(slots, dtype=np.int64)
            present = self._in_index(slots)
            if len(present):
                self._index.remove_ids(present)
                self._approx.removed(present)
            self._mark(slots, False)
            if settled:
                self.refresh()

    # -- the approximate index --------------------------------------------------------------------

    def approximate_from(self, ann_from: int, stored: bytes | memoryview | None = None) -> None:
        """Search through an approximate index from ``ann_from`` vectors on: the one ``stored`` holds
        (:meth:`approximate_stored`, of these very vectors), else a build, started now if due."""
        if ann_from != self._approx.start_from:
            self._approx = ApproximateIndex(self.dim, ann_from)
        if stored and len(self) >= ann_from:
            self._approx.install(stored, np.flatnonzero(self._present))
        self.refresh()

    def approximate_stored(self) -> bytes | None:
        """The approximate index in a form to keep beside this index's codes (``None``: none ready)."""
        return self._approx.stored()

    @property
    def approximate_unkept(self) -> bool:
        """An approximate index was built since a snapshot last kept one."""
        return self._approx.unkept

    def refresh(self) -> None:
        """Start a build of the approximate index if one is due, from every vector in slot order: read
        by the build's thread from a mapped index (which never changes: a change replaces it, see
        :meth:`own`), copied now from one in memory. A change made while more vectors are on their
        way (a backlog being embedded batch by batch) leaves it to the call once they are all in: a
        build over part of them would train the codes on that part, and be made again after."""
        if self._approx.due(len(self)):
            source = self._index
            if self._mapped:
                self._approx.build(lambda: in_slot_order(source, self.dim))
            else:
                copied = in_slot_order(source, self.dim)
                self._approx.build(lambda: copied)

    @property
    def approximate(self) -> bool:
        """Searches go through the approximate index (it is built and the index is above its threshold)."""
        return self._approx.ready

    def settle(self, timeout: float | None = None) -> bool:
        """Wait for a build of the approximate index in progress; true if none is left running."""
        return self._approx.wait(timeout)

    def _rerank(
        self, found: tuple[Slots, float], query: npt.NDArray[np.float32], k: int
    ) -> tuple[Slots, npt.NDArray[np.float32]]:
        """The top ``k`` of the candidates by their exact scores (ties: the lower slot first), scored
        exactly only where a float32 score leaves them in reach of it (``found``: the candidates and a
        bound on their vectors' norms)."""
        candidates, largest_norm = found
        present = self._in_index(candidates)
        if not len(present):
            return np.empty(0, np.int64), np.empty(0, np.float32)
        present = self._stored_rows().contenders(present, query, k, largest_norm)
        # in float64: a row's score does not depend on where it sits in the batch (float32 BLAS blocks differ)
        scores = self._scores(present, query.reshape(-1).astype(np.float64)).astype(np.float32)
        if len(scores) > k:  # only those at or above the k-th score can be in the top k, ties included
            keep = np.flatnonzero(scores >= np.partition(scores, len(scores) - k)[len(scores) - k])
            if len(keep) >= k:  # (fewer only if a score is not a number: then all are sorted)
                present, scores = present[keep], scores[keep]
        order = np.lexsort((present, -scores))[:k]
        return present[order], scores[order]

    def vector(self, slot: int) -> npt.NDArray[np.float32] | None:
        if not (0 <= slot < len(self._present) and self._present[slot]):
            return None  # (asking faiss for a missing id raises, which costs far more)
        try:
            return np.asarray(self._index.reconstruct(int(slot)), dtype=np.float32)
        except RuntimeError:
            return None

    def similarities(self, slots: list[int], query: npt.NDArray[np.float32]) -> dict[int, float]:
        """Inner product of ``query`` with the vectors of those ``slots`` that are in the index
        (one call into FAISS for all of them)."""
        held = cast("Sequence[bool]", self._present.data)  # (an item of a memoryview: a bool, without numpy's call)
        present = [slot for slot in slots if 0 <= slot < len(held) and held[slot]]
        if not present:
            return {}
        scores = self._stored_rows().query_scores(np.array(present, np.int64), query)
        return dict(zip(present, scores.astype(np.float32).tolist(), strict=True))

    def _scores(self, slots: Slots, query: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The inner products of these slots' vectors (each in the index) with ``query``, in float64,
        read from the codes in place."""
        return self._stored_rows().scores(slots, query)

    def _stored_rows(self) -> StoredRows:
        stored = self._stored
        if stored is None or stored.index is not self._index:  # (changed, or copied into memory by own())
            stored = self._stored = StoredRows(self._index, self.dim)
        return stored

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: npt.NDArray[np.bool_] | None = None,
        *,
        how: Literal["auto", "exact", "approximate"] = "auto",
        candidates: int | None = None,
    ) -> tuple[Slots, npt.NDArray[np.float32]]:
        """Top ``k`` slots by cosine among ``allowed`` (a mask indexed by slot; ``None`` = all).

        The filter applies before the cut: the answer is the true top ``k`` of the allowed set (of
        the candidates, on the approximate path). ``how``: the path by the size rules, or one forced
        (``approximate`` where the approximate index is built; the benchmarks compare the two).
        ``candidates``: how many approximate candidates to re-rank (default :func:`candidate_count`;
        the benchmarks compare widths)."""
        total = len(self)
        if total == 0 or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        approximate = how != "exact" and self._approx.ready
        wanted = candidate_count(k) if candidates is None else max(candidates, k)
        if allowed is None:
            found = self._approx.search(q, wanted) if approximate else None
            if found is not None and len(found[0]) >= min(k, total):  # (a query of ties can leave the scan short)
                return self._rerank(found, q, k)
            scores, ids = self._index.search(q, min(k, total))
            keep = ids[0] >= 0
            return ids[0][keep], scores[0][keep]
        count = int(np.count_nonzero(allowed))
        if count == 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if approximate and (how == "approximate" or count >= self._approx.start_from * 2 // 5):
            found = self._approx.search(q, wanted, allowed, count)
            if found is not None and len(found[0]) >= min(k, count):
                return self._rerank(found, q, k)
        fraction = count / max(total, 1)
        if fraction > 0.25:
            # most memories pass: search wider without a selector, then filter
            wide = min(total, math.ceil(k / fraction) * 2 + 16)
            scores, ids = self._index.search(q, wide)
            found, sc = ids[0], scores[0]
            ok = (found >= 0) & (found < len(allowed))
            ok[ok] = allowed[found[ok]]
            if ok.sum() >= min(k, count) or wide >= total:
                return found[ok][:k], sc[ok][:k]
        bitmap = np.packbits(allowed.astype(np.uint8), bitorder="little")
        selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
        params: Any = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        scores, ids = self._index.search(q, min(k, count), params=params)
        keep = ids[0] >= 0
        return ids[0][keep], scores[0][keep]

    def serialize(self) -> bytes:
        return bytes(faiss.serialize_index(self._index))

    def copy(self) -> VectorIndex:
        """An independent copy held in memory (a memory copy of the codes: a fraction of
        :meth:`serialize`'s time), to be written by another thread while this one changes."""
        copy = VectorIndex(self.dim)
        copy._index = faiss.clone_index(self._index)
        copy._present = self._present.copy()
        return copy

    def write(self, path: Path) -> None:
        """Write the index to ``path`` (for :meth:`load`)."""
        faiss.write_index(self._index, str(path))

    @classmethod
    def load(cls, path: Path, dim: int, *, mapped: bool = True) -> VectorIndex:
        """Open an index written by :meth:`write`. ``mapped``: without reading it; the codes stay in
        the file, mapped read-only (FAISS's ``IO_FLAG_MMAP_IFC``), so a cold start does not copy
        them, and the first change, or :meth:`own` from a background thread before that, reads
        them into memory."""
        index = cls(dim)
        loaded: Any = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if mapped else 0)
        if loaded.d != dim:
            raise ValueError(f"vector index {path.name} has dimension {loaded.d}, expected {dim}")
        index._index = loaded
        index._mapped = mapped
        index._path = path
        index._mark(faiss.vector_to_array(loaded.id_map).astype(np.int64), True)
        return index

    @property
    def mapped(self) -> bool:
        return self._mapped

    def own(self) -> None:
        """Copy mapped codes into memory (a mapped index cannot change). Searches go on meanwhile:
        the copy replaces the mapped index in one assignment."""
        if not self._mapped:
            return
        with self._owning:
            if self._mapped:
                owned: Any
                try:  # reading the file again is the cheapest copy
                    owned = faiss.read_index(str(self._path))
                    if owned.ntotal != self._index.ntotal:
                        raise RuntimeError("replaced meanwhile")
                except RuntimeError:
                    owned = faiss.deserialize_index(faiss.serialize_index(self._index))
                self._index = owned
                self._mapped = False
                self._stored = None  # (it holds the mapped index: the file's pages would stay until the next search)

    @classmethod
    def deserialize(cls, data: bytes | memoryview, dim: int) -> VectorIndex:
        index = cls(dim)
        loaded: Any = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        if loaded.d != dim:
            raise ValueError(f"vector snapshot has dimension {loaded.d}, expected {dim}")
        index._index = loaded
        index._mark(faiss.vector_to_array(loaded.id_map).astype(np.int64), True)
        return index


class VectorsProjector:
    """The vector index over a :class:`SlotTable`: a memory's id in FAISS is its slot.

    A batch's texts go to ``embed`` as :data:`EmbedItem` lists: the runner's embedding queue, which
    embeds them now or in the background (a slow model), and hands the vectors back to :meth:`put`.
    The runner gives it the memories whose text changed."""

    name = "vectors"
    version = 1

    def __init__(
        self,
        table: SlotTable,
        dim: int,
        embed: Callable[[list[EmbedItem]], None],
        *,
        ann_from: int = DEFAULT_ANN_FROM,
        backlog: Callable[[], bool] = lambda: False,
    ) -> None:
        self.table = table
        self.dim = dim
        self._embed = embed
        self._backlog = backlog
        """Whether more vectors are on their way from ``embed`` (the approximate index waits for them:
        see :meth:`VectorIndex.refresh`)."""
        self.ann_from = ann_from
        """Vectors from which searches go through the approximate index (see :mod:`eventmem.projectors.ann`)."""
        self.index = VectorIndex(dim, ann_from)

    def items(self, upserts: Iterable[Projected]) -> list[EmbedItem]:
        """What to embed for these memories."""
        of = self.table.of
        out: list[EmbedItem] = []
        for projected in upserts:
            text = embed_text(projected.record)
            out.append((of[projected.record.id], text, content_hash(text)))
        return out

    def apply(self, batch: Batch) -> None:
        if batch.removals:
            get = self.table.get
            self.remove([slot for memory_id in batch.removals if (slot := get(memory_id)) is not None])
        if batch.upserts:
            self.embed(self.items(batch.upserts))

    def load(self, batch: Batch) -> None:
        self.reset()
        self.apply(batch)

    def embed(self, items: list[EmbedItem]) -> None:
        """Have these texts embedded (the runner computes them with its own hashes in one pass)."""
        if items:
            self._embed(items)

    def put(self, slots: Slots, vectors: npt.NDArray[np.float32]) -> None:
        """Vectors made for these slots (by the embedding queue)."""
        self.index.upsert(slots, vectors, settled=not self._backlog())

    def backlog_done(self) -> None:
        """Every vector asked for is in (a backlog embedded): the approximate index is built if due."""
        self.index.refresh()

    def remove(self, slots: list[int]) -> None:
        if slots:
            self.index.remove(np.asarray(slots, np.int64), settled=not self._backlog())

    def adopt(self, index: VectorIndex, approximate: bytes | memoryview | None = None) -> None:
        """Take an index read from the runner's snapshot file (see :meth:`VectorIndex.load`), and the
        approximate index kept beside it."""
        self.index = index
        index.approximate_from(self.ann_from, approximate)

    @property
    def mapped(self) -> bool:
        """The index is a read-only map of the snapshot's file (see :meth:`VectorIndex.load`)."""
        return self.index.mapped

    @property
    def approximate_unkept(self) -> bool:
        return self.index.approximate_unkept

    def position(self) -> dict[str, SegmentPosition] | None:
        return None  # (the runner keeps the cursors of in-process projections)

    def snapshot(self) -> bytes:
        return self.index.serialize()

    def restore(self, data: bytes | memoryview | None) -> bool:
        self.reset()
        if data is None:
            return False
        try:
            self.index = VectorIndex.deserialize(data, self.dim)
        except (RuntimeError, ValueError):
            return False
        self.index.approximate_from(self.ann_from)
        return True

    def reset(self) -> None:
        self.index = VectorIndex(self.dim, self.ann_from)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait for a build of the approximate index in progress (see :meth:`VectorIndex.settle`)."""
        return self.index.settle(timeout)

    def close(self) -> None:
        pass

    # -- queries ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.index)

    def search_slots(
        self, vector: npt.NDArray[np.float32], limit: int, among: npt.NDArray[np.bool_] | None = None
    ) -> tuple[Slots, npt.NDArray[np.float32]]:
        """Top ``limit`` slots by cosine among the slots set in ``among`` (filtered before the cut)."""
        return self.index.search(vector, limit, among)

    def search(
        self, vector: npt.NDArray[np.float32], limit: int, among: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, cosine) among the memories ``among`` (all when ``None``)."""
        mask = None
        if among is not None:
            mask = np.zeros(len(self.table), bool)
            mask[[slot for memory_id in among if (slot := self.table.get(memory_id)) is not None]] = True
        ids = self.table.ids
        found, scores = self.search_slots(vector, limit, mask)
        return [(ids[slot], score) for slot, score in zip(found.tolist(), scores.tolist(), strict=True)]

    def similarities(self, slots: list[int], vector: npt.NDArray[np.float32]) -> dict[int, float]:
        return self.index.similarities(slots, vector)

    def vector_of(self, memory_id: str) -> npt.NDArray[np.float32] | None:
        slot = self.table.get(memory_id)
        return None if slot is None else self.index.vector(slot)
