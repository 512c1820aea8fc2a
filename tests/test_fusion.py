"""The fusion's rules over candidate lists (``eventmem.core.query_rules``), and what they do to a recall:
memories saved one after the other in one sitting lend each other a share of their score."""

from __future__ import annotations

import numpy as np

from eventmem.core.query_rules import NEIGHBOUR_SHARE, fuse, with_neighbours
from eventmem.service import MemoryService


def test_a_reply_saved_right_after_the_question_it_answers_is_found_with_it(service: MemoryService) -> None:
    """The reply shares no word with the question asked later; it was saved right after a turn that
    does, and comes back with it."""
    fillers = [
        f"Gina: the {place} had {thing} last {day}, and the dancing went on late"
        for place, thing, day in zip(
            ["club", "studio", "hall", "school", "park", "theatre", "gym", "bar"] * 2,
            ["a band", "new lights", "a contest", "a guest", "snacks", "a crowd", "music", "a show"] * 2,
            ["night", "week", "month", "Friday", "Sunday", "summer", "spring", "winter"] * 2,
            strict=True,
        )
    ]
    for text in fillers[:8]:
        service.save(text)
    asked = service.save("Gina: what got you into ballroom dancing in the first place?")
    reply = service.save("Jon: my grandmother taught me the waltz when I was six, in her kitchen.")
    for text in fillers[8:]:
        service.save(text)
    ids = [h.id for h in service.recall("how did her friend get into ballroom dancing", limit=5)]
    assert asked.id in ids and reply.id in ids


def test_a_neighbour_gets_a_share_of_the_best_neighbour_score_only_from_the_top_candidates() -> None:
    scores = np.array([1.0, 0.1, 0.5, 0.05, 0.0, 0.0, 0.0], dtype=np.float64)
    pairs = np.array([[1, 0], [0, 1], [3, 2], [4, 5]], dtype=np.int64)
    out = with_neighbours(scores, pairs, sources=3)
    assert out[1] == 0.1 + NEIGHBOUR_SHARE * 1.0
    assert out[0] == 1.0 + NEIGHBOUR_SHARE * 0.1
    assert out[3] == 0.05 + NEIGHBOUR_SHARE * 0.5
    assert out[4] == 0.0  # its neighbour is not among the best three
    assert with_neighbours(scores, np.zeros((0, 2), dtype=np.int64)).tolist() == scores.tolist()


def test_a_neighbour_rises_to_just_below_the_memory_that_lends_it_a_share_never_above_it() -> None:
    scores = np.array([0.5, 0.45, 0.3, 0.2], dtype=np.float64)
    pairs = np.array([[1, 0], [3, 2]], dtype=np.int64)
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
