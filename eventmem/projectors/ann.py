"""Approximate candidates for the vector index above a size: 4-bit product-quantized codes scanned whole.

Above ``ann_from`` live vectors, :class:`~eventmem.projectors.vectors.VectorIndex` asks this index for
a candidate set (``max(10k, 400)``: 500 for the service's top 50; wider under a filter) and re-ranks
the candidates with its exact float16 codes, so every score returned is the exact cosine: FAISS's SIMD
scan scores them in float32 first, and only those within twice float32's rounding bound of the
``k``-th are scored exactly (:meth:`StoredRows.contenders`: about ``k`` of them, and the answer is the
one of scoring all). The codes are FAISS fast-scan product quantization (``IndexPQFastScan``, two
dimensions per sub-quantizer, 16 centroids each: 96 bytes a vector at 384 dimensions), scanned
exhaustively with SIMD lookup tables. Graph and inverted-list indexes were measured first on the
benchmark corpus (100k memories, short queries): HNSW reached a recall@10 of 0.87 at ``efSearch`` 256
and IVF 0.93 probing a quarter of 256 lists; a query's vector is unlike the memories' (a few words
against a paragraph) and such indexes lose its neighbours. An exhaustive scan of coarse codes has no
such blind spot. ``tools/bench_vectors.py`` at 100k (2 cores, shared): recall@10 against exact 0.991
on the evaluations' 676 questions among synthetic notes, 0.998 on random unit vectors, 0.999 near
stored ones, 0.994-1.0 under filters; recall@50 (the service's fusion depth) 0.973-0.979. A top 50
takes 0.62-0.67 ms (0.76-0.79 ms with every candidate scored exactly, in the same session), a tenth of
the exact scan's; the fast scan is 0.40 ms of it, the re-rank 0.1 ms. Codes cost 96 bytes a vector (10
MB at 100k) and a build 2-4 s of one core, in the background.

On real text (``tools/bench_vectors.py --locomo PATH --embedders hashing,onnx:minilm``, 2026-12-02,
load 4-6 on 2 cores; ``docs/bench/vectors-real-text-2026-12.json``): the shipped evaluations' and a
LoCoMo conversation set's memories among synthetic notes to 100k (built-in embedder), recall@10
against exact with 400 candidates 0.986 (evaluation), 0.992 (hard evaluation), 0.998 (LoCoMo), and
0.987-1.0 under a type or tag filter; the first ten of a top 50 0.989-0.998 with 500. Recall@50
with 500 is 0.960, 0.973 and 0.991; 1,000 would make it 0.986, 0.990, 0.997 (0.995-0.999 under a
filter passing 37%), for 1.19-1.28x the approximate path's p50 in the same run (1.20 -> 1.54 ms,
0.70 -> 0.88 ms; 750 reached 0.977 on the evaluation for 1.12x): not taken, as the recall@10 asked
for holds with the default and the stdio retrieve at 100k has no time to spare. With MiniLM
(``onnx:minilm``) at 30k memories (the approximate path forced; the model embeds 5-70 texts a
second here, so no larger), the real sets' figures are 0.9994-1.0 with either setting; each set
alone (345 to 2,400 memories) 0.9994-1.0 with either embedder, the misses being duplicate memories
whose tie the two paths break differently. Random unit vectors among random ones: recall@50 0.977
-> 0.997 (retrieval corpus 0.972 -> 0.990). Random unit queries into a text corpus, which no text
embeds to, are the one case below: at 100k (built-in) recall@10 0.952 with 400 (0.987 with 1,200)
and recall@50 0.962 with 1,000 (0.977 with 1,500); with MiniLM at 30k 0.994, and 0.978 -> 0.995.

The scan streams its codes at about 25 GB/s, so its time follows their size (0.21 ms at 48 bytes a
vector, 0.35 ms at 96, top 10 at 100k). Tried for smaller codes, each the share of the exact top 10
and top 50 among ``N`` candidates at 100k (retrieval corpus; random vectors): a random rotation before
the codes helps the corpus only (96 bytes: 0.999 and 0.995 with 500 candidates, 0.997 and 0.971 with
200; random 0.998 and 0.977 with 500, as without it); with it, 64 bytes keep the corpus (0.994 and
0.978 with 766) but not random vectors (0.974 and 0.898 with 766, 0.997 and 0.978 only with 2000,
whose collection and re-rank cost more than the bytes saved), 48 bytes need 2000 candidates on the
corpus and lose random vectors (0.98 with 3000). A learned rotation (OPQ, 48 bytes) trains for 340 s
and keeps less (0.978 and 0.946 with 500). 1-bit RaBitQ fast scan: 0.7-0.9 ms, random 0.95 with
2000. IVF over rotated codes: 0.955 probing half of 256 lists, whatever the candidates. Larger
fast-scan blocks (64, 128) and the other scan implementations: no faster. A coarse scan first that
falls back to the full one when the ``k``-th exact score is within four standard deviations of the
codes' error from the last candidate's estimate answers 87% of the corpus's top 50 from 64 bytes but
scans twice for every random query.

Determinism: the codebooks are trained in one thread with FAISS's fixed seed on every ``n/20000``-th
vector in slot order, and a vector's code depends only on the codebooks. Vectors saved after training
are encoded and appended; removed or replaced ones are masked (their position is no longer the
slot's). The index is rebuilt, in a background thread from a copy of the vectors, when the masked
share passes a quarter or the live count doubles since training; until a build is ready the exact scan
answers. The codes are kept in the snapshot beside the exact ones (:class:`StoredCandidates`, 10 MB
at 100k) and read at the next start instead of being built again, if they hold exactly the exact
index's slots. What is guaranteed: the answer is the exact top ``k`` of the allowed set whenever the
candidates hold it, which is what the measured recall counts; a rebuild from the journal and the
running server then give the same answers. Codebooks trained on another set of vectors may rank a
near tie at the edge of the candidate set differently, so on a miss the two can differ by that memory.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

logging.getLogger("faiss.loader").setLevel(logging.WARNING)
import faiss  # noqa: E402  (the loader logs at INFO on import)

__all__ = [
    "DEFAULT_ANN_FROM",
    "ApproximateIndex",
    "Candidates",
    "Rows",
    "candidate_count",
    "in_slot_order",
]

log = logging.getLogger("eventmem.projectors")

Slots = npt.NDArray[np.int64]
Vectors = npt.NDArray[np.float32]

DEFAULT_ANN_FROM = 50_000
"""Live vectors from which searches go through the approximate index (``Tuning.ann_from``)."""
TRAIN_ROWS = 20_000
"""At most this many vectors train the codebooks (evenly spaced in slot order)."""
ADD_ROWS = 8192
"""Vectors decoded and encoded at a time while building."""
MIN_TRAIN_ROWS = 64
"""A smaller set is repeated up to this many rows (k-means wants more points than centroids)."""
STALE_SHARE = 0.25
"""Masked positions beyond this share of the index start a rebuild."""
GROWTH = 2.0
"""A rebuild when the live count reaches this multiple of the count the codebooks were trained on."""


def candidate_count(k: int) -> int:
    """How many approximate candidates are re-ranked exactly for a top ``k``: 400 for a top 10, 500 for
    the service's top 50. Recall@10 against exact at 100k among synthetic notes (built-in embedder) with
    400: the evaluations' questions 0.986, the hard evaluation's 0.992, LoCoMo's 0.998 (0.96 with 100,
    0.986 with 200 on the older retrieval corpus). Recall@50 with 500, 750, 1,000: 0.960, 0.977, 0.986
    and 0.973, 0.986, 0.990, the first ten of the top 50 0.989-0.998 with 500: 1,000 would cost
    1.19-1.28x the path's time (+0.2-0.3 ms), so it was measured and not taken."""
    return max(10 * k, 400)


