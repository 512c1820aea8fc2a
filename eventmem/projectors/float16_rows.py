"""The exact vector index's float16 codes read in place by slot: exact scores, and the float32 pass
that tells which candidates of an approximate search need them (see :mod:`eventmem.projectors.ann`)."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import numpy.typing as npt

logging.getLogger("faiss.loader").setLevel(logging.WARNING)
import faiss  # noqa: E402  (the loader logs at INFO on import)

__all__ = ["StoredRows"]

Slots = npt.NDArray[np.int64]
Vectors = npt.NDArray[np.float32]


class StoredRows:
    """The float16 codes of an exact index (``IndexIDMap2`` over a float16 scalar quantizer) read in
    place by slot: valid while the index does not change (it is kept here, so a mapped file stays
    mapped). FAISS's ``reconstruct_batch`` makes a decoder per vector: 3 ms for 500 of them."""

    def __init__(self, index: Any, dim: int) -> None:
        self.index = index
        inner: Any = faiss.downcast_index(index.index)
        count = int(inner.ntotal)
        self._codes = np.zeros((0, dim), np.float16)
        if count:
            raw = faiss.rev_swig_ptr(inner.codes.data(), count * int(inner.code_size))
            self._codes = raw.view(np.float16).reshape(count, dim)
        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        self._position = np.full(int(ids.max()) + 1 if count else 0, -1, np.int64)
        self._position[ids] = np.arange(count, dtype=np.int64)
        self._query: tuple[Vectors, npt.NDArray[np.float64], npt.NDArray[np.float64] | None] | None = None
        """The last query of :meth:`query_scores`, as float64, and scaled (``None``: too large to scale)."""

    def vectors(self, slots: Slots) -> npt.NDArray[np.float64]:
        """The vectors of these slots (each in the index), in float64."""
        return self._codes[self._position[slots]].astype(np.float64)

    def scores(self, slots: Slots, query: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``vectors(slots) @ query`` bit for bit, in half its time: numpy converts float16 one value at
        a time. A float16's bits moved up by 42 (the sign kept in place) read as a float64 equal to the
        float16 times 2**-1008 exactly, zeros and subnormals included; the query is scaled up by as much,
        so every product, and every sum of them in the same order, is the same float64. Codes of unit
        vectors only (an infinite code would read as a finite value); a query of components beyond
        2**14 (which could overflow once scaled) takes the plain conversion."""
        if not float(np.max(np.abs(query), initial=0.0)) < _QUERY_BOUND:
            return self.vectors(slots) @ query
        return self._scaled_scores(slots, query * _F16_SCALE)

    def query_scores(self, slots: Slots, query: Vectors) -> npt.NDArray[np.float64]:
        """:meth:`scores` of ``query`` in float64, what is made of it (its float64 copy, its bound
        checked, its scaled copy) kept for the next call with the same array: a query's cosines are
        asked more than once (its keyword hits', then its neighbours'). ``query`` is never changed in
        place (a query's vector is made once and only read)."""
        kept = self._query
        if kept is None or kept[0] is not query:
            flat = np.asarray(query, dtype=np.float64).reshape(-1)
            scaled = flat * _F16_SCALE if float(np.max(np.abs(flat), initial=0.0)) < _QUERY_BOUND else None
            kept = self._query = (query, flat, scaled)
        _, flat, scaled = kept
        return self.vectors(slots) @ flat if scaled is None else self._scaled_scores(slots, scaled)

    def _scaled_scores(self, slots: Slots, scaled_query: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        bits = np.take(self._codes.view(np.int16), self._position[slots], axis=0).astype(np.int64)
        bits <<= _F16_SHIFT
        bits &= _F16_KEEP
        scaled: npt.NDArray[np.float64] = bits.view(np.float64) @ scaled_query
        return scaled

    def contenders(self, slots: Slots, query: Vectors, k: int, largest_norm: float) -> Slots:
        """Those of these slots (each in the index) that can be in their exact top ``k`` (ties
        included), ``largest_norm`` bounding their vectors' norms: each is scored in float32 by FAISS's
        SIMD scan of its code (a tenth of :meth:`scores`' time a row) and kept if within twice the
        float32 rounding bound of the ``k``-th best of those scores. All of them when they are few,
        when a bound is not finite, or when more than ``2 k`` are that close (ties)."""
        keep = 2 * k
        if len(slots) <= keep:
            return slots
        query = np.ascontiguousarray(query.reshape(-1), dtype=np.float32)
        margin = 2 * _f32_error(self._codes.shape[1]) * largest_norm * float(np.linalg.norm(query.astype(np.float64)))
        if not math.isfinite(margin):
            return slots
        # (np.take copies whole rows: a third faster than indexing for 500 rows of 768 bytes)
        scores, rows = _f16_scan(np.take(self._codes, self._position[slots], axis=0), query, keep)
        ordered = np.sort(scores)
        if not ordered[0] > -np.inf or np.isnan(ordered).any():
            return slots  # (scores that are not numbers, or not all scored)
        floor = float(ordered[keep - k]) - 2 * margin
        if float(ordered[0]) >= floor:
            return slots  # (more than 2 k within reach of the k-th: they are not all in hand)
        kept: Slots = slots[rows[scores >= floor]]
        return kept


_F16_SHIFT = 42
"""Moves a float16's exponent and mantissa onto the low bits of a float64's exponent and the top of its mantissa."""
_F16_KEEP = np.int64(np.uint64(0x81FF_FC00_0000_0000).view(np.int64))
"""The sign bit (sign-extended from the int16) and the float16's 15 other bits, once moved."""
_F16_SCALE = 2.0**1008
"""The float16 value over the float64 read from its moved bits (the difference of the exponent biases)."""
_QUERY_BOUND = 2.0**14


def _f32_error(dim: int) -> float:
    """A bound, relative to ``|x| |q|``, on the rounding error of a float32 inner product of ``dim``
    terms however it is summed (``(dim + 2) u`` for ``u`` = 2**-24, doubled)."""
    return 2.0 * (dim + 2) * 2.0**-24


_SCANNERS: dict[int, Any] = {}
"""An empty inverted-file index per dimension over float16 codes: its list scanner scores codes held anywhere."""


def _f16_scan(codes: npt.NDArray[np.float16], query: Vectors, keep: int) -> tuple[Vectors, Slots]:
    """The ``keep`` best rows of ``codes`` (C-contiguous float16 rows) by their float32 inner product with
    ``query`` (FAISS's SIMD scan, a heap: in no order): scores and row numbers."""
    dim = codes.shape[1]
    owner = _SCANNERS.get(dim)
    if owner is None:
        owner = faiss.IndexIVFScalarQuantizer(
            faiss.IndexFlatIP(dim), dim, 1, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT, False
        )
        owner.is_trained = True  # (float16 codes need no training; the list is never used)
        _SCANNERS[dim] = owner
    scanner = owner.get_InvertedListScanner(False, None, None)
    scanner.set_query(faiss.swig_ptr(query))
    scores = np.full(keep, -np.inf, np.float32)
    rows = np.full(keep, -1, np.int64)
    ids = np.arange(len(codes), dtype=np.int64)
    ptr = faiss.swig_ptr
    scanner.scan_codes(len(codes), ptr(codes.view(np.uint8)), ptr(ids), ptr(scores), ptr(rows), keep)
    return scores, rows
