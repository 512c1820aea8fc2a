"""One event per line: encoding, decoding, upcasting and the policy for unknown types.

Encoders and decoders are built once and reused. A line that is valid JSON with a ``type`` this
version does not know decodes to :class:`UnknownEvent`, which keeps the exact bytes so that nothing
is lost when a journal is rewritten by compaction.

Decoding is total: any bytes either become an event whose every field is within the limits the
tools enforce (:mod:`eventmem.core.limits`, as constraints on the event Structs plus :func:`check_values`)
or raise :class:`LineError` with a short reason. Nothing recurses on the input: a line's nesting is
measured with a byte scan before anything decodes it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from eventmem.core.events import EVENT_TYPES, AnyEvent, Event, EventId, Timestamp
from eventmem.core.limits import CONTENT_BYTES_CEILING, MAX_LINE_BYTES, MAX_NESTING

__all__ = [
    "LineError",
    "UnknownEvent",
    "check_values",
    "decode_line",
    "decode_lines",
    "encode_event",
    "event_schema",
    "nesting_depth",
]

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(AnyEvent)
_raw_decoder: Final = msgspec.json.Decoder(dict[str, Any])
KNOWN_TYPES: Final = frozenset(t.__struct_config__.tag for t in EVENT_TYPES)


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """A valid line whose event type is newer than this version: kept, counted, not applied."""

    type: str
    id: str
    ts: str
    raw: bytes


class LineError(ValueError):
    """A line that is not a valid event (bad JSON, missing fields, wrong types, out of range)."""


class _Header(msgspec.Struct):
    """What every line must carry validly, whatever its type (an unknown type too)."""

    id: EventId
    ts: Timestamp


@dataclass(frozen=True, slots=True)
class Upcaster:
    """Rewrites an older shape of an event into the current one before typed decoding."""

    type: str
    marker: bytes
    upcast: Callable[[dict[str, Any]], dict[str, Any]]


def _saved_text_to_content(data: dict[str, Any]) -> dict[str, Any]:
    # The save_context design stored the memory body as "text"; it is "content" now.
    if "content" not in data and "text" in data:
        data["content"] = data.pop("text")
    return data


UPCASTERS: Final[tuple[Upcaster, ...]] = (Upcaster("saved", b'"text":', _saved_text_to_content),)


def encode_event(event: Event) -> bytes:
    """The journal line for an event, newline included. UTF-8 is written raw, keys in field order."""
    return _encoder.encode(event) + b"\n"


# -- nesting -------------------------------------------------------------------------------------

_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: Only these byte pairs open a third level (an object as a value, an array in an array); a line
#: without any is at most two deep. Strings can hold them too: then the exact count decides.
_MAY_NEST: Final = re.compile(rb":[ \t\r\n]*\{|[\[,][ \t\r\n]*[\[{]")


@functools.cache
def _openers() -> Any:
    """Each byte's step in depth: +1 for ``{`` and ``[``, -1 for ``}`` and ``]`` (numpy is imported
    here, when a line is first measured: a server answers initialize before it)."""
    import numpy as np

    table = np.zeros(256, np.int8)
    table[[ord("{"), ord("[")]] = 1
    table[[ord("}"), ord("]")]] = -1
    return table


def nesting_depth(line: bytes) -> int:
    """How deep the JSON of ``line`` nests, counted on its bytes outside strings (no recursion)."""
    if not _MAY_NEST.search(line):
        return min(2, line.count(b"{") + line.count(b"["))  # (at most two, and an upper bound)
    import numpy as np

    bare = _STRING.sub(b"", line)
    steps = _openers()[np.frombuffer(bare, np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def _too_deep(buffer: bytes) -> bool:
    """Whether any line of ``buffer`` nests deeper than :data:`MAX_NESTING`.

    Outside strings an opening bracket follows ``:``, ``,``, ``[``, whitespace or the line's
    start; a third level needs one after ``[``, ``,``, whitespace, or an object after ``:``. Only
    the lines holding such a pair (in a string or not) are measured exactly."""
    import numpy as np

    codes = np.frombuffer(buffer, np.uint8)
    openers = np.flatnonzero((codes[1:] | 32) == ord("{")) + 1  # "[" is "{" without bit 5
    before = codes[openers - 1]
    suspect = (before == ord("[")) | (before == ord(",")) | (before <= ord(" "))
    suspect |= (before == ord(":")) & (codes[openers] == ord("{"))
    checked = -1
    for position in openers[suspect & (before != ord("\n"))].tolist():
        if position <= checked:
            continue
        start = buffer.rfind(b"\n", 0, position) + 1
        end = buffer.find(b"\n", position)
        checked = len(buffer) if end < 0 else end
        if nesting_depth(buffer[start:checked]) > MAX_NESTING:
            return True
    return False


# -- what msgspec constraints cannot express -----------------------------------------------------


def check_values(event: AnyEvent | UnknownEvent) -> str:
    """Why a decoded event is still out of range (content over the byte ceiling: its constraint
    counts characters), or ``""`` when it is valid."""
    content = getattr(event, "content", None)
    if isinstance(content, str) and len(content) * 4 > CONTENT_BYTES_CEILING:
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > CONTENT_BYTES_CEILING:
            return f"content is {size:,} bytes, more than {CONTENT_BYTES_CEILING:,}"
    return ""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_DESCRIBED: Final = {
    "ts": "an ISO-8601 UTC time (a calendar day in the years 1970 to 9899)",
    "expires_at": "an ISO-8601 UTC time (a calendar day in the years 1970 to 9899)",
    "id": "an event id (letters, digits and :_.-)",
    "memory": "a memory id (letters, digits and :_.-)",
    "source": "a memory id (letters, digits and :_.-)",
    "target": "a memory id (letters, digits and :_.-)",
    "link": "a link id (letters, digits and :_.-)",
    "kind": "a known kind",
    "relation": "a lower_snake_case relation",
}
_AT: Final = re.compile(r" - at `\$\.?([^`]*)`$")


def _reason(exc: msgspec.ValidationError, data: dict[str, Any]) -> str:
    """A short reason naming the field and its value: ``ts '~~~~' is not an ISO-8601 UTC time``."""
    message = str(exc)
    found = _AT.search(message)
    if found is None:
        return message
    where, what = found.group(1), message[: found.start()]
    field = where.split("[", 1)[0].split(".", 1)[0]
    if ("matching regex" in what or "Invalid enum value" in what) and where == field:
        return f"{field} {_show(data.get(field))} is not {_DESCRIBED.get(field, 'valid')}"
    return f"{where}: {what[0].lower()}{what[1:]}" if what else where


# -- decoding ------------------------------------------------------------------------------------


def _decode_slow(line: bytes) -> AnyEvent | UnknownEvent:
    if len(line) > MAX_LINE_BYTES:
        raise LineError(f"a line of {len(line):,} bytes is longer than {MAX_LINE_BYTES:,}")
    if nesting_depth(line) > MAX_NESTING:
        raise LineError(f"nested deeper than {MAX_NESTING} levels")
    try:
        data = _raw_decoder.decode(line)
    except msgspec.ValidationError:
        raise LineError("not a JSON object") from None
    except msgspec.DecodeError as exc:
        raise LineError(f"not JSON: {exc}") from None
    kind = data.get("type")
    if not isinstance(kind, str):
        raise LineError("no 'type' field")
    for upcaster in UPCASTERS:
        if upcaster.type == kind and upcaster.marker in line:
            data = upcaster.upcast(data)
    try:
        if kind not in KNOWN_TYPES:
            header = msgspec.convert(data, _Header)
            decoded: AnyEvent | UnknownEvent = UnknownEvent(kind, header.id, header.ts, bytes(line))
        else:
            decoded = msgspec.convert(data, AnyEvent)
    except msgspec.ValidationError as exc:
        reason = _reason(exc, data)
        raise LineError(reason if kind in KNOWN_TYPES else f"event of unknown type {_show(kind)}: {reason}") from None
    problem = check_values(decoded)
    if problem:
        raise LineError(problem)
    return decoded


def decode_line(line: bytes) -> AnyEvent | UnknownEvent:
    """Decode one line (without its newline). Raises :class:`LineError` when it is not a valid event."""
    if len(line) <= MAX_LINE_BYTES and not any(u.marker in line for u in UPCASTERS) and not _too_deep(line):
        try:
            event: AnyEvent = _decoder.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        else:
            if not check_values(event):
                return event
    return _decode_slow(line)


def decode_lines(buffer: bytes) -> list[AnyEvent | UnknownEvent] | None:
    """Fast path for a buffer of complete lines, none longer than :data:`MAX_LINE_BYTES`; ``None``
    when any line needs the slow path (an upcast, an unknown type, an invalid line)."""
    if any(u.marker in buffer for u in UPCASTERS) or _too_deep(buffer):
        return None
    try:
        events: list[AnyEvent | UnknownEvent] = list(_decoder.decode_lines(buffer))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if not _all_valid(buffer, events):
        return None
    return events


def _all_valid(buffer: bytes, events: Sequence[AnyEvent | UnknownEvent]) -> bool:
    """:func:`check_values` of each event, paid only when a line is long enough to fail it."""
    if not _has_line_over(buffer, CONTENT_BYTES_CEILING):
        return True
    return not any(check_values(event) for event in events)


def _has_line_over(buffer: bytes, limit: int) -> bool:
    """Whether a line of ``buffer`` is longer than ``limit`` bytes: a few backward searches from
    window ends, not a pass over the bytes."""
    position = 0
    while len(buffer) - position > limit:
        newline = buffer.rfind(b"\n", position, position + limit + 1)
        if newline < 0:
            return True
        position = newline + 1
    return False


def event_schema() -> dict[str, Any]:
    """JSON Schema of a journal line, generated from the event Structs."""
    (ref,), components = msgspec.json.schema_components([AnyEvent], ref_template="#/$defs/{name}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "eventmem/events.schema.json",
        "title": "eventmem journal line",
        "description": "One line of a .eventmem journal segment: one event, compact JSON.",
        **ref,
        "$defs": components,
    }
