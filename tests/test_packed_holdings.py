"""What a serving process holds for each memory, packed: the event ids a fold has seen, each slot's digest,
the keyword index's rows present."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventmem.core.event_ids import MERGE_FROM, WIDTH, EventIds
from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.core.state import State
from eventmem.journal.project import RootChoice
from eventmem.projectors.slot_set import SlotSet
from eventmem.runner.slot_digests import SlotDigests
from eventmem.service import MemoryService, open_service

ULID = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=WIDTH, max_size=WIDTH)
ANY_ID = st.one_of(
    ULID,
    st.text(min_size=0, max_size=30),  # (other lengths, NULs, characters beyond ASCII)
    st.text(alphabet="AB\x00é", min_size=WIDTH, max_size=WIDTH),
)


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(ANY_ID, max_size=40), max_size=12), asked=st.lists(ANY_ID, max_size=30))
def test_event_ids_answer_as_a_set_of_the_same_ids_through_merges(batches: list[list[str]], asked: list[str]) -> None:
    ids, model = EventIds(), set[str]()
    for number, batch in enumerate(batches):
        new = [event_id for event_id in dict.fromkeys(batch) if event_id not in model]
        if number % 3 == 2:
            for event_id in batch:
                ids.add(event_id)  # (one at a time, some held already)
        else:
            ids.add_new(new)
        model.update(batch)
        if number % 2:
            ids.merge()
        assert len(ids) == len(model) and set(ids) == model and bool(ids) == bool(model)
        assert all(event_id in ids for event_id in model)
        assert all((event_id in ids) == (event_id in model) for event_id in asked)
        assert ids.isdisjoint(asked) == model.isdisjoint(asked)
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(ids), type=EventIds)
    assert decoded == ids and set(decoded) == model


def test_a_fold_keeps_its_event_ids_packed_a_record_each() -> None:
    events = [MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=f"note {i}") for i in range(20_000)]
    state = State()
    for start in range(0, len(events), 5_000):
        state.fold(events[start : start + 5_000])
    seen = state.seen
    assert len(seen) == len(events) and all(event.id in seen for event in events[::97])
    assert len(seen.loose) < MERGE_FROM and len(seen.packed) == WIDTH * (len(events) - len(seen.loose))
    folded_again = State()
    folded_again.fold(list(reversed(events)))
    assert folded_again.seen == seen  # (equal whatever part holds an id)
    touched, stale = state.fold(events[:3])  # (seen: no-ops, found in the packed part)
    assert (touched, stale) == ([], True) and len(state.seen) == len(events)


def test_event_ids_of_another_form_are_held_and_found() -> None:
    odd = ["short", "x" * (WIDTH + 1), "é" * WIDTH, "A" * (WIDTH - 1) + "\x00", ""]
    ids = EventIds()
    ids.add_new([new_id() for _ in range(MERGE_FROM)] + odd)  # (merged at once)
    assert ids.packed and all(event_id in ids for event_id in odd) and set(odd) == ids.other and not ids.loose
    assert "A" * (WIDTH - 1) not in ids and not ids.isdisjoint(["nothing", odd[2]])


def test_many_event_ids_of_another_form_do_not_make_every_fold_merge() -> None:
    ids = EventIds()
    ids.add_new([f"forged-{i}" for i in range(2 * MERGE_FROM)])
    ids.add_new([new_id() for _ in range(MERGE_FROM)])  # (merged: the buffer now holds ids)
    packed = ids.packed
    ids.add_new([new_id()])  # (one more, as a save adds it: no merge, the buffer as it was)
    assert ids.packed is packed and len(ids.loose) == 1 and len(ids.other) == 2 * MERGE_FROM
    assert len(ids) == 3 * MERGE_FROM + 1


def test_slot_digests_read_back_what_was_written_and_none_as_empty() -> None:
    digests = SlotDigests()
    written = [bytes([i]) * 16 for i in range(1, 40)]
    for digest in written:
        digests.append(digest)
    digests[3] = b""
    written[3] = b""
    again = SlotDigests(digests.stored())
    assert [again[slot] for slot in range(len(again))] == written == [digests[slot] for slot in range(len(digests))]
    with pytest.raises(ValueError, match="17 bytes"):
        digests.append(b"x" * 17)
    with pytest.raises(IndexError):
        digests[len(written)]
    with pytest.raises(ValueError, match="whole number"):
        SlotDigests(b"x" * 20)


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 3000), max_size=30)), max_size=20))
def test_a_set_of_slots_answers_as_a_set_of_the_same_ints(steps: list[tuple[bool, list[int]]]) -> None:
    slots, model = SlotSet(), set[int]()
    for adding, changed in steps:
        if adding:
            slots.update(changed)
            model.update(changed)
        else:
            slots.difference_update(changed)
            model.difference_update(changed)
        assert len(slots) == len(model) and bool(slots) == bool(model) and list(slots) == sorted(model)
        assert all((slot in slots) == (slot in model) for slot in [*changed, -1, 5000])
        assert all((np.int64(slot) in slots) == (slot in model) for slot in changed)  # (numpy's ints too)
        assert "1" not in slots and 1.0 not in slots
        assert slots.sorted_array().tolist() == sorted(model)
        if model:
            assert slots.max() == max(model)
    with pytest.raises(ValueError, match="not negative"):
        slots.update([-1])


def _save_notes(project: Path) -> list[str]:
    service = open_service(RootChoice(project, "test"))
    try:
        text = "Note {} about the deploy pipeline and its canary"
        return [service.save(text.format(i), title=f"Note {i}").id for i in range(6)]
    finally:
        service.close()  # (writes the snapshot)


def _answers(service: MemoryService) -> list[list[str]]:
    return [[hit.id for hit in service.recall(query, limit=10)] for query in ("deploy canary", "pipeline", "note 3")]


def _snapshot_of_notes(project: Path) -> tuple[list[list[str]], dict[str, Any]]:
    """Notes saved (their snapshot written), the answers a server from that snapshot gives, and the
    snapshot decoded as plain values."""
    _save_notes(project)
    reference, _ = _reopened(project)
    try:
        expected = _answers(reference)
    finally:
        reference.close()
    return expected, msgspec.msgpack.decode((project / ".eventmem" / "cache" / "snapshot.bin").read_bytes())


def _rewrite_snapshot(project: Path, stored: dict[str, Any], change: dict[str, Any]) -> None:
    (project / ".eventmem" / "cache" / "snapshot.bin").write_bytes(msgspec.msgpack.encode(stored | change))


def _reopened(project: Path) -> tuple[MemoryService, bool]:
    service = open_service(RootChoice(project, "test"), load=False)
    loaded = service.project.load_snapshot()
    service.catch_up()
    return service, loaded


def _set_aside(project: Path, caplog: pytest.LogCaptureFixture, level: int) -> tuple[list[list[str]], str]:
    """The answers of a server started on the rewritten snapshot (which it must not use), and its log."""
    with caplog.at_level(level, logger="eventmem.runner"):
        later, loaded = _reopened(project)
    try:
        assert not loaded
        return _answers(later), caplog.text
    finally:
        later.close()


def test_a_snapshot_of_an_earlier_version_is_set_aside_quietly_and_the_journal_folded(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected, stored = _snapshot_of_notes(project)
    state = dict(stored["state"])
    state["seen"] = sorted(EventIds(**state["seen"]))  # (as version 11 wrote them: a list of ids)
    _rewrite_snapshot(project, stored, {"format": 11, "state": state, "slot_hashes": []})
    answers, log = _set_aside(project, caplog, logging.INFO)
    assert answers == expected
    assert "made by another version" in log and "unreadable" not in log


def test_a_snapshot_whose_slot_digests_do_not_match_its_slots_is_not_used(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected, stored = _snapshot_of_notes(project)
    _rewrite_snapshot(project, stored, {"slot_digests": stored["slot_digests"][:-16]})
    answers, log = _set_aside(project, caplog, logging.WARNING)
    assert answers == expected
    assert "5 slot digests for 6 slots" in log


@pytest.mark.parametrize(
    ("damage", "reported"),
    [
        (lambda packed: packed[:-3], "not a whole number"),
        (lambda packed: packed[26:52] + packed[:26] + packed[52:], "out of order"),
        (lambda packed: packed[:26] + packed[:26] + packed[52:], "out of order"),
        (lambda packed: b"\x00" + packed[1:], "NUL"),
    ],
)
def test_a_snapshot_whose_packed_event_ids_are_damaged_is_not_used(
    project: Path, caplog: pytest.LogCaptureFixture, damage: Any, reported: str
) -> None:
    expected, stored = _snapshot_of_notes(project)
    state = dict(stored["state"])
    state["seen"] = dict(state["seen"])
    assert len(state["seen"]["packed"]) == 0  # (six saves: their ids are loose, below a merge)
    ids = EventIds()
    ids.add_new([new_id() for _ in range(3)])
    ids.merge()
    state["seen"]["packed"] = damage(ids.packed)
    _rewrite_snapshot(project, stored, {"state": state})
    answers, log = _set_aside(project, caplog, logging.WARNING)
    assert answers == expected
    assert "ignoring damaged snapshot" in log and reported in log
