"""The fusion's rules over candidate lists (``eventmem.core.query_rules``), and what they do to a recall:
memories saved one after the other in one sitting lend each other a share of their score, in the
journal's own order (the save times), so that a rebuild or another process gives the same answers."""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from conftest import reopen, write_events

from eventmem.core.events import MemorySaved
from eventmem.core.ids import iso_to_epoch, new_id, to_iso
from eventmem.core.query_rules import FEW_TO_FUSE, NEIGHBOUR_SHARE, fuse, with_neighbours
from eventmem.service import MemoryService

FILLERS = [
    f"Ana: my friend at the {place} had {thing} last {day}, and the party went on late"
    for place, thing, day in zip(
        ["club", "studio", "hall", "school", "park", "theatre", "gym", "bar"] * 2,
        ["a band", "new lights", "a contest", "a guest", "snacks", "a crowd", "music", "a show"] * 2,
        ["night", "week", "month", "Friday", "Sunday", "summer", "spring", "winter"] * 2,
        strict=True,
    )
]
QUESTION = "Ana: what got you into ballroom dancing in the first place?"
REPLY = "Ben: my grandmother taught me the waltz when I was six, in her kitchen."
ASKED = "how did her friend get into ballroom dancing"


def test_a_reply_saved_right_after_the_question_it_answers_is_found_with_it(service: MemoryService) -> None:
    """The reply shares no word with the question asked later; it was saved right after a turn that
    does, and comes back with it."""
    for text in FILLERS[:8]:
        service.save(text)
    asked = service.save(QUESTION)
    reply = service.save(REPLY)
    for text in FILLERS[8:]:
        service.save(text)
    ids = [h.id for h in service.recall(ASKED, limit=5)]
    assert asked.id in ids and reply.id in ids
    assert reply.id not in [h.id for h in service.recall(ASKED, limit=10, mode="keyword")]


def saved(content: str, at: datetime) -> MemorySaved:
    return MemorySaved(id=new_id(), ts=to_iso(at), memory=new_id(), content=content)


def answers(service: MemoryService) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 9)) for h in service.recall(ASKED, limit=10)]


def test_neighbours_follow_the_save_times_not_the_order_a_journal_was_read_in_and_come_back_after_a_rebuild(
    project: Path,
) -> None:
    """Another writer's reply, saved 10 seconds after the question but written to the journal after
    every other memory, is the question's neighbour in this process and after the cache is deleted;
    a memory written right after the question but saved an hour later is not."""
    start = datetime.now(UTC) - timedelta(hours=3)
    events = [saved(text, start + timedelta(seconds=30 * i)) for i, text in enumerate(FILLERS)]
    question = saved(QUESTION, start + timedelta(seconds=30 * 8 - 15))
    later = saved("Ben: my grandmother taught me the tango last winter.", start + timedelta(hours=1))
    reply = saved(REPLY, start + timedelta(seconds=30 * 8 - 5))
    write_events(project, [*events, question, later, reply])
    service = reopen(project)
    try:
        before = answers(service)
        assert answers(service) == before  # (the second ask reads the memories kept in save order)
    finally:
        service.close()
    ids = [memory for memory, _ in before[:5]]
    assert question.memory in ids and reply.memory in ids
    assert later.memory not in [memory for memory, _ in before]
    shutil.rmtree(project / ".eventmem" / "cache")
    again = reopen(project)
    try:
        assert answers(again) == before
    finally:
        again.close()


def brute_force_neighbours(
    times: list[float], ids: list[str], lender: int, allowed: list[bool], steps: int, seconds: float
) -> list[tuple[int, int, int]]:
    """The sitting neighbours by their definition: every allowed memory within ``seconds`` of the
    lender, ordered by (creation time, id), the ``steps`` nearest on each side."""
    own = (times[lender], ids[lender])
    near = sorted(
        (times[slot], ids[slot], slot)
        for slot in range(len(times))
        if allowed[slot] and slot != lender and abs(times[slot] - own[0]) <= seconds
    )
    earlier = [slot for when, memory, slot in reversed(near) if (when, memory) < own][:steps]
    later = [slot for when, memory, slot in near if (when, memory) > own][:steps]
    return [(slot, lender, step) for side in (earlier, later) for step, slot in enumerate(side, 1)]


def test_the_neighbours_read_from_the_creation_order_are_those_of_their_definition_ties_and_filters_included(
    project: Path,
) -> None:
    """Memories saved at a few moments (many at the same second, ordered by id there, not by the order
    the journal holds them in), a long sitting that a filter leaves mostly out, and lenders anywhere:
    the neighbours found are those of a brute force."""
    rng = random.Random(11)
    start = datetime.now(UTC) - timedelta(days=2)
    moments = [start + timedelta(seconds=rng.randrange(0, 7200, 20)) for _ in range(40)]
    events = [saved(f"note {i}", rng.choice(moments)) for i in range(260)]
    events += [saved(f"crowd {i}", start + timedelta(hours=5, seconds=i)) for i in range(120)]
    rng.shuffle(events)  # (the journal's order, and so the positions', is not the ids')
    write_events(project, events)
    service = reopen(project)
    try:
        with service.project.read() as view:
            ids = list(view.positions())
            memories = view.memories()
            times = [iso_to_epoch(memories[memory].created_at) for memory in ids]
            assert len(set(times)) < len(times) // 2
            for trial in range(60):
                share = (0.03, 0.3, 1.0)[trial % 3]
                allowed = [rng.random() < share for _ in ids]
                lenders = rng.sample(range(len(ids)), 4)
                for lender in lenders:  # (a lender is one of the query's results: the filters allow it)
                    allowed[lender] = True
                steps, seconds = rng.choice(((1, 600.0), (2, 600.0), (3, 60.0), (2, 0.0), (4, 7200.0)))
                mask = np.array(allowed, dtype=bool)
                expected = [
                    pair
                    for lender in lenders
                    for pair in brute_force_neighbours(times, ids, lender, allowed, steps, seconds)
                ]
                assert view.saved_beside(lenders, mask, steps, seconds) == expected
    finally:
        service.close()


