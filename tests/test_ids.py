"""Times: the bulk conversion gives what the one-at-a-time conversion gives, bit for bit."""

from __future__ import annotations

import random

import pytest

from eventmem.core.ids import iso_to_epoch, isos_to_epochs, now_iso


def outcome(text: str) -> float | str:
    try:
        return iso_to_epoch(text)
    except ValueError:
        return "error"


def test_many_times_convert_exactly_as_one_at_a_time() -> None:
    rng = random.Random(7)
    texts = [now_iso()] + [
        f"{rng.randint(1, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}T"
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}Z"
        for _ in range(5000)
    ]
    texts = [t for t in texts if outcome(t) != "error"]  # (day 31 of a short month)
    assert isos_to_epochs(texts).tolist() == [iso_to_epoch(t) for t in texts]


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00+01:00",
        "2026-01-01 00:00:00.000000Z",
        "1969-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00.000000Z",
        "2024-02-29T12:00:00.000001Z",
        "2026-12-31T23:59:60.000000Z",
        "2026-01-01T24:61:99.000000Z",
        "2026/01/01T00:00:00.000000Z",
        "2026-01-01T00:00:00.00000٣Z",
    ],
)
def test_other_forms_convert_as_one_at_a_time(text: str) -> None:
    assert isos_to_epochs([now_iso(), text]).tolist()[1] == iso_to_epoch(text)


@pytest.mark.parametrize("text", ["2026-02-30T00:00:00.000000Z", "0000-01-01T00:00:00.000000Z", "not a time"])
def test_an_invalid_time_raises_as_one_at_a_time(text: str) -> None:
    assert outcome(text) == "error"
    with pytest.raises(ValueError):
        isos_to_epochs([now_iso(), text])


def test_no_times() -> None:
    assert isos_to_epochs([]).tolist() == []
