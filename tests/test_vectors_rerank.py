"""The scores of the approximate path are exact: each is the cosine of the query with the stored float16
codes, summed in float64 and rounded once to float32, whichever way the codes are read."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from eventmem.projectors.vectors import VectorIndex

DIM = 384
"""The embedders' dimension: enough components for zeros, float16 subnormals and negative zeros."""
COUNT = 3000
ANN_FROM = 1000


def awkward_rows(count: int, seed: int) -> npt.NDArray[np.float32]:
    """Unit vectors with what a float16 code holds at its edges: zeros, negative zeros, values below
    float16's smallest normal (6.1e-5) and near 1."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((count, DIM)).astype(np.float32)
    rows[rng.random((count, DIM)) < 0.3] = 0.0
    rows[:, :24] *= np.float32(1e-5)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[rng.random((count, DIM)) < 0.01] = -0.0
    rows[::97] = 0.0
    rows[::97, 5] = 1.0  # (a code of a single component)
    return rows


def exact(stored: npt.NDArray[np.float32], query: npt.NDArray[np.float32]) -> np.float32:
    """The inner product of a stored vector (its float16 code, decoded) with a float32 query: the exact
    sum rounded once to float32 (the products are exact in float64)."""
    return np.float32(math.fsum((stored.astype(np.float64) * query.astype(np.float64)).tolist()))


@pytest.fixture(scope="module")
def built() -> tuple[VectorIndex, npt.NDArray[np.float32]]:
    vectors = awkward_rows(COUNT, 1)
    index = VectorIndex(DIM, ann_from=ANN_FROM)
    index.upsert(np.random.default_rng(2).permutation(COUNT).astype(np.int64), vectors)
    assert index.settle(60)
    assert index.approximate
    codes = np.zeros((COUNT, DIM), np.float32)
    for slot in range(COUNT):  # (FAISS rounds values below float16's normal range its own way)
        stored = index.vector(slot)
        assert stored is not None
        codes[slot] = stored
    return index, codes


def queries(count: int, seed: int) -> list[npt.NDArray[np.float32]]:
    return list(awkward_rows(count + 1, seed)[1:])  # (row 0 is one of the duplicates' direction)


@pytest.mark.parametrize("k", [1, 10, 50])
def test_the_approximate_path_returns_the_exact_cosines_of_the_stored_codes_bit_for_bit(
    built: tuple[VectorIndex, npt.NDArray[np.float32]], k: int
) -> None:
    index, codes = built
    for query in queries(25, 3):
        slots, scores = index.search(query, k, how="approximate")
        assert len(slots) == k
        wanted = np.array([exact(codes[slot], query) for slot in slots.tolist()], np.float32)
        assert scores.dtype == np.float32
        assert scores.view(np.int32).tolist() == wanted.view(np.int32).tolist()


def test_the_approximate_path_orders_by_score_then_by_the_lower_slot(
    built: tuple[VectorIndex, npt.NDArray[np.float32]],
) -> None:
    index, _ = built
    allowed = np.random.default_rng(4).random(COUNT) < 0.8
    for query in queries(25, 5):
        for mask in (None, allowed):
            slots, scores = index.search(query, 50, mask, how="approximate")
            order = sorted(range(len(slots)), key=lambda i: (-float(scores[i]), int(slots[i])))
            assert order == list(range(len(slots)))
            if mask is not None:
                assert allowed[slots].all()


def test_similarities_are_the_exact_cosines_of_the_stored_codes_bit_for_bit(
    built: tuple[VectorIndex, npt.NDArray[np.float32]],
) -> None:
    index, codes = built
    for query in queries(10, 6):
        wanted_slots = list(range(0, COUNT, 7))
        got = index.similarities([*wanted_slots, COUNT + 5, -1], query)  # (unknown slots are left out)
        assert sorted(got) == wanted_slots
        for slot in wanted_slots:
            assert np.float32(got[slot]).view(np.int32) == exact(codes[slot], query).view(np.int32)


def test_a_query_the_approximate_scan_leaves_short_is_answered_in_full_by_the_exact_scan(
    built: tuple[VectorIndex, npt.NDArray[np.float32]],
) -> None:
    index, codes = built
    duplicated = codes[np.flatnonzero(codes[:, 5] == 1.0)[0]]  # (31 memories share it: ties the scan gives up on)
    for query in (duplicated, np.zeros(DIM, np.float32)):
        slots, scores = index.search(query, 50, how="approximate")
        exact_slots, exact_scores = index.search(query, 50, how="exact")
        assert len(slots) == 50
        assert (slots.tolist(), scores.tolist()) == (exact_slots.tolist(), exact_scores.tolist())


def test_similarities_asked_again_with_one_query_after_another_are_its_exact_cosines_each_time(
    built: tuple[VectorIndex, npt.NDArray[np.float32]],
) -> None:
    """What is made of a query is kept for its next ask (its neighbours' cosines after its keyword
    hits'): asked again, after another query, or with components too large to scale, the same bits."""
    index, codes = built
    first, second = queries(2, 8)
    large = first * np.float32(2.0**15)  # (beyond the scaled path's bound: the plain conversion)
    wanted = list(range(3, COUNT, 11))
    for query in (first, first, second, first, large, large, second):
        for slots in (wanted, wanted[::2]):
            got = index.similarities(slots, query)
            assert sorted(got) == slots
            for slot in slots:
                assert np.float32(got[slot]).view(np.int32) == exact(codes[slot], query).view(np.int32)


def test_the_approximate_path_given_every_vector_as_a_candidate_answers_as_the_exact_scan(
    built: tuple[VectorIndex, npt.NDArray[np.float32]],
) -> None:
    """The number of candidates is what the approximate path trades: with all of them re-ranked its
    answer holds the exact scan's memories, filtered or not (the benchmark compares narrower widths)."""
    index, _ = built
    allowed = np.random.default_rng(9).random(COUNT) < 0.6
    narrow_differs = 0
    for query in queries(20, 10):
        for mask in (None, allowed):
            for k in (10, 50):
                slots, scores = index.search(query, k, mask, how="approximate", candidates=COUNT)
                exact_slots, exact_scores = index.search(query, k, mask, how="exact")
                assert slots.tolist() == exact_slots.tolist()
                assert np.allclose(scores, exact_scores, rtol=0, atol=1e-6)  # (FAISS's scan sums in float32)
                narrow = index.search(query, k, mask, how="approximate", candidates=k)[0]
                narrow_differs += narrow.tolist() != exact_slots.tolist()
    assert narrow_differs > 0  # (the codes alone, k candidates, miss some of the exact top k)