class Rows:
    """Every vector of an exact index by slot, held as a copy of its float16 codes (half the size of
    the vectors) and decoded a chunk at a time."""

    def __init__(self, ids: Slots, codes: npt.NDArray[np.float16]) -> None:
        self._order = np.argsort(ids, kind="stable")
        self.slots: Slots = ids[self._order]
        self._codes = codes

    def __len__(self) -> int:
        return len(self.slots)

    def take(self, ranks: Slots) -> Vectors:
        """The vectors of the slots at these ranks (in slot order)."""
        return self._codes[self._order[ranks]].astype(np.float32)


def in_slot_order(index: Any, dim: int) -> Rows:
    """The vectors of an ``IndexIDMap2`` over float16 scalar-quantizer codes, by id (a vector index's
    slot): the codes are copied, so the index may change afterwards."""
    inner: Any = faiss.downcast_index(index.index)
    codes = faiss.vector_to_array(inner.codes).view(np.float16).reshape(-1, dim)
    return Rows(faiss.vector_to_array(index.id_map).astype(np.int64), codes)


def _subquantizers(dim: int) -> int:
    """Two dimensions per sub-quantizer where the dimension allows it (fewer, larger ones otherwise)."""
    for width in (2, 3, 4, 1):
        if dim % width == 0:
            return dim // width
    return dim


