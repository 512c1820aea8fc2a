"""One event per line: the shape of a line, round trips, upcasting and unknown types."""

from __future__ import annotations

import json

import msgspec
import pytest

from eventmem.core.codec import LineError, UnknownEvent, decode_line, decode_lines, encode_event
from eventmem.core.events import (
    EVENT_TYPES,
    Event,
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
from eventmem.core.state import State

TS = "2026-03-01T12:00:00.000000Z"

#: One fully populated event of every type (no field left at its default).
FULL_EVENTS: list[Event] = [
    MemorySaved(
        id="01JN0000000000000000000001",
        ts=TS,
        by="claude-code",
        memory="01JNM000000000000000000001",
        kind="decision",
        scope="global",
        title="Naïve title",
        content='Déjà vu — «quotes» and emoji 🧠 and a "quote" and a\nnewline',
        summary="short",
        tags=("a", "b"),
        importance=0.75,
        ttl_seconds=3600,
    ),
    MemoryUpdated(
        id="01JN0000000000000000000002",
        ts=TS,
        by="cli",
        memory="01JNM000000000000000000001",
        kind="fix",
        title="t",
        content="c",
        summary="s",
        tags=("x",),
        importance=0.25,
        ttl_seconds=60,
    ),
    MemoryUpdated(
        id="01JN0000000000000000000003", ts=TS, by="x", memory="01JNM000000000000000000001", ttl_seconds=None
    ),
    MemoryPromoted(id="01JN0000000000000000000004", ts=TS, by="x", memory="01JNM000000000000000000001", reason="r"),
    MemoryDeleted(id="01JN0000000000000000000005", ts=TS, by="x", memory="01JNM000000000000000000001", reason="r"),
    MemoryRestored(id="01JN0000000000000000000006", ts=TS, by="x", memory="01JNM000000000000000000001", reason="r"),
    MemoryExpired(id="01JN0000000000000000000007", ts=TS, by="x", memory="01JNM000000000000000000001", expires_at=TS),
    LinkAdded(
        id="01JN0000000000000000000008",
        ts=TS,
        by="x",
        link="01JNK000000000000000000001",
        source="01JNM000000000000000000001",
        target="01JNM000000000000000000002",
        relation="solves",
        strength=0.5,
        context="because",
    ),
    LinkRemoved(id="01JN0000000000000000000009", ts=TS, by="x", link="01JNK000000000000000000001", reason="r"),
    MemoryArchived(
        id="01JN0000000000000000000010",
        ts=TS,
        by="compaction",
        memories=("01JNM000000000000000000001", "01JNM000000000000000000002"),
        segment="archive/2026-03.jsonl",
        events=7,
    ),
]

#: One event of every type with only its required fields.
MINIMAL_EVENTS: list[Event] = [
    MemorySaved(id="e1", ts=TS, memory="m", content="c"),
    MemoryUpdated(id="e2", ts=TS, memory="m"),
    MemoryPromoted(id="e3", ts=TS, memory="m"),
    MemoryDeleted(id="e4", ts=TS, memory="m"),
    MemoryRestored(id="e5", ts=TS, memory="m"),
    MemoryExpired(id="e6", ts=TS, memory="m"),
    LinkAdded(id="e7", ts=TS, link="k", source="m", target="n"),
    LinkRemoved(id="e8", ts=TS, link="k"),
    MemoryArchived(id="e9", ts=TS, memories=("m",), segment="archive/a.jsonl"),
]


def test_the_sample_events_cover_every_event_type() -> None:
    assert {type(e) for e in FULL_EVENTS} == set(EVENT_TYPES)
    assert {type(e) for e in MINIMAL_EVENTS} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", FULL_EVENTS + MINIMAL_EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_type_round_trips_through_its_line(event: Event) -> None:
    line = encode_event(event)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert decode_line(line[:-1]) == event
    assert decode_lines(line) == [event]


@pytest.mark.parametrize("event", FULL_EVENTS, ids=lambda e: type(e).__name__)
def test_a_line_is_compact_json_with_type_first_then_id_ts_by(event: Event) -> None:
    line = encode_event(event)[:-1]
    keys = list(json.loads(line))
    assert keys[:4] == ["type", "id", "ts", "by"]
    assert line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")).encode()


def test_keys_follow_the_field_order_of_the_struct() -> None:
    line = encode_event(FULL_EVENTS[0])
    assert list(json.loads(line)) == [
        "type",
        "id",
        "ts",
        "by",
        "memory",
        "kind",
        "scope",
        "title",
        "content",
        "summary",
        "tags",
        "importance",
        "ttl_seconds",
    ]


def test_utf8_is_written_raw_not_as_unicode_escapes() -> None:
    line = encode_event(FULL_EVENTS[0])
    assert b"\\u" not in line
    assert "Déjà vu — «quotes» and emoji 🧠".encode() in line
    assert b'\\"quote\\"' in line
    assert b"\\n" in line  # a newline inside a string is escaped: one event stays one line


@pytest.mark.parametrize("event", MINIMAL_EVENTS, ids=lambda e: type(e).__name__)
def test_fields_left_at_their_default_are_omitted_from_the_line(event: Event) -> None:
    data = json.loads(encode_event(event))
    required = {f.name for f in msgspec.structs.fields(event) if f.required}
    assert set(data) == {"type"} | required


def test_an_update_writes_only_the_fields_it_changes_and_an_explicit_null_ttl() -> None:
    line = encode_event(MemoryUpdated(id="e", ts=TS, memory="m", title="new", ttl_seconds=None))
    assert (
        line
        == b'{"type":"updated","id":"e","ts":"' + TS.encode() + b'","memory":"m","title":"new","ttl_seconds":null}\n'
    )
    decoded = decode_line(line[:-1])
    assert isinstance(decoded, MemoryUpdated)
    assert decoded.content is msgspec.UNSET
    assert decoded.ttl_seconds is None


def test_an_old_saved_line_with_text_is_upcast_to_content() -> None:
    line = b'{"type":"saved","id":"e1","ts":"' + TS.encode() + b'","memory":"m","text":"old body","tags":["t"]}'
    event = decode_line(line)
    assert event == MemorySaved(id="e1", ts=TS, memory="m", content="old body", tags=("t",))
    assert decode_lines(line + b"\n") is None  # the fast path hands it to the upcaster


def test_the_upcaster_leaves_a_line_that_already_has_content_alone() -> None:
    line = b'{"type":"saved","id":"e1","ts":"' + TS.encode() + b'","memory":"m","content":"new","text":"old"}'
    event = decode_line(line)
    assert isinstance(event, MemorySaved)
    assert event.content == "new"


def test_text_inside_a_content_string_does_not_trigger_the_upcaster() -> None:
    event = MemorySaved(id="e1", ts=TS, memory="m", content='the key "text": was renamed')
    assert decode_line(encode_event(event)[:-1]) == event


def test_an_unknown_event_type_keeps_its_exact_bytes() -> None:
    line = '{"type":"pinned","id":"e9","ts":"2030-01-01T00:00:00.000000Z","memory":"m","until":"ünïcode",  "x":[1,2]}'
    raw = line.encode()
    event = decode_line(raw)
    assert isinstance(event, UnknownEvent)
    assert (event.type, event.id, event.ts) == ("pinned", "e9", "2030-01-01T00:00:00.000000Z")
    assert event.raw == raw
    assert decode_lines(raw + b"\n") is None


def test_an_unknown_event_is_counted_by_the_fold_and_not_applied() -> None:
    raw = b'{"type":"pinned","id":"e9","ts":"2030-01-01T00:00:00.000000Z","memory":"m"}'
    other = b'{"type":"pinned","id":"e10","ts":"2030-01-01T00:00:00.000000Z","memory":"m"}'
    state = State()
    assert state.apply(decode_line(raw)) == ()
    state.apply(decode_line(other))
    state.apply(decode_line(raw))  # the same event seen twice counts once
    assert state.unknown == {"pinned": 2}
    assert state.memories == {}
    assert state.visible("m") is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"saved","id":"e1","ts":"2026-01-01T00:00:00.000000Z","memory":"m"}',  # no content
        b'{"type":"saved","id":"e1","ts":"2026-01-01T00:00:00.000000Z","content":"c"}',  # no memory
        b'{"type":"deleted","ts":"2026-01-01T00:00:00.000000Z","memory":"m"}',  # no id
        b'{"type":"deleted","id":"e1","memory":"m"}',  # no ts
        b'{"type":"linked","id":"e1","ts":"2026-01-01T00:00:00.000000Z","link":"k","source":"m"}',  # no target
        b'{"type":"archived","id":"e1","ts":"2026-01-01T00:00:00.000000Z","memories":["m"]}',  # no segment
        b'{"type":"pinned","ts":"2026-01-01T00:00:00.000000Z"}',  # unknown type without an id
    ],
)
def test_a_line_missing_a_required_field_raises_line_error(line: bytes) -> None:
    with pytest.raises(LineError):
        decode_line(line)
    assert decode_lines(line + b"\n") is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"saved","id":1,"ts":"2026-01-01T00:00:00.000000Z","memory":"m","content":"c"}',
        b'{"type":"saved","id":"e","ts":"2026-01-01T00:00:00.000000Z","memory":"m","content":"c","tags":"a"}',
        b'{"type":"saved","id":"e","ts":"2026-01-01T00:00:00.000000Z","memory":"m","content":"c","scope":"x"}',
        b'{"id":"e","ts":"2026-01-01T00:00:00.000000Z"}',
        b'{"type":null,"id":"e","ts":"2026-01-01T00:00:00.000000Z"}',
        b"[1,2,3]",
        b"not json at all",
        b"<<<<<<< HEAD",
        b'{"type":"saved","id":"e1"',
        b"\xff\xfe\x00garbage",
    ],
)
def test_a_line_that_is_not_an_event_raises_line_error(line: bytes) -> None:
    with pytest.raises(LineError):
        decode_line(line)


def test_decode_lines_reads_a_buffer_of_many_lines_in_order() -> None:
    buffer = b"".join(encode_event(event) for event in FULL_EVENTS)
    assert decode_lines(buffer) == FULL_EVENTS