def test_a_neighbour_gets_a_share_of_its_lender_divided_by_the_steps_between_them() -> None:
    scores = np.array([1.0, 0.1, 0.5, 0.05, 0.0], dtype=np.float64)
    pairs = np.array([[1, 0, 1], [0, 1, 1], [3, 2, 1], [4, 0, 2]], dtype=np.int64)
    out = with_neighbours(scores, pairs)
    assert out[1] == 0.1 + NEIGHBOUR_SHARE * 1.0
    assert out[0] == 1.0 + NEIGHBOUR_SHARE * 0.1
    assert out[3] == 0.05 + NEIGHBOUR_SHARE * 0.5
    assert out[4] == NEIGHBOUR_SHARE * 1.0 / 2
    assert out[2] == 0.5
    assert with_neighbours(scores, np.zeros((0, 3), dtype=np.int64)).tolist() == scores.tolist()


def test_a_neighbour_rises_to_just_below_the_memory_that_lends_it_a_share_never_above_it() -> None:
    scores = np.array([0.5, 0.45, 0.3, 0.2], dtype=np.float64)
    pairs = np.array([[1, 0, 1], [3, 2, 1]], dtype=np.int64)
    out = with_neighbours(scores, pairs)
    assert 0.45 < out[1] < out[0] == 0.5  # a quarter of 0.5 would have passed its lender
    assert out[3] == 0.2 + NEIGHBOUR_SHARE * 0.3  # a quarter of 0.3 stays below it: all of it
    assert sorted(range(4), key=lambda i: -out[i]) == [0, 1, 2, 3]


def test_the_linear_fusion_scales_each_list_to_the_query_and_weighs_them() -> None:
    scores, vector_part, keyword_part = fuse(
        [7, 8, 9],
        {7: 0.8, 8: 0.4},
        {8: 12.0, 9: 6.0},
        fusion="linear",
        weights=(0.5, 0.5),
        spread_cosines=True,
        searched=1000,
    )
    assert vector_part.tolist() == [0.8, 0.4, 0.0]
    assert keyword_part.tolist() == [0.0, 1.0, 0.5]
    np.testing.assert_allclose(scores, [0.5, 0.75, 0.25])


def test_a_note_that_names_the_day_a_question_asks_about_rises_as_if_saved_that_day(service: MemoryService) -> None:
    """Both notes were saved now; the question names a day, and the note dated that day comes first
    although the other shares more of the question's words."""
    earlier = service.save("2024-01-09: the billing worker crashed because the disk of the billing worker was full")
    dated = service.save("2024-03-14: billing down again")
    for text in FILLERS:
        service.save(text)
    asked = "what happened to the billing worker's disk on 14 March, 2024?"
    assert [h.id for h in service.recall(asked, limit=2)] == [dated.id, earlier.id]
    assert [h.id for h in service.recall("what happened to the billing worker's disk", limit=2)] == [
        earlier.id,
        dated.id,
    ]


def test_a_few_candidates_fused_in_python_score_bit_for_bit_as_numpy_fuses_many() -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        few = list(range(int(rng.integers(1, FEW_TO_FUSE + 1))))
        many = few + list(range(100, 100 + FEW_TO_FUSE))
        cosines = {s: float(c) for s, c in zip(many, rng.normal(0.2, 0.3, len(many)), strict=True)}
        cosines[few[0]] = -0.0
        vector_hits = {s: cosines.pop(s) for s in list(cosines)[::3]}
        cosines[next(iter(vector_hits))] = 0.99  # (the vector search's cosine counts over another)
        keyword_hits = {s: float(rng.random() * 9) for s in many if rng.random() < (0.05 if trial % 2 else 0.6)}
        for use_vectors, use_keywords in ((True, True), (True, False), (False, True)):
            asked = {
                "fusion": "linear",
                "weights": (float(rng.random()), float(rng.random())),
                "spread_cosines": False,
                "searched": int(rng.integers(0, 400)),
                "cosines": cosines,
                "use_vectors": use_vectors,
                "use_keywords": use_keywords,
            }
            alone = fuse(few, vector_hits, keyword_hits, **asked)  # type: ignore[arg-type]
            among = fuse(many, vector_hits, keyword_hits, **asked)  # type: ignore[arg-type]
            for part, whole in zip(alone, among, strict=True):
                assert part.tobytes() == whole[: len(few)].tobytes()
