"""Times named in a question: "yesterday", "last week", "in May", "three days ago", "2026-03-14",
"before April"… become spans of time (UTC), and a memory's closeness to them a soft boost.

Pure: no clock (``now`` is passed in), no IO. A question naming no time gets no span, and then no
boost: :func:`closeness` returns ``None``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # (numpy is imported where closeness() runs: a server answers initialize before it)
    import numpy as np
    import numpy.typing as npt

__all__ = ["NAMED_DAYS_CHARS", "Span", "closeness", "days_named", "spans"]

MONTHS: Final = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                 "october", "november", "december")  # fmt: skip
_SHORT: Final = {m[:3]: i + 1 for i, m in enumerate(MONTHS)}
_NUMBERS: Final = {
    w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}
_COUNT = r"(\d{1,3}|" + "|".join(_NUMBERS) + r"|a|an)"
_MONTH = r"(" + "|".join(MONTHS) + r"|sept|" + "|".join(_SHORT) + r")\.?"

_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_ISO_MONTH = re.compile(r"\b(\d{4})-(\d{2})\b(?!-)")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?\b", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", re.I)
_IN_MONTH = re.compile(
    rf"\b(in|during|from|of|before|after|since|until|by)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}(?:\s+(\d{{4}}))?\b", re.I
)
_AGO = re.compile(rf"\b{_COUNT}\s+(day|week|month)s?\s+ago\b", re.I)
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this morning|(?:last|past|previous|this|earlier this)\s+(?:week|month))\b", re.I
)
_BEFORE_AFTER_DAY = re.compile(r"\b(before|after|since|until)\s+(\d{4}-\d{2}-\d{2})\b", re.I)

DAY: Final = 86400.0


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of time a question names: ``start`` (included) to ``end`` (excluded), in seconds
    since the epoch; ``-inf`` or ``inf`` for "before …" and "after …"."""

    start: float
    end: float
    phrase: str


