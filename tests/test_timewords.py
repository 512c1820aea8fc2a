"""The times a question names (eventmem.core.timewords), from a table of phrases, asked on a fixed day."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from eventmem.core.timewords import closeness, days_named, spans

NOW = datetime(2026, 7, 1, 9, tzinfo=UTC).timestamp()  # a Wednesday


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


PHRASES = [
    ("what did we decide yesterday", "2026-06-30", "2026-07-01"),
    ("anything new today?", "2026-07-01", "2026-07-02"),
    ("where did it stand last week", "2026-06-22", "2026-06-29"),
    ("what happened last month", "2026-06-01", "2026-07-01"),
    ("the plan in May", "2026-05-01", "2026-06-01"),
    ("the plan in May 2025", "2025-05-01", "2025-06-01"),
    ("notes from December", "2025-12-01", "2026-01-01"),  # (not yet this year: last year's)
    ("the note from 2026-03-14", "2026-03-14", "2026-03-15"),
    ("the 2026-03 retro", "2026-03-01", "2026-04-01"),
    ("on 14 May", "2026-05-14", "2026-05-15"),
    ("on the 3rd of June", "2026-06-03", "2026-06-04"),
    ("since March 3rd, 2026", "2026-03-03", "2026-03-04"),
    ("what did she say on 3 June, 2025", "2025-06-03", "2025-06-04"),
    ("the update from three days ago", "2026-06-28", "2026-06-29"),
    ("what broke 2 weeks ago", "2026-06-15", "2026-06-22"),
    ("a month ago", "2026-06-01", "2026-07-01"),
    ("what did we want before April", None, "2026-04-01"),
    ("everything after 2026-02-01", "2026-02-01", None),
]


@pytest.mark.parametrize(("question", "start", "end"), PHRASES)
def test_a_time_the_question_names_becomes_its_span(question: str, start: str | None, end: str | None) -> None:
    (span,) = spans(question, NOW)
    assert span.start == (day(start) if start else -math.inf)
    assert span.end == (day(end) if end else math.inf)
    assert span.phrase.lower() in question.lower()


@pytest.mark.parametrize(
    "question",
    [
        "what may 3 workers do to the queue",
        "how do we deploy the billing worker",
        "retry after 30 seconds",
        "the 2026-02-30 report",  # (no such day)
        "error 1234 in module 2026",
    ],
)
def test_a_question_naming_no_time_has_no_span_and_no_boost(question: str) -> None:
    assert spans(question, NOW) == []
    assert closeness(question, np.array([NOW]), NOW) is None


def test_closeness_is_one_inside_the_span_and_halves_with_each_span_length_outside() -> None:
    times = np.array([day("2026-05-10"), day("2026-06-10"), day("2026-07-11"), day("2025-05-10")])
    near = closeness("what did we say in May", times, NOW)
    assert near is not None
    assert near[0] == 1.0
    assert near[1] == pytest.approx(0.5 ** (9 / 31))  # nine days after a 31-day span
    assert near[1] > near[2] > near[3] > 0


def test_before_a_month_favours_every_earlier_time_alike() -> None:
    near = closeness("before April", np.array([day("2026-01-05"), day("2026-03-31"), day("2026-05-01")]), NOW)
    assert near is not None
    assert near[0] == near[1] == 1.0 and 0 < near[2] < 1


def test_a_text_names_the_days_it_gives_in_full_and_no_others() -> None:
    noon = 12 * 3600
    named = days_named("[9:05 am on 14 March, 2023] Ana: the 2024-02-29 release, then June 3rd 2025")
    assert named == (day("2023-03-14") + noon, day("2024-02-29") + noon, day("2025-06-03") + noon)
    assert days_named("we may 3 times retry, in May, last week, on 14 May, on 2026-02-30") == ()
