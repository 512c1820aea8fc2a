"""The checks every input goes through, reading their bounds from :data:`eventmem.core.limits.LIMITS`.

The service calls these for every tool and command, so a field is refused the same way, with the
same one-line message, wherever it comes from: ``title: expected at most 200 characters, got 60,000
characters``. Sizes are checked before any work proportional to the input is done. No IO here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from eventmem.core.errors import InvalidInput
from eventmem.core.events import METADATA_KEY_PATTERN
from eventmem.core.limits import limit

__all__ = [
    "check_count",
    "check_length",
    "check_metadata",
    "check_number",
    "check_whole",
    "has_visible",
    "refusal",
    "shown",
]


def shown(value: Any) -> str:
    """A short, one-line account of a value for an error message (never the whole of a long one)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{len(value):,} characters"
    if isinstance(value, list | tuple):
        return f"{len(value):,} items"
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    if isinstance(value, int):
        sign = "-" if value < 0 else ""  # (str() of a huge integer raises: count its digits from its bits)
        return (
            f"{value:,}"
            if abs(value) < 10**30
            else f"{sign}a number of about {int(value.bit_length() * 0.30103):,} digits"
        )
    if isinstance(value, float):
        return f"{value:g}"
    return f"a {type(value).__name__}"


def refusal(field: str, expected: str, value: Any, *, got: str | None = None) -> InvalidInput:
    """``field: expected ..., got ...``: the one form every refusal of an argument takes."""
    return InvalidInput(f"{field}: expected {expected}, got {got if got is not None else shown(value)}")


def has_visible(text: str) -> bool:
    """Whether the text holds a character that shows (not only spaces and control characters)."""
    return any(ch.isprintable() and not ch.isspace() for ch in text)


def check_length(value: str, name: str, field: str | None = None, *, high: float | None = None) -> str:
    """A string no longer than its limit (in characters); checked before anything reads it."""
    entry = limit(name)
    field = field or name
    if not isinstance(value, str):
        raise refusal(field, "a string", value)
    top = entry.high if high is None else high
    if len(value) > top:
        raise refusal(field, f"at most {int(top):,} characters", value, got=f"{len(value):,} characters")
    return value


def check_count(values: Sequence[Any], name: str, field: str | None = None) -> Sequence[Any]:
    """A list no longer than its limit, counted before any item is looked at."""
    entry = limit(name)
    field = field or name
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise refusal(field, "a list", values)
    if len(values) > entry.high:
        raise refusal(field, entry.describe(), values)
    return values


def check_whole(value: int, name: str, field: str | None = None) -> int:
    """A whole number within its limit (``True`` and ``1.0`` are not whole numbers)."""
    entry = limit(name)
    if isinstance(value, bool) or not isinstance(value, int) or not entry.low <= value <= entry.high:
        raise refusal(field or name, entry.describe(), value)
    return value


def check_number(value: float, name: str, field: str | None = None) -> float:
    """A finite number within its limit."""
    entry = limit(name)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or not entry.low <= value <= entry.high
    ):
        raise refusal(field or name, entry.describe(), value)
    return float(value)


_METADATA_KEY = re.compile(METADATA_KEY_PATTERN)


def check_metadata(value: object, field: str = "metadata") -> dict[str, str]:
    """A memory's metadata: an object of at most its limit of entries, each key a short name
    (letters, digits and ``_.-``) and each value a string within its limit."""
    if not isinstance(value, dict):
        raise refusal(field, "an object of strings", value)
    check_count(list(value), "metadata", field)
    for key, item in value.items():
        if not isinstance(key, str) or not _METADATA_KEY.fullmatch(key):
            raise refusal(f"{field} key", "letters, digits and _.- (starting with a letter or digit)", key)
        check_length(key, "metadata_key", f"{field} key")
        check_length(item, "metadata_value", f"{field}.{key}")
    return dict(value)
