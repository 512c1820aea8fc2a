"""The re-rank scores exactly only the candidates that a float32 score leaves within reach of the top k:
those it leaves out are never in the exact top k of the candidates, ties included."""

from __future__ import annotations

import math

import faiss
import numpy as np
import numpy.typing as npt
import pytest

from eventmem.projectors.float16_rows import StoredRows

DIM = 384
COUNT = 4000
CANDIDATES = 500
SMALL = 48
Slots = npt.NDArray[np.int64]
Vectors = npt.NDArray[np.float32]


def unit(rows: npt.NDArray[np.float64]) -> Vectors:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def stored_rows(vectors: Vectors, seed: int) -> StoredRows:
    """The float16 codes of an exact index holding these vectors, each under a shuffled slot (its row here)."""
    index = faiss.IndexIDMap2(
        faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    )
    order = np.random.default_rng(seed).permutation(len(vectors)).astype(np.int64)
    index.add_with_ids(vectors[order], order)
    return StoredRows(index, DIM)


def exact_top(rows: StoredRows, slots: Slots, query: Vectors, k: int) -> list[int]:
    """The re-rank's answer over all the candidates: exact scores, the lower slot first among ties."""
    scores = rows.scores(slots, query.astype(np.float64)).astype(np.float32)
    return sorted(slots[np.lexsort((slots, -scores))[:k]].tolist())


@pytest.fixture(scope="module")
def near_ties() -> tuple[StoredRows, Vectors]:
    """Random unit vectors, a tenth of them copied exactly and a tenth copied with a change float32
    cannot tell apart from the original."""
    rng = np.random.default_rng(1)
    base = unit(rng.standard_normal((COUNT - COUNT // 5, DIM)))
    copies = base[rng.integers(0, len(base), COUNT // 10)]
    nudged = base[rng.integers(0, len(base), COUNT // 10)].copy()
    nudged[:, 7] += np.float32(1e-7)
    vectors = np.vstack([base, copies, nudged]).astype(np.float32)
    return stored_rows(vectors, 2), vectors


@pytest.mark.parametrize("k", [1, 10, 50])
def test_the_contenders_hold_the_exact_top_k_of_the_candidates_and_are_fewer_than_them(
    near_ties: tuple[StoredRows, Vectors], k: int
) -> None:
    rows, vectors = near_ties
    rng = np.random.default_rng(k)
    cut = 0
    for trial in range(40):
        slots = rng.choice(COUNT, CANDIDATES, replace=False).astype(np.int64)
        query = vectors[slots[0]] if trial % 2 else unit(rng.standard_normal((1, DIM)))[0]
        kept = rows.contenders(slots, query, k, 1.0)
        assert set(kept.tolist()) <= set(slots.tolist())
        assert set(exact_top(rows, slots, query, k)) <= set(kept.tolist())
        cut += len(kept) < CANDIDATES
    assert cut >= 30  # (the float32 scores leave most candidates out)


def test_more_ties_than_twice_k_keep_every_candidate(near_ties: tuple[StoredRows, Vectors]) -> None:
    _, vectors = near_ties
    same = np.vstack([vectors[:CANDIDATES], np.repeat(vectors[:1], 30, axis=0)]).astype(np.float32)
    tied = stored_rows(same, 3)
    slots = np.arange(len(same), dtype=np.int64)
    kept = tied.contenders(slots, vectors[0], 10, 1.0)  # (31 equal scores on top: more than 20 in reach)
    assert sorted(kept.tolist()) == slots.tolist()


@pytest.mark.parametrize("bound", [math.inf, math.nan])
def test_a_norm_bound_that_is_not_finite_keeps_every_candidate(
    near_ties: tuple[StoredRows, Vectors], bound: float
) -> None:
    rows, vectors = near_ties
    slots = np.arange(0, COUNT, 8, dtype=np.int64)
    assert rows.contenders(slots, vectors[0], 10, bound).tolist() == slots.tolist()


def variants(rng: np.random.Generator, count: int) -> Vectors:
    """A unit vector with small components and ``count`` copies of it that differ from it by one float16
    step in one of those: against a query large there, their exact scores differ by about float32's
    resolution, so float32 scores may order them wrongly."""
    vector = rng.standard_normal(DIM)
    vector[:SMALL] *= 1e-2
    codes = np.repeat(unit(vector[None, :]).astype(np.float16), count + 1, axis=0)
    changed = rng.integers(0, SMALL, count)
    codes.view(np.int16)[np.arange(1, count + 1), changed] += rng.choice(np.array([-1, 1], np.int16), count)
    return codes.astype(np.float32)


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_near_ties_that_float32_cannot_order_stay_in_the_contenders(scale: float) -> None:
    rng = np.random.default_rng(6)
    k, groups, tied = 10, 30, 15
    vectors = np.vstack(
        [unit(rng.standard_normal((COUNT - groups * (tied + 1), DIM)))] + [variants(rng, tied) for _ in range(groups)]
    )
    rows = stored_rows((vectors * np.float32(scale)).astype(np.float32), 7)
    first = COUNT - groups * (tied + 1)
    for group in range(groups):
        near = np.arange(first + group * (tied + 1), first + (group + 1) * (tied + 1), dtype=np.int64)
        slots = np.concatenate([near, rng.choice(first, CANDIDATES - len(near), replace=False)]).astype(np.int64)
        query = vectors[near[0]].copy()
        query[:SMALL] = np.float32(0.05) * rng.standard_normal(SMALL).astype(np.float32)
        query *= np.float32(scale)
        kept = rows.contenders(slots, query, k, scale * 1.001)
        assert set(exact_top(rows, slots, query, k)) <= set(kept.tolist())
        assert len(kept) < CANDIDATES