class Candidates:
    """Fast-scan PQ codes of the live vectors, keyed by slot; positions of replaced vectors are masked."""

    def __init__(self, dim: int, rows: Rows) -> None:
        index: Any = faiss.IndexPQFastScan(dim, _subquantizers(dim), 4, faiss.METRIC_INNER_PRODUCT)
        step = max(1, math.ceil(len(rows) / TRAIN_ROWS))
        sample = rows.take(np.arange(0, len(rows), step))
        if len(sample) < MIN_TRAIN_ROWS:
            sample = (
                np.resize(sample, (MIN_TRAIN_ROWS, dim)) if len(sample) else np.zeros((MIN_TRAIN_ROWS, dim), np.float32)
            )
        index.pq.cp.min_points_per_centroid = 1  # (a small set: FAISS would print a warning on stderr)
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        self._index = index
        self._pos_slot = np.zeros(0, np.int64)
        """The slot of each position in the codes."""
        self._slot_pos = np.full(0, -1, np.int64)
        """The live position of each slot, -1 when none."""
        self.live = 0
        self.largest_norm = 0.0
        """At least the norm of every vector added (infinite if one is not a number)."""
        self.trained_on = len(rows)
        for first in range(0, len(rows), ADD_ROWS):
            ranks = np.arange(first, min(first + ADD_ROWS, len(rows)))
            self.add(rows.slots[ranks], rows.take(ranks))

    @property
    def total(self) -> int:
        return int(self._index.ntotal)

    def stored(self) -> bytes:
        """The codes and their slots, to keep in the snapshot (see :meth:`from_stored`)."""
        live = np.zeros(self.total, bool)
        held = self._slot_pos[self._slot_pos >= 0]
        live[held] = True
        return msgspec.msgpack.encode(
            StoredCandidates(
                codes=bytes(faiss.serialize_index(self._index)),
                slots=self._pos_slot.astype("<i8").tobytes(),
                live=np.packbits(live).tobytes(),
                trained_on=self.trained_on,
                largest_norm=self.largest_norm,
            )
        )

    @classmethod
    def from_stored(cls, data: bytes | memoryview, dim: int, slot_limit: int) -> Candidates:
        """Candidates :meth:`stored` kept; :class:`ValueError` if they are not such codes of ``dim``
        with slots below ``slot_limit``."""
        try:
            stored = msgspec.msgpack.decode(data, type=StoredCandidates)
            index: Any = faiss.deserialize_index(np.frombuffer(stored.codes, np.uint8))
        except (msgspec.DecodeError, msgspec.ValidationError, RuntimeError) as exc:
            raise ValueError(f"the stored approximate index does not read: {exc}") from exc
        total = int(index.ntotal)
        slots = np.frombuffer(stored.slots, "<i8").astype(np.int64)
        live = np.unpackbits(np.frombuffer(stored.live, np.uint8))[:total].astype(bool)
        if (
            not isinstance(index, faiss.IndexPQFastScan)
            or index.d != dim
            or len(slots) != total
            or len(live) != total
            or (total and (int(slots.min()) < 0 or int(slots.max()) >= slot_limit))
            or not stored.largest_norm >= 0.0  # (infinite: every candidate is scored exactly)
        ):
            raise ValueError("the stored approximate index does not hold together")
        made = cls.__new__(cls)
        made._index = index
        made._pos_slot = slots
        made._slot_pos = np.full(int(slots.max()) + 1 if total else 0, -1, np.int64)
        made._slot_pos[slots[live]] = np.flatnonzero(live)
        made.live = int(np.count_nonzero(made._slot_pos >= 0))
        if made.live != int(np.count_nonzero(live)):
            raise ValueError("a slot is live at two positions of the stored approximate index")
        made.largest_norm = float(stored.largest_norm)
        made.trained_on = int(stored.trained_on)
        return made

    def live_slots(self) -> Slots:
        """The slots with a live position, in increasing order."""
        return np.flatnonzero(self._slot_pos >= 0)

    @property
    def stale(self) -> int:
        return self.total - self.live

    def _grow(self, top: int) -> None:
        if top >= len(self._slot_pos):
            grown = np.full(max(top + 1, 2 * len(self._slot_pos)), -1, np.int64)
            grown[: len(self._slot_pos)] = self._slot_pos
            self._slot_pos = grown

    def add(self, slots: Slots, vectors: Vectors) -> None:
        """Encode and append these vectors; an earlier position of the same slot is masked."""
        if not len(slots):
            return
        self.drop(slots)
        norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=1)
        largest = float(norms.max()) if np.isfinite(norms).all() else math.inf
        self.largest_norm = max(self.largest_norm, largest)
        first = self.total
        self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._grow(int(slots.max()))
        self._pos_slot = np.concatenate([self._pos_slot, slots.astype(np.int64)])
        self._slot_pos[slots] = np.arange(first, first + len(slots), dtype=np.int64)
        self.live += len(slots)

    def drop(self, slots: Slots) -> None:
        """Mask these slots' positions."""
        known = slots[(slots >= 0) & (slots < len(self._slot_pos))]
        if len(known):
            # (sorted and deduplicated by hand: np.unique's first call imports numpy.ma, 0.1 s, and a
            # module imported during a build holds arenas the build's objects would leave free)
            known = np.sort(known)
            known = known[np.concatenate(([True], known[1:] != known[:-1]))]
            self.live -= int(np.count_nonzero(self._slot_pos[known] >= 0))
            self._slot_pos[known] = -1

    def search(self, query: Vectors, count: int, allowed: npt.NDArray[np.bool_] | None, among: int | None) -> Slots:
        """Up to ``count`` live slots allowed by the mask, best approximate score first; ``among``
        is how many live slots the mask allows (the scan fetches wider in proportion; ``None``: all)."""
        total = self.total
        exact_fetch = allowed is None and self.stale == 0  # (every position is a candidate)
        among = self.live if among is None else among
        if total == 0 or count <= 0 or among <= 0:
            return np.empty(0, np.int64)
        fetch = min(total, count if exact_fetch else math.ceil(count * total / among * 1.5) + 16)
        _, found = self._index.search(np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), fetch)
        positions = found[0][found[0] >= 0]
        slots = self._pos_slot[positions]
        ok = self._slot_pos[slots] == positions
        if allowed is not None:
            inside = slots < len(allowed)
            ok &= inside
            ok[ok] = allowed[slots[ok]]
        out: Slots = slots[ok][:count]
        return out