def _epoch(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    after = date(year + (month == 12), month % 12 + 1, 1)
    return _epoch(date(year, month, 1)), _epoch(after)


def _month_number(word: str) -> int:
    return _SHORT[word.lower()[:3]]


def _past_year(month: int, today: date, year: str | None) -> int:
    """The year of a month named without one: this year's, or last year's if it has not come yet."""
    if year:
        return int(year)
    return today.year if month <= today.month else today.year - 1


def _count(word: str) -> int:
    word = word.lower()
    return 1 if word in ("a", "an") else _NUMBERS[word] if word in _NUMBERS else int(word)


def spans(text: str, now: float) -> list[Span]:
    """The spans of time ``text`` names, relative to ``now`` (seconds since the epoch, UTC)."""
    if not any(c.isdigit() for c in text) and not _HINT.search(text):
        return []
    today = datetime.fromtimestamp(now, UTC).date()
    out: list[Span] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], start: float, end: float) -> None:
        if any(a < match.end() and match.start() < b for a, b in taken):
            return
        taken.append(match.span())
        out.append(Span(start, end, match.group(0)))

    for match in _BEFORE_AFTER_DAY.finditer(text):
        with contextlib.suppress(ValueError, OverflowError, KeyError):
            moment = _epoch(date.fromisoformat(match.group(2)))
            before = match.group(1).lower() in ("before", "until")
            add(match, -math.inf if before else moment, moment if before else math.inf)
    for match in _ISO_DAY.finditer(text):
        with contextlib.suppress(ValueError, OverflowError, KeyError):
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            add(match, _epoch(day), _epoch(day) + DAY)
    for match in _ISO_MONTH.finditer(text):
        if 1 <= int(match.group(2)) <= 12:
            add(match, *_month_span(int(match.group(1)), int(match.group(2))))
    for pattern, day_group, month_group, year_group in ((_DAY_MONTH, 1, 2, 3), (_MONTH_DAY, 2, 1, 3)):
        for match in pattern.finditer(text):
            if match.group(month_group) == "may":  # (the verb, lower case: "may 3 workers fail")
                continue
            with contextlib.suppress(ValueError, OverflowError, KeyError):
                month = _month_number(match.group(month_group))
                day = date(_past_year(month, today, match.group(year_group)), month, int(match.group(day_group)))
                add(match, _epoch(day), _epoch(day) + DAY)
    for match in _IN_MONTH.finditer(text):
        word, month = match.group(1).lower(), _month_number(match.group(2))
        start, end = _month_span(_past_year(month, today, match.group(3)), month)
        if word in ("before", "until", "by"):
            start, end = -math.inf, start
        elif word in ("after", "since"):
            start, end = end if word == "after" else start, math.inf
        add(match, start, end)
    for match in _AGO.finditer(text):
        count, unit = _count(match.group(1)), match.group(2).lower()
        if unit == "day":
            day = today - timedelta(days=count)
            add(match, _epoch(day), _epoch(day) + DAY)
        elif unit == "week":
            monday = today - timedelta(days=today.weekday() + 7 * count)
            add(match, _epoch(monday), _epoch(monday) + 7 * DAY)
        else:
            index = today.year * 12 + today.month - 1 - count
            add(match, *_month_span(index // 12, index % 12 + 1))
    for match in _RELATIVE.finditer(text):
        add(match, *_relative(match.group(1).lower(), today, now))
    return out


_HINT = re.compile(r"yesterday|today|tonight|morning|week|month|ago|" + "|".join(_SHORT), re.I)


def _relative(phrase: str, today: date, now: float) -> tuple[float, float]:
    midnight = _epoch(today)
    monday = midnight - today.weekday() * DAY
    first = _epoch(today.replace(day=1))
    if phrase == "yesterday":
        return midnight - DAY, midnight
    if phrase in ("today", "tonight", "this morning"):
        return midnight, midnight + DAY
    if phrase.endswith("week"):
        if phrase.startswith("past"):
            return now - 7 * DAY, now
        return (monday, now) if "this" in phrase else (monday - 7 * DAY, monday)
    if phrase.startswith("past"):
        return now - 30 * DAY, now
    if "this" in phrase:
        return first, now
    index = today.year * 12 + today.month - 2
    return _month_span(index // 12, index % 12 + 1)


def days_named(text: str) -> tuple[float, ...]:
    """The middle of each day ``text`` names in full (``2024-03-14``, ``14 March, 2024``, ``March 14th
    2024``: with its year, so that the day does not depend on when the text is read), in seconds
    since the epoch: when a note says its event happened. Only the first :data:`NAMED_DAYS_CHARS`
    characters are read (a date heads a note, as a log line or a dated entry)."""
    return _days_named(text[:NAMED_DAYS_CHARS])


@functools.lru_cache(maxsize=16384)
def _days_named(text: str) -> tuple[float, ...]:
    if not any(c.isdigit() for c in text):
        return ()
    out: list[float] = []
    for match in _ISO_DAY.finditer(text):
        with contextlib.suppress(ValueError, OverflowError):
            out.append(_epoch(date(int(match.group(1)), int(match.group(2)), int(match.group(3)))) + DAY / 2)
    for pattern, day_group, month_group, year_group in ((_DAY_MONTH, 1, 2, 3), (_MONTH_DAY, 2, 1, 3)):
        for match in pattern.finditer(text):
            if match.group(year_group) is None or match.group(month_group) == "may":
                continue
            with contextlib.suppress(ValueError, OverflowError, KeyError):
                month = _month_number(match.group(month_group))
                day = date(int(match.group(year_group)), month, int(match.group(day_group)))
                out.append(_epoch(day) + DAY / 2)
    return tuple(sorted(set(out)))


NAMED_DAYS_CHARS: Final = 400
"""How much of a note :func:`days_named` reads."""


def closeness(text: str, times: npt.NDArray[np.float64], now: float) -> npt.NDArray[np.float64] | None:
    """For each of ``times`` (seconds since the epoch), how close it is to a span ``text`` names: 1
    inside, halving with every span length (at least a day) outside; ``None`` if it names none."""
    found = spans(text, now)
    if not found:
        return None
    import numpy as np

    best = np.zeros(len(times), dtype=np.float64)
    for span in found:
        width = max(span.end - span.start, DAY) if math.isfinite(span.end - span.start) else 7 * DAY
        before = np.maximum(span.start - times, 0.0)
        after = np.maximum(times - span.end, 0.0)
        best = np.maximum(best, np.power(0.5, (before + after) / width))
    return best
