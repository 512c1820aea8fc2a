"""The fold: last-writer-wins registers, tombstones, links, and order independence."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.stamps import event_digest, id_of, key_of, normalize_ts, stamp_of, ts_of, wall_of
from eventmem.core.state import State

Decoded = AnyEvent | UnknownEvent


def ts(second: int) -> str:
    return f"2026-02-01T09:00:{second:02d}.000000Z"


def fold(events: Iterable[Decoded], state: State | None = None) -> State:
    state = State() if state is None else state
    for event in events:
        state.apply(event)
    return state


def saved(event_id: str, second: int, memory: str = "m1", **fields: Any) -> MemorySaved:
    fields.setdefault("content", f"content of {memory}")
    return MemorySaved(id=event_id, ts=ts(second), memory=memory, **fields)


def updated(event_id: str, second: int, memory: str = "m1", **fields: Any) -> MemoryUpdated:
    return MemoryUpdated(id=event_id, ts=ts(second), memory=memory, **fields)


# -- last writer wins ---------------------------------------------------------------------------


def test_a_field_takes_the_value_with_the_latest_timestamp_whatever_the_order() -> None:
    events: list[Decoded] = [
        saved("e1", 0, title="first"),
        updated("e2", 5, title="latest"),
        updated("e3", 3, title="older"),
    ]
    for order in (events, events[::-1], [events[1], events[0], events[2]]):
        record = fold(order).memories["m1"]
        assert record.title == "latest"
        assert record.updated_at == ts(5)


def test_equal_timestamps_are_broken_by_the_event_id() -> None:
    events: list[Decoded] = [saved("e1", 0), updated("e7", 4, title="from e7"), updated("e5", 4, title="from e5")]
    assert fold(events).memories["m1"].title == "from e7"
    assert fold(events[::-1]).memories["m1"].title == "from e7"


def test_timestamps_in_other_iso_forms_compare_as_the_same_instant() -> None:
    early = MemoryUpdated(id="e9", ts="2026-02-01T10:00:00+01:00", memory="m1", title="same instant, greater id")
    late = MemoryUpdated(id="e2", ts="2026-02-01T09:00:00.500000Z", memory="m1", title="half a second later")
    state = fold([saved("e1", 0), early, MemoryUpdated(id="e8", ts="2026-02-01T09:00:00Z", memory="m1", title="x")])
    assert state.memories["m1"].title == "same instant, greater id"
    assert fold([late], state).memories["m1"].title == "half a second later"


def test_each_field_is_its_own_register() -> None:
    events: list[Decoded] = [
        saved("e1", 0, title="t0", content="c0", tags=("a",)),
        updated("e2", 2, title="t2"),
        updated("e3", 1, content="c1", title="t1"),
    ]
    for order in (events, events[::-1]):
        record = fold(order).memories["m1"]
        assert (record.title, record.content, record.tags) == ("t2", "c1", ("a",))


def test_an_update_that_arrives_before_its_saved_event_is_kept() -> None:
    state = fold([updated("e2", 5, content="edited on another branch")])
    assert state.visible("m1") is None  # nothing saved yet
    assert not state.memories["m1"].exists
    fold([saved("e1", 1, title="original title", content="original", kind="decision", by="alice")], state)
    record = state.visible("m1")
    assert record is not None
    assert record.content == "edited on another branch"
    assert (record.title, record.kind) == ("original title", "decision")
    assert (record.created_at, record.created_by) == (ts(1), "alice")
    assert record.updated_at == ts(5)


def test_created_at_is_the_earliest_save_of_a_memory() -> None:
    events: list[Decoded] = [saved("e5", 5, content="rewritten", by="bob"), saved("e1", 1, by="alice")]
    for order in (events, events[::-1]):
        record = fold(order).memories["m1"]
        assert (record.created_at, record.created_by) == (ts(1), "alice")
        assert record.content == "rewritten"


# -- tombstones ---------------------------------------------------------------------------------


def test_a_delete_is_a_tombstone_that_later_updates_do_not_resurrect() -> None:
    state = fold([saved("e1", 0), MemoryDeleted(id="e2", ts=ts(1), memory="m1"), updated("e3", 2, content="late")])
    assert state.memories["m1"].status == "deleted"
    assert state.visible("m1") is None
    assert state.memories["m1"].content == "late"  # the register moves; the memory stays dead


def test_a_restore_with_a_later_stamp_brings_a_deleted_memory_back() -> None:
    events: list[Decoded] = [
        saved("e1", 0),
        MemoryDeleted(id="e2", ts=ts(2), memory="m1"),
        MemoryRestored(id="e3", ts=ts(3), memory="m1"),
    ]
    for order in (events, events[::-1]):
        state = fold(order)
        assert state.memories["m1"].status == "live"
        assert state.visible("m1") is not None


def test_a_restore_older_than_the_delete_does_not_bring_it_back() -> None:
    events: list[Decoded] = [
        saved("e1", 0),
        MemoryRestored(id="e2", ts=ts(1), memory="m1"),
        MemoryDeleted(id="e3", ts=ts(2), memory="m1"),
    ]
    for order in (events, events[::-1]):
        assert fold(order).memories["m1"].status == "deleted"


def test_a_delete_after_a_restore_wins_again() -> None:
    state = fold(
        [
            saved("e1", 0),
            MemoryDeleted(id="e2", ts=ts(1), memory="m1"),
            MemoryRestored(id="e3", ts=ts(2), memory="m1"),
            MemoryDeleted(id="e4", ts=ts(3), memory="m1"),
        ]
    )
    assert state.memories["m1"].status == "deleted"


def test_an_expired_memory_is_hidden_until_restored() -> None:
    state = fold([saved("e1", 0, ttl_seconds=10), MemoryExpired(id="e2", ts=ts(11), memory="m1", expires_at=ts(10))])
    assert state.memories["m1"].status == "expired"
    assert state.visible("m1") is None
    fold([MemoryRestored(id="e3", ts=ts(12), memory="m1")], state)
    assert state.memories["m1"].status == "live"


def test_the_newest_tombstone_names_the_status() -> None:
    base: list[Decoded] = [saved("e1", 0)]
    state = fold([*base, MemoryDeleted(id="e2", ts=ts(1), memory="m1"), MemoryExpired(id="e3", ts=ts(2), memory="m1")])
    assert state.memories["m1"].status == "expired"
    state = fold([*base, MemoryExpired(id="e2", ts=ts(1), memory="m1"), MemoryDeleted(id="e3", ts=ts(2), memory="m1")])
    assert state.memories["m1"].status == "deleted"


def test_a_memory_that_was_never_saved_is_not_visible() -> None:
    state = fold([MemoryRestored(id="e1", ts=ts(0), memory="ghost"), updated("e2", 1, memory="ghost", title="x")])
    assert state.visible("ghost") is None
    assert state.visible("nobody") is None


# -- promotion and TTL --------------------------------------------------------------------------


def test_promoting_a_memory_sets_its_ttl_to_none() -> None:
    state = fold([saved("e1", 0, ttl_seconds=60), MemoryPromoted(id="e2", ts=ts(1), memory="m1", reason="used")])
    record = state.memories["m1"]
    assert record.ttl_seconds is None
    assert ts_of(record.promoted_stamp) == ts(1)
    assert record.updated_at == ts(1)


def test_a_promotion_older_than_a_new_ttl_does_not_override_it() -> None:
    events: list[Decoded] = [
        saved("e1", 0, ttl_seconds=60),
        MemoryPromoted(id="e2", ts=ts(1), memory="m1"),
        updated("e3", 2, ttl_seconds=30),
    ]
    for order in (events, events[::-1]):
        record = fold(order).memories["m1"]
        assert record.ttl_seconds == 30
        assert record.ttl_set_at == ts(2)


def test_the_ttl_counts_from_the_save_until_it_is_changed() -> None:
    record = fold([saved("e1", 3, ttl_seconds=60), updated("e2", 4, title="x")]).memories["m1"]
    assert record.ttl_set_at == ts(3)


# -- idempotence --------------------------------------------------------------------------------


def test_replaying_an_event_twice_is_a_no_op() -> None:
    events: list[Decoded] = [
        saved("e1", 0),
        updated("e2", 1, title="t"),
        MemoryDeleted(id="e3", ts=ts(2), memory="m1"),
        LinkAdded(id="e4", ts=ts(3), link="k1", source="m1", target="m2"),
        UnknownEvent("pinned", "e5", ts(4), b"{}"),
    ]
    once = fold(events)
    twice = fold(events, fold(events))
    assert canonical(twice) == canonical(once)
    assert twice.memories["m1"].events == 3
    assert twice.unknown == {"pinned": 1}
    assert once.apply(events[1]) == ()


# -- links --------------------------------------------------------------------------------------


def test_a_link_connects_two_memories_and_an_unlink_removes_it() -> None:
    link = LinkAdded(id="e3", ts=ts(3), link="k1", source="m1", target="m2", relation="solves", strength=0.5)
    state = fold([saved("e1", 0, memory="m1"), saved("e2", 0, memory="m2"), link])
    assert state.apply(link) == ()  # already seen
    assert [found.id for found in state.links_of("m1")] == ["k1"]
    assert [found.id for found in state.links_of("m2")] == ["k1"]
    record = state.links["k1"]
    assert (record.source, record.target, record.relation, record.strength) == ("m1", "m2", "solves", 0.5)
    assert state.apply(LinkRemoved(id="e4", ts=ts(4), link="k1")) == ("m1", "m2")
    assert state.links_of("m1") == []
    assert not state.links["k1"].alive


def test_an_unlink_that_arrives_before_its_link_still_removes_it() -> None:
    state = fold([LinkRemoved(id="e4", ts=ts(4), link="k1")])
    fold([LinkAdded(id="e3", ts=ts(3), link="k1", source="m1", target="m2")], state)
    assert state.links_of("m1") == []
    assert not state.links["k1"].alive


def test_links_of_lists_live_links_oldest_first() -> None:
    state = fold(
        [
            LinkAdded(id="e2", ts=ts(2), link="k2", source="m3", target="m1"),
            LinkAdded(id="e1", ts=ts(1), link="k1", source="m1", target="m2"),
            LinkAdded(id="e3", ts=ts(3), link="k3", source="m1", target="m4"),
            LinkRemoved(id="e4", ts=ts(4), link="k3"),
        ]
    )
    assert [link.id for link in state.links_of("m1")] == ["k1", "k2"]
    assert [link.id for link in state.links_of("m3")] == ["k2"]
    assert state.links_of("m4") == []


def test_adjacency_indexes_each_link_under_both_of_its_ends() -> None:
    state = fold(
        [
            LinkAdded(id="e1", ts=ts(1), link="k1", source="m1", target="m2"),
            LinkAdded(id="e2", ts=ts(2), link="k2", source="m2", target="m3"),
        ]
    )
    assert state.adjacency == {"m1": {"k1"}, "m2": {"k1", "k2"}, "m3": {"k2"}}


def test_a_newer_link_event_with_the_same_link_id_moves_the_link() -> None:
    events: list[Decoded] = [
        LinkAdded(id="e1", ts=ts(1), link="k1", source="m1", target="m2"),
        LinkAdded(id="e2", ts=ts(2), link="k1", source="m1", target="m3", relation="causes"),
    ]
    for order in (events, events[::-1]):
        state = fold(order)
        assert nonempty(state.adjacency) == {"m1": {"k1"}, "m3": {"k1"}}
        assert state.links_of("m2") == []
        assert state.links["k1"].relation == "causes"


def test_archiving_marks_memories_without_hiding_them() -> None:
    state = fold(
        [
            saved("e1", 0, memory="m1"),
            MemoryArchived(id="e2", ts=ts(1), memories=("m1", "m2"), segment="archive/a.jsonl", events=3),
        ]
    )
    assert state.memories["m1"].archived and state.memories["m2"].archived
    assert state.visible("m1") is not None


# -- order independence (property tests) --------------------------------------------------------

MEMORIES = ("m1", "m2", "m3")
LINKS = ("k1", "k2")
# few distinct instants, so equal timestamps (broken by the event id) are common; some spelled
# differently but meaning the same instant
TIMES = (ts(0), ts(1), ts(2), ts(3), "2026-02-01T09:00:01Z", "2026-02-01T10:00:02+01:00")
PLACEHOLDER = "?"

memory_ids = st.sampled_from(MEMORIES)
times = st.sampled_from(TIMES)
small_text = st.sampled_from(("", "a", "b", "c"))
tags = st.lists(st.sampled_from(("x", "y", "z")), max_size=2, unique=True).map(tuple)
importances = st.sampled_from((0.0, 0.25, 0.5, 1.0))
ttls = st.one_of(st.none(), st.sampled_from((60, 3600)))

saved_events = st.builds(
    MemorySaved,
    id=st.just(PLACEHOLDER),
    ts=times,
    by=small_text,
    memory=memory_ids,
    kind=st.sampled_from(("general", "decision", "fix")),
    scope=st.sampled_from(("project", "global")),
    title=small_text,
    content=small_text,
    summary=small_text,
    tags=tags,
    importance=importances,
    ttl_seconds=ttls,
)


@st.composite
def updated_events(draw: st.DrawFn) -> MemoryUpdated:
    changes: dict[str, Any] = {}
    for name, values in (
        ("kind", st.sampled_from(("general", "todo"))),
        ("title", small_text),
        ("content", small_text),
        ("summary", small_text),
        ("tags", tags),
        ("importance", importances),
        ("ttl_seconds", ttls),
    ):
        if draw(st.booleans()):
            changes[name] = draw(values)
    return MemoryUpdated(id=PLACEHOLDER, ts=draw(times), by=draw(small_text), memory=draw(memory_ids), **changes)


def simple(kind: type[Any]) -> st.SearchStrategy[Any]:
    return st.builds(kind, id=st.just(PLACEHOLDER), ts=times, by=small_text, memory=memory_ids)


any_event = st.one_of(
    saved_events,
    updated_events(),
    simple(MemoryDeleted),
    simple(MemoryRestored),
    simple(MemoryPromoted),
    simple(MemoryExpired),
    st.builds(
        LinkAdded,
        id=st.just(PLACEHOLDER),
        ts=times,
        by=small_text,
        link=st.sampled_from(LINKS),
        source=memory_ids,
        target=memory_ids,
        relation=st.sampled_from(("related_to", "solves")),
        strength=st.sampled_from((0.5, 1.0)),
    ),
    st.builds(LinkRemoved, id=st.just(PLACEHOLDER), ts=times, link=st.sampled_from(LINKS)),
    st.builds(
        MemoryArchived,
        id=st.just(PLACEHOLDER),
        ts=times,
        memories=st.lists(memory_ids, min_size=1, max_size=2, unique=True).map(tuple),
        segment=st.just("archive/a.jsonl"),
    ),
    st.builds(
        UnknownEvent, type=st.sampled_from(("pinned", "starred")), id=st.just(PLACEHOLDER), ts=times, raw=st.just(b"{}")
    ),
)


@st.composite
def event_sets(draw: st.DrawFn) -> list[Decoded]:
    """Events with unique ids; ids are drawn independently of timestamps, so ties go either way."""
    events = draw(st.lists(any_event, min_size=1, max_size=24))
    numbers = draw(st.lists(st.integers(0, 9999), min_size=len(events), max_size=len(events), unique=True))
    out: list[Decoded] = []
    for event, number in zip(events, numbers, strict=True):
        event_id = f"01JK{number:022d}"
        if isinstance(event, UnknownEvent):
            out.append(UnknownEvent(event.type, event_id, event.ts, event.raw))
        else:
            out.append(msgspec.structs.replace(event, id=event_id))
    return out


def nonempty(adjacency: dict[str, set[str]]) -> dict[str, set[str]]:
    return {end: links for end, links in adjacency.items() if links}


def canonical(state: State) -> dict[str, Any]:
    """Everything the fold knows, in a form where dict and set order do not matter."""
    return {
        "memories": {
            memory_id: msgspec.to_builtins(record)
            | {
                "status": record.status,
                "visible": state.visible(memory_id) is not None,
                "created_at": record.created_at,
                "updated_at": record.updated_at,
                "ttl_set_at": record.ttl_set_at,
            }
            for memory_id, record in state.memories.items()
        },
        "links": {link_id: msgspec.to_builtins(link) | {"alive": link.alive} for link_id, link in state.links.items()},
        "links_of": {memory_id: [link.id for link in state.links_of(memory_id)] for memory_id in MEMORIES},
        "seen": state.seen,
        "unknown": state.unknown,
        # a link moved to other ends can leave an empty set behind in one order and not the other
        "adjacency": nonempty(state.adjacency),
    }


@settings(max_examples=150, deadline=None)
@given(events=event_sets(), data=st.data())
def test_any_order_of_the_same_events_folds_to_the_same_state(events: list[Decoded], data: st.DataObject) -> None:
    expected = canonical(fold(events))
    shuffled = data.draw(st.permutations(events))
    assert canonical(fold(shuffled)) == expected
    assert canonical(fold(events[::-1])) == expected


@settings(max_examples=150, deadline=None)
@given(events=event_sets(), data=st.data())
def test_two_branches_folded_apart_then_merged_by_union_agree(events: list[Decoded], data: st.DataObject) -> None:
    # each event lives on branch A, branch B, or both (written before the branches split)
    sides = data.draw(st.lists(st.sampled_from("AB*"), min_size=len(events), max_size=len(events)))
    branch_a = [event for event, side in zip(events, sides, strict=True) if side in "A*"]
    branch_b = [event for event, side in zip(events, sides, strict=True) if side in "B*"]
    expected = canonical(fold(events))
    # a process that had folded A catches up with B's lines after the merge, and the other way round
    assert canonical(fold(branch_b, fold(branch_a))) == expected
    assert canonical(fold(branch_a, fold(branch_b))) == expected
    # a fresh process reads the merged journal, shared lines twice and in any order
    merged = data.draw(st.permutations(branch_a + branch_b))
    assert canonical(fold(merged)) == expected


@settings(max_examples=100, deadline=None)
@given(events=event_sets(), data=st.data())
def test_replaying_any_subset_again_changes_nothing(events: list[Decoded], data: st.DataObject) -> None:
    expected = canonical(fold(events))
    again = data.draw(st.lists(st.sampled_from(events), max_size=len(events)))
    assert canonical(fold(again, fold(events))) == expected


# -- causal order: prev chains, forged prevs, cycles, conflicting copies of an event id --------------


@st.composite
def causal_event_sets(draw: st.DrawFn) -> list[Decoded]:
    """Events whose ``prev`` is empty, another event of the set (of the same memory or not, so
    chains, forged prevs and cycles all occur) or an id no line carries; plus copies of some
    event ids with other content, as a hand edit or a hostile branch would make."""
    events = draw(event_sets())
    prevs = st.one_of(st.just(""), st.sampled_from([e.id for e in events]), st.just("01JKNOSUCHEVENT000000000000"))

    def about(event: Decoded) -> object:
        return getattr(event, "memory", None) or getattr(event, "link", None)

    def prev_of(event: AnyEvent) -> str:
        alike = st.sampled_from([e.id for e in events if about(e) == about(event)])
        return draw(st.one_of(prevs, alike))  # (the same memory often: chains and cycles)

    out = [e if isinstance(e, UnknownEvent) else msgspec.structs.replace(e, prev=prev_of(e)) for e in events]
    copies = [c for c in draw(st.lists(st.sampled_from(out), max_size=3)) if not isinstance(c, UnknownEvent)]
    return out + [msgspec.structs.replace(c, by=c.by + "*", prev=draw(prevs)) for c in copies]


def folded_at_once(events: Iterable[Decoded]) -> State:
    state = State()
    state.fold(list(events))
    return state


def causal_canonical(state: State) -> dict[str, Any]:
    return canonical(state) | {"awaited": state.awaited, "conflicts": state.conflicts}


@settings(max_examples=150, deadline=None)
@given(events=causal_event_sets(), data=st.data())
def test_with_prev_chains_forged_prevs_cycles_and_conflicting_copies_any_order_folds_alike(
    events: list[Decoded], data: st.DataObject
) -> None:
    expected = causal_canonical(folded_at_once(events))
    assert causal_canonical(folded_at_once(data.draw(st.permutations(events)))) == expected
    assert causal_canonical(folded_at_once(events[::-1])) == expected


@settings(max_examples=150, deadline=None)
@given(events=causal_event_sets(), data=st.data())
def test_folding_in_batches_and_again_from_scratch_when_stale_equals_one_fold(
    events: list[Decoded], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(events))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=4)))
    batches = [order[start:end] for start, end in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    state, read = State(), []
    for batch in batches:  # as the store catches up: a stale state is folded again from every line read
        read.extend(batch)
        if state.fold(batch)[1]:
            state = folded_at_once(read)
    assert causal_canonical(state) == causal_canonical(folded_at_once(events))


def test_an_edit_naming_a_far_future_event_as_prev_wins_over_it() -> None:
    hostile = updated("e9", 0, title="hostile", by="mallory")
    hostile = msgspec.structs.replace(hostile, ts="9999-12-31T23:59:59.999999Z", id="ZZZZZZZZZZZZZZZZZZZZZZZZZZ")
    state = folded_at_once([saved("e1", 0, title="first"), hostile])
    assert state.memories["m1"].title == "hostile"
    assert state.head_of("m1") == hostile.id
    edit = MemoryUpdated(id="e2", ts=ts(2), memory="m1", prev=state.head_of("m1"), title="mine")
    in_order: list[Decoded] = [saved("e1", 0, title="first"), hostile, edit]
    for events in (in_order, in_order[::-1]):
        record = folded_at_once(events).memories["m1"]
        assert (record.title, record.head, record.depths) == ("mine", "e2", {"e2": 1})
        assert record.updated_at == ts(2)


def test_a_prev_arriving_after_the_event_naming_it_makes_the_state_stale() -> None:
    state = folded_at_once([saved("e1", 0)])
    assert state.fold([updated("e3", 3, prev="e2", title="third")]) == (["m1"], False)
    assert state.awaited == {"e2"}
    assert state.fold([updated("e2", 2, prev="e1", title="second")])[1]
    again = folded_at_once([saved("e1", 0), updated("e3", 3, prev="e2"), updated("e2", 2, prev="e1")])
    assert again.memories["m1"].depths == {"e2": 1, "e3": 2}


def test_a_prev_naming_an_event_of_another_memory_counts_as_naming_a_first_event() -> None:
    other = [
        saved("e2", 0, memory="m2"),
        updated("e4", 1, memory="m2", prev="e2"),
        updated("e5", 2, memory="m2", prev="e4"),
    ]
    state = folded_at_once([saved("e1", 0), *other, updated("e3", 1, prev="e5", title="x")])
    assert state.memories["m2"].depths == {"e4": 1, "e5": 2}
    assert state.memories["m1"].depths == {"e3": 1}  # not 3: another memory's chain lends no depth
    assert not state.awaited


def test_of_two_copies_of_an_event_id_the_same_one_is_folded_in_either_order() -> None:
    one, other = updated("e2", 2, title="one"), updated("e2", 2, title="other")
    titles = {folded_at_once([saved("e1", 0), *copies]).memories["m1"].title for copies in ([one, other], [other, one])}
    assert len(titles) == 1
    state = folded_at_once([saved("e1", 0), one])
    assert state.fold([other])[1]  # which copy wins is unknown without the folded copy's digest
    state = folded_at_once([saved("e1", 0), one, other])
    assert state.conflicts == {"e2": min(event_digest(one), event_digest(other))}
    assert state.fold([one]) == ([], False)  # either copy again, once both were folded: nothing to do
    assert state.fold([other]) == ([], False)


@given(depths=st.lists(st.integers(0, 10**40), min_size=2, max_size=2), stamps=st.lists(times, min_size=2, max_size=2))
def test_fold_stamps_sort_by_depth_then_time_and_keep_the_time_and_id_readable(
    depths: list[int], stamps: list[str]
) -> None:
    (a, b), (ts_a, ts_b) = depths, stamps
    key_a, key_b = key_of(a, ts_a, "01JKA"), key_of(b, ts_b, "01JKB")
    if min(a, b) < 10**35 - 1 and a != b:
        assert (key_a < key_b) == (a < b)
    for key, depth, when, event_id in ((key_a, a, ts_a, "01JKA"), (key_b, b, ts_b, "01JKB")):
        assert (ts_of(key), id_of(key), wall_of(key)) == (normalize_ts(when), event_id, stamp_of(when, event_id))
        assert key_of(depth, when, event_id) == key