class StoredCandidates(msgspec.Struct, frozen=True):
    """:class:`Candidates` as the snapshot keeps them."""

    codes: bytes
    """The fast-scan index, serialized by FAISS."""
    slots: bytes
    """int64 slot of each position, little-endian."""
    live: bytes
    """One bit a position (``np.packbits``): the slot's live position."""
    trained_on: int
    largest_norm: float


class ApproximateIndex:
    """The candidate index of one vector index: built, kept current and rebuilt in the background.

    Changes arrive from the vector index (under its owner's lock); a build in progress logs them and
    replays them on the new codes before they replace the old ones."""

    def __init__(self, dim: int, start_from: int) -> None:
        self.dim = dim
        self.start_from = start_from
        self._lock = threading.Lock()
        self._current: Candidates | None = None
        self._log: list[tuple[Slots, Vectors | None]] | None = None
        self._thread: threading.Thread | None = None
        self.unkept = False
        """Codes were built since :meth:`stored` last gave them for a snapshot (or :meth:`install` took them)."""

    @property
    def ready(self) -> bool:
        return self._current is not None

    def changed(self, slots: Slots, vectors: Vectors) -> None:
        with self._lock:
            if self._current is not None:
                self._current.add(slots, vectors)
            if self._log is not None:
                self._log.append((slots.copy(), np.array(vectors, dtype=np.float32)))

    def removed(self, slots: Slots) -> None:
        with self._lock:
            if self._current is not None:
                self._current.drop(slots)
            if self._log is not None:
                self._log.append((slots.copy(), None))

    def due(self, live: int) -> bool:
        """Whether a build should start now, with ``live`` vectors in the exact index (below the
        threshold the candidate index is dropped: the exact scan answers)."""
        with self._lock:
            if live < max(self.start_from, 1):
                self._current = None
                return False
            if self._log is not None:
                return False  # (one build at a time)
            current = self._current
            return current is None or (
                current.stale > STALE_SHARE * current.total or live >= GROWTH * max(current.trained_on, MIN_TRAIN_ROWS)
            )

    def stored(self) -> bytes | None:
        """The current codes in the form :meth:`install` takes, or ``None`` (none, or a build running)."""
        with self._lock:
            if self._current is None or self._log is not None:
                return None
            self.unkept = False
            return self._current.stored()

    def install(self, data: bytes | memoryview, present: Slots) -> bool:
        """Take codes :meth:`stored` kept instead of building them, if they hold exactly the slots
        ``present`` (those of the exact index, increasing) and are above the threshold; else nothing."""
        try:
            made = Candidates.from_stored(data, self.dim, int(present[-1]) + 1 + len(present) if len(present) else 0)
        except Exception as exc:  # (damaged, or no memory left: a build makes it as before)
            log.warning("approximate vector index not read from the snapshot (%s): it is built again", exc)
            return False
        if made.live < max(self.start_from, 1) or not np.array_equal(made.live_slots(), present):
            log.info("approximate vector index of the snapshot not used: it is of other vectors")
            return False
        with self._lock:
            if self._log is not None:
                return False
            self._current, self.unkept = made, False
        log.info("approximate vector index of %d read from the snapshot", made.live)
        return True

    def build(self, rows: Callable[[], Rows]) -> None:
        """Make new codes in a background thread from ``rows`` (every live slot and its vector, in slot
        order, as of this call: a copy, or a read of vectors nothing changes) and swap them in."""
        with self._lock:
            self._log = []
        thread = threading.Thread(target=self._build, args=(rows,), name="eventmem-ann", daemon=True)
        self._thread = thread
        thread.start()

    def _build(self, rows: Callable[[], Rows]) -> None:
        started = time.perf_counter()
        faiss.omp_set_num_threads(1)  # (OpenMP's thread count is per thread: a new one starts with every core)
        try:
            made = Candidates(self.dim, rows())
        except (RuntimeError, ValueError, MemoryError) as exc:  # the exact scan goes on answering
            log.warning("approximate vector index not built: %s", exc)
            with self._lock:
                self._log = None
            return
        with self._lock:
            for changed, replacement in self._log or ():
                if replacement is None:
                    made.drop(changed)
                else:
                    made.add(changed, replacement)
            self._current, self._log = (made if made.live >= max(self.start_from, 1) else None), None
            self.unkept = self._current is not None
        log.info(
            "approximate vector index of %d built in %.3fs, trained on %d of them",
            made.live,
            time.perf_counter() - started,
            made.trained_on,
        )

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a build in progress; true if none is left running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def search(
        self, query: Vectors, count: int, allowed: npt.NDArray[np.bool_] | None = None, among: int | None = None
    ) -> tuple[Slots, float] | None:
        """Candidates (see :meth:`Candidates.search`) and a bound on their vectors' norms (see
        :meth:`StoredRows.contenders`), or ``None`` if no codes are ready."""
        with self._lock:
            current = self._current
            if current is None:
                return None
            return current.search(query, count, allowed, among), current.largest_norm
