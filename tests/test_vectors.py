"""The FAISS vector index: slots in, cosine top-k out, with a filter applied before the cut."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from eventmem.projectors.vectors import VectorIndex

DIM = 32


def unit_rows(count: int, seed: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def stored(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The vectors as the index keeps them: float16 codes."""
    return vectors.astype(np.float16).astype(np.float32)


def filled(count: int, seed: int = 0) -> tuple[VectorIndex, npt.NDArray[np.float32]]:
    """An index of ``count`` random unit vectors, and those vectors as the index stores them."""
    vectors = unit_rows(count, seed)
    index = VectorIndex(DIM)
    index.upsert(np.arange(count, dtype=np.int64), vectors)
    return index, stored(vectors)


def oracle(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int, allowed: npt.NDArray[np.bool_]):
    """Brute force: the true top ``k`` allowed slots by inner product."""
    scores = vectors @ query
    candidates = np.flatnonzero(allowed[: len(vectors)])
    best = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
    return best, scores[best]


def test_upsert_then_search_finds_the_nearest_slot_first() -> None:
    index, vectors = filled(50)
    slots, scores = index.search(vectors[17], 5)
    assert len(index) == 50
    assert slots[0] == 17
    assert scores[0] == pytest.approx(float(vectors[17] @ vectors[17]), abs=1e-5)
    assert list(scores) == sorted(scores, reverse=True)


def test_search_on_an_empty_index_or_with_k_zero_returns_nothing() -> None:
    empty = VectorIndex(DIM)
    query = unit_rows(1, 1)[0]
    assert len(empty.search(query, 5)[0]) == 0
    index, _ = filled(10)
    assert len(index.search(query, 0)[0]) == 0
    assert len(index.search(query, 5, np.zeros(10, bool))[0]) == 0


def test_removed_slots_never_come_back_even_when_the_mask_allows_them() -> None:
    index, vectors = filled(40)
    index.remove(np.asarray([3, 7], np.int64))
    assert len(index) == 38
    assert index.vector(3) is None
    everything = np.ones(40, bool)
    for k in (1, 5, 40, 100):
        for mask in (None, everything):
            slots, _ = index.search(vectors[3], k, mask)
            assert 3 not in slots and 7 not in slots
    only_removed = np.zeros(40, bool)
    only_removed[[3, 7]] = True
    assert len(index.search(vectors[3], 5, only_removed)[0]) == 0


def test_upserting_a_slot_again_replaces_its_vector() -> None:
    index, vectors = filled(20)
    replacement = unit_rows(1, 99)[0]
    index.upsert(np.asarray([5], np.int64), replacement[None, :])
    assert len(index) == 20
    stored = index.vector(5)
    assert stored is not None
    np.testing.assert_allclose(stored, replacement, atol=5e-4)  # kept as float16
    slots, scores = index.search(replacement, 1)
    assert slots[0] == 5 and scores[0] == pytest.approx(1.0, abs=1e-3)
    old_slots, old_scores = index.search(vectors[5], 20)
    assert old_scores[list(old_slots).index(5)] == pytest.approx(float(replacement @ vectors[5]), abs=1e-3)


@pytest.mark.parametrize("fraction", [0.9, 0.5, 0.3])
def test_a_mostly_allowed_search_returns_the_true_top_k_of_the_allowed_set(fraction: float) -> None:
    index, vectors = filled(600, seed=2)
    rng = np.random.default_rng(3)
    for trial in range(20):
        allowed = rng.random(600) < fraction
        query = unit_rows(1, 1000 + trial)[0]
        for k in (1, 10, 50):
            slots, scores = index.search(query, k, allowed)
            want_slots, want_scores = oracle(vectors, query, k, allowed)
            np.testing.assert_array_equal(slots, want_slots)
            np.testing.assert_allclose(scores, want_scores, atol=2e-4)  # float16 codes


@pytest.mark.parametrize("allowed_count", [1, 3, 20, 100])
def test_a_sparsely_allowed_search_returns_the_true_top_k_of_the_allowed_set(allowed_count: int) -> None:
    index, vectors = filled(600, seed=4)
    rng = np.random.default_rng(5)
    for trial in range(10):
        allowed = np.zeros(600, bool)
        allowed[rng.choice(600, allowed_count, replace=False)] = True
        query = unit_rows(1, 2000 + trial)[0]
        for k in (1, 10, 50):
            slots, scores = index.search(query, k, allowed)
            want_slots, want_scores = oracle(vectors, query, k, allowed)
            assert len(slots) == min(k, allowed_count)
            np.testing.assert_array_equal(slots, want_slots)
            np.testing.assert_allclose(scores, want_scores, atol=2e-4)  # float16 codes


