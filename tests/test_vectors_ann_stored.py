"""The approximate vector index kept in the snapshot beside the exact codes: taken at the next start
instead of being built again, answering as the one kept did; damaged or foreign codes are built again."""

from __future__ import annotations

import logging

import msgspec
import numpy as np
import pytest
from test_vectors import ANN_FROM, DIM, answers, approximate, clustered, near, oracle, stored

from eventmem.projectors.vectors import VectorIndex

COUNT = 2500


def changed_index() -> tuple[VectorIndex, np.ndarray, np.ndarray]:
    """An index above the threshold whose approximate codes hold replaced and removed positions, the
    final vectors by slot, and which slots are still there."""
    vectors = clustered(COUNT, 21)
    index = approximate(np.arange(COUNT, dtype=np.int64), vectors)
    replaced = np.arange(0, 300, 3, dtype=np.int64)
    vectors[replaced] = clustered(len(replaced), 22)
    index.upsert(replaced, vectors[replaced])
    removed = np.arange(1, 300, 7, dtype=np.int64)
    index.remove(removed)
    there = np.ones(COUNT, bool)
    there[removed] = False
    return index, vectors, there


def test_an_approximate_index_kept_beside_its_codes_is_taken_at_once_and_answers_like_the_one_kept() -> None:
    index, vectors, there = changed_index()
    kept = index.approximate_stored()
    assert kept is not None and not index.approximate_unkept

    copy = VectorIndex.deserialize(index.serialize(), DIM)
    copy.approximate_from(ANN_FROM, kept)
    assert copy.approximate  # (at once: nothing was built)
    assert not copy.approximate_unkept
    queries = near(vectors, 30, 23)
    half = np.random.default_rng(24).random(COUNT) < 0.5
    for allowed in (None, half):
        assert answers(copy, queries, 10, allowed) == answers(index, queries, 10, allowed)
    assert all(slot not in np.flatnonzero(~there) for q in queries for slot in copy.search(q, 50)[0].tolist())

    copy.upsert(np.asarray([7], np.int64), vectors[8:9])  # (changes after a start reach the codes taken)
    copy.remove(np.asarray([8], np.int64))
    slots, _ = copy.search(stored(vectors)[8], 3)
    assert 7 in slots.tolist() and 8 not in slots.tolist()


def other_codes() -> bytes:
    other = approximate(np.arange(COUNT, dtype=np.int64), clustered(COUNT, 25)[:, ::-1].copy())
    kept = other.approximate_stored()
    assert kept is not None
    return kept


def truncated(kept: bytes) -> bytes:
    return kept[: len(kept) // 2]


def slot_past_the_rows(kept: bytes) -> bytes:
    decoded = msgspec.msgpack.decode(kept)
    slots = np.frombuffer(decoded["slots"], "<i8").copy()
    slots[0] = 1 << 40
    decoded["slots"] = slots.tobytes()
    return msgspec.msgpack.encode(decoded)


def negative_norm(kept: bytes) -> bytes:
    decoded = msgspec.msgpack.decode(kept)
    decoded["largest_norm"] = -1.0
    return msgspec.msgpack.encode(decoded)


DAMAGES = {
    "truncated": truncated,
    "garbage": lambda kept: b"\x93\x01\x02" + bytes(range(256)) * 4,
    "a slot past the rows": slot_past_the_rows,
    "a negative norm bound": negative_norm,
}


@pytest.mark.parametrize("damage", [*DAMAGES, "of other vectors"])
def test_kept_approximate_codes_that_are_damaged_or_of_other_vectors_are_built_again(
    damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    index, vectors, there = changed_index()
    kept = index.approximate_stored()
    assert kept is not None
    bad = other_codes() if damage == "of other vectors" else DAMAGES[damage](kept)

    copy = VectorIndex.deserialize(index.serialize(), DIM)
    with caplog.at_level(logging.INFO, logger="eventmem.projectors"):
        copy.approximate_from(ANN_FROM, bad)
        assert copy.settle(60)
    assert copy.approximate and copy.approximate_unkept  # (built again, to be kept by the next snapshot)
    said = "not used: it is of other vectors" if damage == "of other vectors" else "not read from the snapshot"
    assert said in caplog.text
    for query in near(vectors, 20, 26):
        slots, _ = copy.search(query, 10)
        best, _ = oracle(stored(vectors), query, 10, there)
        assert slots.tolist() == best.tolist()
