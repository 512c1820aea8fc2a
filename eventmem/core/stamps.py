"""The fold's stamps: the ordering keys of events, and the digest that orders versions of one event id.

A fold stamp is the event's causal depth, its fixed-width ``ts`` and its event id, written so that
string order is the fold's order (see :mod:`eventmem.core.state`). A wall-clock stamp leaves the depth out.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterable
from typing import TypeVar

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent
from eventmem.core.ids import parse_iso, to_iso

__all__ = [
    "NO_DEPTH",
    "causal_time_order",
    "depth_digits",
    "event_digest",
    "id_of",
    "key_of",
    "normalize_ts",
    "stamp_of",
    "ts_of",
    "wall_of",
]

_TS_WIDTH = len("2026-01-01T00:00:00.000000Z")


def normalize_ts(ts: str) -> str:
    """Fixed-width UTC form of a timestamp, so that stamps compare as strings."""
    if len(ts) == _TS_WIDTH and ts.endswith("Z"):
        return ts
    try:
        return to_iso(parse_iso(ts))
    except (ValueError, OverflowError):  # (a zone that moves the year past 9999)
        return ts.ljust(_TS_WIDTH, "0")[:_TS_WIDTH]


def stamp_of(ts: str, event_id: str) -> str:
    """The wall-clock stamp ``ts + event id``: time order, for time travel and reports."""
    return normalize_ts(ts) + event_id


_COUNTS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The first character of a fold stamp: how many digits of depth follow (ascending in ASCII)."""
_COUNT_OF = {char: count for count, char in enumerate(_COUNTS)}
_MAX_DEPTH = 10 ** (len(_COUNTS) - 1) - 1
NO_DEPTH = "0"


def key_of(depth: int, ts: str, event_id: str) -> str:
    """The fold's stamp of an event: its causal depth, fixed-width ``ts``, event id.

    The depth is written as its count of digits (one character) and the digits, so that string
    order is numeric order with no bound a line could reach (35 digits), and a depth of 0 (every
    event written without ``prev``) costs one character."""
    return depth_digits(depth) + normalize_ts(ts) + event_id


def depth_digits(depth: int) -> str:
    if not depth:
        return NO_DEPTH
    digits = str(min(depth, _MAX_DEPTH))
    return _COUNTS[len(digits)] + digits


def _ts_start(stamp: str) -> int:
    return 1 + _COUNT_OF.get(stamp[:1], 0) if stamp else 0


def ts_of(stamp: str) -> str:
    """The timestamp inside a fold stamp (``""`` for no stamp)."""
    start = _ts_start(stamp)
    return stamp[start : start + _TS_WIDTH]


def wall_of(stamp: str) -> str:
    """A fold stamp without its depth: ``ts + event id``, comparable with :func:`stamp_of`."""
    return stamp[_ts_start(stamp) :]


def id_of(stamp: str) -> str:
    """The event id at the end of a fold stamp."""
    return stamp[_ts_start(stamp) + _TS_WIDTH :]


def event_digest(event: AnyEvent | UnknownEvent) -> bytes:
    """SHA-256 of the event's canonical form: equal for lines that decode to the same event.

    Every field is in it, defaults too: a line that spells out a default (``"kind":"general"``)
    and one that leaves it out are the same event, and an event made in this process digests like
    the line it becomes once read back (its own line leaves out only the defaults it can tell)."""
    if isinstance(event, UnknownEvent):
        return hashlib.sha256(event.raw).digest()
    fields = {name: value for name, value in msgspec.structs.asdict(event).items() if value is not msgspec.UNSET}
    return hashlib.sha256(_CANONICAL.encode((event.__struct_config__.tag, fields))).digest()


_CANONICAL = msgspec.json.Encoder(order="sorted")

T = TypeVar("T")


def causal_time_order(items: Iterable[T], identity: Callable[[T], tuple[str, str, str]]) -> list[T]:
    """Items in the order a history tells them: by time (``ts``, then event id), except that an event
    comes after the event it names as ``prev`` (written after reading it), whatever the clocks said.

    ``identity`` gives an item's (event id, ``ts``, ``prev``). A ``prev`` that is not among the items
    does not hold its event back. This is the one order of every history a person reads (``eventmem
    log``, ``eventmem replay log``, REST ``.../history``, the web UI's History table)."""
    listed = list(items)
    ids = {identity(item)[0] for item in listed}
    waiting: dict[str, list[int]] = {}
    ready: list[tuple[str, int]] = []
    for index, item in enumerate(listed):
        event_id, ts, prev = identity(item)
        if prev and prev in ids and prev != event_id:
            waiting.setdefault(prev, []).append(index)
        else:
            ready.append((stamp_of(ts, event_id), index))
    heapq.heapify(ready)
    out: list[T] = []
    emitted: set[int] = set()
    while ready:
        _, index = heapq.heappop(ready)
        if index in emitted:
            continue
        emitted.add(index)
        out.append(listed[index])
        for follower in waiting.pop(identity(listed[index])[0], ()):
            event_id, ts, _ = identity(listed[follower])
            heapq.heappush(ready, (stamp_of(ts, event_id), follower))
    if len(out) < len(listed):  # a cycle of prevs (only a forged journal has one): the rest by time
        rest = [i for i in range(len(listed)) if i not in emitted]
        out += [listed[i] for i in sorted(rest, key=lambda i: stamp_of(identity(listed[i])[1], identity(listed[i])[0]))]
    return out