def test_the_allowed_search_stays_exact_after_removals() -> None:
    index, vectors = filled(300, seed=6)
    removed = np.arange(0, 300, 3, dtype=np.int64)
    index.remove(removed)
    alive = np.ones(300, bool)
    alive[removed] = False
    rng = np.random.default_rng(7)
    for allowed in (rng.random(300) < 0.8, rng.random(300) < 0.05):
        query = unit_rows(1, 77)[0]
        slots, _ = index.search(query, 10, allowed)
        want, _ = oracle(vectors, query, 10, allowed & alive)
        np.testing.assert_array_equal(slots, want)


def test_a_mask_shorter_than_the_slot_range_excludes_the_slots_past_its_end() -> None:
    index, vectors = filled(100, seed=8)
    allowed = np.ones(40, bool)
    for k in (5, 60):
        slots, _ = index.search(vectors[90], k, allowed)
        assert len(slots) == min(k, 40)
        assert (slots < 40).all()


def test_serialize_and_deserialize_give_the_same_answers() -> None:
    index, _ = filled(200, seed=9)
    index.remove(np.asarray([10, 11], np.int64))
    copy = VectorIndex.deserialize(index.serialize(), DIM)
    assert len(copy) == len(index) == 198
    allowed = np.random.default_rng(10).random(200) < 0.1
    for query in unit_rows(5, 11):
        for mask in (None, allowed):
            got, got_scores = copy.search(query, 10, mask)
            want, want_scores = index.search(query, 10, mask)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_allclose(got_scores, want_scores)
    assert copy.vector(10) is None


@pytest.mark.parametrize("mapped", [False, True])
def test_a_copy_answers_like_its_original_and_keeps_its_answers_while_the_original_changes(
    tmp_path: Path, mapped: bool
) -> None:
    index, vectors = filled(200, seed=13)
    index.remove(np.asarray([3, 4], np.int64))
    if mapped:  # (a server's index, mapped from the snapshot's file)
        index.write(tmp_path / "vectors.faiss")
        index = VectorIndex.load(tmp_path / "vectors.faiss", DIM)
    queries = unit_rows(5, 14)
    before = [index.search(query, 10) for query in queries]
    copy = index.copy()
    index.remove(np.asarray([int(before[0][0][0])], np.int64))
    index.upsert(np.asarray([5], np.int64), -vectors[5:6])
    for query, (slots, scores) in zip(queries, before, strict=True):
        got_slots, got_scores = copy.search(query, 10)
        np.testing.assert_array_equal(got_slots, slots)
        np.testing.assert_allclose(got_scores, scores)
    assert copy.vector(3) is None and len(copy) == 198
    copy.write(tmp_path / "copy.faiss")
    np.testing.assert_array_equal(
        VectorIndex.load(tmp_path / "copy.faiss", DIM).search(queries[1], 10)[0], before[1][0]
    )


def test_upserting_into_a_deserialized_index_replaces_instead_of_duplicating() -> None:
    index, vectors = filled(30, seed=12)
    copy = VectorIndex.deserialize(index.serialize(), DIM)
    replacement = unit_rows(1, 13)[0]
    copy.upsert(np.asarray([5], np.int64), replacement[None, :])
    assert len(copy) == 30
    slots, _ = copy.search(vectors[5], 30)
    assert list(slots).count(5) == 1
    copy.remove(np.asarray([6], np.int64))
    assert len(copy) == 29 and 6 not in copy.search(vectors[6], 30)[0]


def test_deserializing_a_snapshot_of_another_dimension_is_refused() -> None:
    index, _ = filled(5)
    with pytest.raises(ValueError, match="dimension"):
        VectorIndex.deserialize(index.serialize(), DIM * 2)


def test_upserting_vectors_of_the_wrong_dimension_is_refused() -> None:
    index = VectorIndex(DIM)
    with pytest.raises((AssertionError, ValueError, RuntimeError)):
        index.upsert(np.asarray([0], np.int64), unit_rows(1, 0, dim=DIM + 1))
    assert len(index) == 0


