"""One event per line: encoding, decoding, upcasting and the policy for unknown types.

Encoders and decoders are built once and reused. A line that is valid JSON with a ``type`` this
version does not know decodes to :class:`UnknownEvent`, which keeps the exact bytes so that nothing
is lost when a journal is rewritten by compaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from eventmem.events import EVENT_TYPES, AnyEvent, Event

__all__ = ["LineError", "UnknownEvent", "decode_line", "decode_lines", "encode_event", "event_schema"]

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
    """A line that is not a valid event (bad JSON, missing fields, wrong types)."""


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


def _decode_slow(line: bytes) -> AnyEvent | UnknownEvent:
    try:
        data = _raw_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise LineError(f"not JSON: {exc}") from None
    kind = data.get("type")
    if not isinstance(kind, str):
        raise LineError("no 'type' field")
    for upcaster in UPCASTERS:
        if upcaster.type == kind and upcaster.marker in line:
            data = upcaster.upcast(data)
    if kind not in KNOWN_TYPES:
        event_id, ts = data.get("id"), data.get("ts")
        if not isinstance(event_id, str) or not isinstance(ts, str):
            raise LineError(f"event of unknown type {kind!r} has no string 'id' and 'ts'")
        return UnknownEvent(kind, event_id, ts, bytes(line))
    try:
        event: AnyEvent = msgspec.convert(data, AnyEvent)
        return event
    except msgspec.ValidationError as exc:
        raise LineError(str(exc)) from None


def decode_line(line: bytes) -> AnyEvent | UnknownEvent:
    """Decode one line (without its newline). Raises :class:`LineError` when it is not an event."""
    if UPCASTERS and any(u.marker in line for u in UPCASTERS):
        return _decode_slow(line)
    try:
        return _decoder.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _decode_slow(line)


def decode_lines(buffer: bytes) -> list[AnyEvent | UnknownEvent] | None:
    """Fast path for a buffer of complete lines; ``None`` when any line needs the slow path."""
    if any(u.marker in buffer for u in UPCASTERS):
        return None
    try:
        events: list[AnyEvent | UnknownEvent] = list(_decoder.decode_lines(buffer))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return events


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