def test_a_mapped_index_searches_like_the_one_written_while_a_thread_copies_it_into_memory(tmp_path: Path) -> None:
    index, vectors = filled(300)
    index.remove(np.array([7, 8], dtype=np.int64))
    path = tmp_path / "vectors.faiss"
    index.write(path)
    mapped = VectorIndex.load(path, DIM)
    assert mapped.mapped and len(mapped) == len(index) == 298
    expected = [index.search(vectors[i], 10) for i in range(0, 300, 7)]
    copier = threading.Thread(target=mapped.own)
    copier.start()
    while True:  # searching before, during and after the copy gives the same answers
        done = not copier.is_alive()
        for i, (slots, scores) in zip(range(0, 300, 7), expected, strict=True):
            got_slots, got_scores = mapped.search(vectors[i], 10)
            assert list(got_slots) == list(slots)
            assert np.allclose(got_scores, scores)
        if done:
            break
    copier.join()
    assert not mapped.mapped
    mapped.upsert(np.array([7], dtype=np.int64), vectors[7:8])
    assert mapped.search(vectors[7], 1)[0][0] == 7


def test_a_vector_index_file_of_another_dimension_is_refused(tmp_path: Path) -> None:
    index, _ = filled(5)
    path = tmp_path / "vectors.faiss"
    index.write(path)
    with pytest.raises(ValueError, match="dimension"):
        VectorIndex.load(path, DIM * 2)


# -- above the approximate threshold --------------------------------------------------------------

ANN_FROM = 1000
"""The lowered threshold of these tests (the default is 50k)."""


def clustered(count: int, seed: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    """Unit vectors around a few dozen directions, as embeddings of related texts are."""
    rng = np.random.default_rng(seed)
    centres = unit_rows(max(1, count // 100), seed + 1, dim)
    rows = centres[rng.integers(0, len(centres), count)] + 0.1 * rng.standard_normal((count, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def near(vectors: npt.NDArray[np.float32], count: int, seed: int) -> npt.NDArray[np.float32]:
    """Queries near some of ``vectors`` (as a question is near the memories that answer it)."""
    rng = np.random.default_rng(seed)
    rows = vectors[rng.integers(0, len(vectors), count)] + 0.1 * rng.standard_normal((count, vectors.shape[1]))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def approximate(slots: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> VectorIndex:
    """An index above the lowered threshold, its approximate index built."""
    index = VectorIndex(DIM, ann_from=ANN_FROM)
    index.upsert(slots, vectors)
    assert index.settle(60)
    assert index.approximate
    return index


def answers(
    index: VectorIndex, queries: npt.NDArray[np.float32], k: int, allowed: npt.NDArray[np.bool_] | None = None
) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """Each query's top ``k`` slots and their scores (rounded)."""
    found = (index.search(query, k, allowed) for query in queries)
    return [(tuple(slots.tolist()), tuple(np.round(scores, 5).tolist())) for slots, scores in found]


def test_below_the_threshold_no_approximate_index_is_made() -> None:
    index = VectorIndex(DIM, ann_from=ANN_FROM)
    index.upsert(np.arange(ANN_FROM - 1, dtype=np.int64), clustered(ANN_FROM - 1, 3))
    assert index.settle(60)
    assert not index.approximate


def test_above_the_threshold_the_top_k_equals_the_exact_scan_on_a_seeded_dataset() -> None:
    vectors = clustered(4000, 5)
    index = approximate(np.arange(4000, dtype=np.int64), vectors)
    for k in (1, 5, 10):
        for query in near(vectors, 40, 6):
            slots, scores = index.search(query, k)
            best, best_scores = oracle(stored(vectors), query, k, np.ones(4000, bool))
            assert slots.tolist() == best.tolist()
            assert scores == pytest.approx(best_scores, abs=1e-4)  # exact cosines, not approximate ones


@pytest.mark.parametrize("allowed_count", [3, 50, 150, 2000, 3900])
def test_a_filter_above_the_threshold_returns_the_true_top_k_of_the_allowed_set(allowed_count: int) -> None:
    vectors = clustered(4000, 7)
    index = approximate(np.arange(4000, dtype=np.int64), vectors)
    rng = np.random.default_rng(allowed_count)
    allowed = np.zeros(4000, bool)
    allowed[rng.choice(4000, allowed_count, replace=False)] = True
    for query in near(vectors, 30, 8):
        slots, _ = index.search(query, 10, allowed)
        assert slots.tolist() == oracle(stored(vectors), query, 10, allowed)[0].tolist()


def test_removed_and_replaced_vectors_never_come_back_from_the_approximate_index() -> None:
    vectors = clustered(3000, 9)
    index = approximate(np.arange(3000, dtype=np.int64), vectors)
    queries = near(vectors, 30, 10)
    removed = np.unique(np.concatenate([index.search(q, 3)[0] for q in queries]))
    index.remove(removed)
    replaced = np.arange(0, 3000, 7, dtype=np.int64)
    replaced = replaced[~np.isin(replaced, removed)]
    moved = clustered(len(replaced), 11)
    index.upsert(replaced, moved)
    truth = stored(vectors)
    truth[replaced] = stored(moved)
    live = np.ones(3000, bool)
    live[removed] = False
    for query in queries:
        slots, scores = index.search(query, 10)
        assert not set(slots.tolist()) & set(removed.tolist())
        best, best_scores = oracle(truth, query, 10, live)
        assert slots.tolist() == best.tolist()
        assert scores == pytest.approx(best_scores, abs=1e-4)  # a replaced vector is scored by its new value
    index.remove(np.arange(3000, dtype=np.int64)[live][: 3000 - len(removed) - ANN_FROM + 1])
    assert not index.approximate  # below the threshold again: the exact scan answers


def test_an_index_built_in_steps_answers_like_one_loaded_at_once_from_the_same_final_vectors() -> None:
    vectors = clustered(6000, 12)
    queries = near(vectors, 40, 13)
    stepwise = VectorIndex(DIM, ann_from=ANN_FROM)
    for first in range(0, 5000, 500):
        stepwise.upsert(np.arange(first, first + 500, dtype=np.int64), vectors[first : first + 500])
        assert stepwise.settle(60)
    stepwise.remove(np.arange(100, 1300, dtype=np.int64))  # past the masked share that starts a rebuild
    assert stepwise.settle(60)
    stepwise.upsert(np.arange(5000, 6000, dtype=np.int64), vectors[5000:])
    moved = near(vectors, 100, 16)
    stepwise.upsert(np.arange(2000, 2100, dtype=np.int64), moved)
    final = vectors.copy()
    final[2000:2100] = moved
    keep = np.ones(6000, bool)
    keep[100:1300] = False
    slots = np.flatnonzero(keep).astype(np.int64)
    rebuilt = approximate(slots, final[slots])
    assert stepwise.settle(60)
    assert stepwise.approximate
    for k, allowed in ((10, None), (10, keep & (np.arange(6000) % 2 == 0))):
        assert answers(stepwise, queries, k, allowed) == answers(rebuilt, queries, k, allowed)
        exact = VectorIndex(DIM, ann_from=10**9)
        exact.upsert(slots, final[slots])
        exact_slots = [slots for slots, _ in answers(exact, queries, k, allowed)]
        assert [slots for slots, _ in answers(stepwise, queries, k, allowed)] == exact_slots


def test_a_deserialized_index_builds_its_approximate_index_when_told_its_threshold() -> None:
    vectors = clustered(2000, 14)
    index = approximate(np.arange(2000, dtype=np.int64), vectors)
    copy = VectorIndex.deserialize(index.serialize(), DIM)
    copy.approximate_from(ANN_FROM)
    assert copy.settle(60)
    assert copy.approximate
    queries = near(vectors, 20, 15)
    assert answers(copy, queries, 10) == answers(index, queries, 10)


def test_a_mapped_index_builds_its_approximate_index_from_the_file_and_answers_like_the_one_written(
    tmp_path: Path,
) -> None:
    vectors = clustered(3000, 17)
    written = approximate(np.arange(3000, dtype=np.int64), vectors)
    written.write(tmp_path / "vectors.faiss")
    mapped = VectorIndex.load(tmp_path / "vectors.faiss", DIM, mapped=True)
    mapped.approximate_from(ANN_FROM)
    assert mapped.settle(60)
    assert mapped.approximate
    queries = near(vectors, 20, 18)
    assert answers(mapped, queries, 10) == answers(written, queries, 10)
    mapped.upsert(np.asarray([5], np.int64), vectors[6:7])  # a change copies the codes into memory first
    assert mapped.vector(5) == pytest.approx(stored(vectors)[6], abs=1e-3)
    assert mapped.search(stored(vectors)[6], 2)[0].tolist() in ([5, 6], [6, 5])
