"""The golden journal, written by hand, decodes and folds to the same state forever.

``tests/golden/journal_v1.jsonl`` is never changed: if a change to the code makes this file fail,
the change breaks journals already committed to users' repositories. Every expected value below is
written out by hand, not computed by the code under test.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec

from eventmem.core.codec import UnknownEvent, decode_line, encode_event
from eventmem.core.events import (
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
from eventmem.journal.journal import Journal

GOLDEN = Path(__file__).parent / "golden" / "journal_v1.jsonl"

M1 = "01JGZ8M00000000000000000A1"
M2 = "01JGZ8M00000000000000000A2"
M3 = "01JGZ8M00000000000000000A3"
M4 = "01JGZ8M00000000000000000A4"
M5 = "01JGZ8M00000000000000000A5"
K1 = "01JGZ8K00000000000000000K1"
K2 = "01JGZ8K00000000000000000K2"

EXPECTED_TYPES = [
    MemorySaved,
    MemorySaved,
    MemoryUpdated,
    MemoryUpdated,
    MemoryPromoted,
    MemorySaved,
    MemoryExpired,
    MemorySaved,
    MemoryDeleted,
    MemoryUpdated,
    MemoryRestored,
    LinkAdded,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    UnknownEvent,
    MemorySaved,
]

EXPECTED_MEMORIES = {
    M1: {
        "status": "live",
        "kind": "decision",
        "scope": "project",
        # two updates share a timestamp: the greater event id (…04) wins the title
        "title": "Keyword search: FTS5",
        "content": "Keyword search uses SQLite FTS5 — no server to run.",
        "summary": "FTS5 for keywords.",
        "tags": ["search", "sqlite", "fts5"],
        "importance": 0.9,
        "ttl_seconds": None,
        "created_at": "2026-01-05T10:00:00.000000Z",
        "created_by": "claude-code",
        "updated_at": "2026-01-05T10:02:00.000000Z",
        "updated_by": "cli",
        "archived": False,
        "events": 3,
    },
    M2: {
        "status": "live",
        "kind": "fix",
        "scope": "project",
        "title": "Flaky lock test",
        "content": "The lock test was flaky: it slept instead of waiting on the file.",
        "summary": "",
        "tags": ["tests"],
        "importance": 0.5,
        # saved with a day's TTL, then promoted: long-term
        "ttl_seconds": None,
        "created_at": "2026-01-05T10:01:00.000000Z",
        "created_by": "cursor",
        "updated_at": "2026-01-05T10:04:00.000000Z",
        "updated_by": "",
        "archived": False,
        "events": 2,
    },
    M3: {
        "status": "expired",
        "kind": "todo",
        "scope": "project",
        "title": "",
        "content": "Écrire la doc du schéma.",
        "summary": "",
        "tags": [],
        "importance": 0.5,
        "ttl_seconds": 3600,
        "created_at": "2026-01-05T10:05:00.000000Z",
        "created_by": "claude-code",
        "updated_at": "2026-01-05T10:05:00.000000Z",
        "updated_by": "claude-code",
        "archived": True,
        "events": 2,
    },
    M4: {
        # deleted, edited while deleted (not resurrected by that), then restored
        "status": "live",
        "kind": "general",
        "scope": "project",
        "title": "",
        "content": "The staging database is on port 5434.",
        "summary": "",
        "tags": [],
        "importance": 0.5,
        "ttl_seconds": None,
        "created_at": "2026-01-05T10:06:00.000000Z",
        "created_by": "",
        "updated_at": "2026-01-05T10:08:00.000000Z",
        "updated_by": "cursor",
        "archived": False,
        "events": 4,
    },
    M5: {
        # the old save_context shape: "text" is read as content
        "status": "live",
        "kind": "convention",
        "scope": "project",
        "title": "",
        "content": "Commit messages say why, not what.",
        "summary": "",
        "tags": [],
        "importance": 0.5,
        "ttl_seconds": None,
        "created_at": "2026-01-05T09:59:00.000000Z",
        "created_by": "save_context",
        "updated_at": "2026-01-05T09:59:00.000000Z",
        "updated_by": "save_context",
        "archived": False,
        "events": 1,
    },
}

EXPECTED_LINKS = {
    K1: {
        "alive": True,
        "source": M2,
        "target": M1,
        "relation": "solves",
        "strength": 0.8,
        "context": "found while fixing the lock test",
        "added_by": "claude-code",
    },
    K2: {
        "alive": False,
        "source": M4,
        "target": M1,
        "relation": "related_to",
        "strength": 1.0,
        "context": "",
        "added_by": "",
    },
}


def golden_lines() -> list[bytes]:
    return GOLDEN.read_bytes().splitlines()


def fold(lines: list[bytes]) -> State:
    state = State()
    for line in lines:
        state.apply(decode_line(line))
    return state


def summarize(state: State) -> tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]:
    memories = {
        memory_id: {
            "status": record.status,
            "kind": record.kind,
            "scope": record.scope,
            "title": record.title,
            "content": record.content,
            "summary": record.summary,
            "tags": list(record.tags),
            "importance": record.importance,
            "ttl_seconds": record.ttl_seconds,
            "created_at": record.created_at,
            "created_by": record.created_by,
            "updated_at": record.updated_at,
            "updated_by": record.updated_by,
            "archived": record.archived,
            "events": record.events,
        }
        for memory_id, record in state.memories.items()
    }
    links = {
        link_id: {
            "alive": link.alive,
            "source": link.source,
            "target": link.target,
            "relation": link.relation,
            "strength": link.strength,
            "context": link.context,
            "added_by": link.added_by,
        }
        for link_id, link in state.links.items()
    }
    return memories, links


def test_golden_journal_is_complete_newline_terminated_utf8() -> None:
    data = GOLDEN.read_bytes()
    assert data.endswith(b"\n")
    data.decode("utf-8")
    assert len(golden_lines()) == 17


def test_every_golden_line_decodes_to_the_expected_event_type() -> None:
    decoded = [decode_line(line) for line in golden_lines()]
    assert [type(event) for event in decoded] == EXPECTED_TYPES
    assert [event.id for event in decoded] == [f"01JGZ8E00000000000000000{n:02d}" for n in range(1, 18)]


def test_golden_journal_scans_without_corruption_or_torn_tail() -> None:
    result = Journal.scan(GOLDEN, name="golden")
    assert result.corrupt == []
    assert result.torn_tail == 0
    assert result.end == GOLDEN.stat().st_size
    assert [type(event) for event in result.events] == EXPECTED_TYPES


def test_golden_journal_folds_to_the_expected_memories_and_links() -> None:
    state = fold(golden_lines())
    memories, links = summarize(state)
    assert memories == EXPECTED_MEMORIES
    assert links == EXPECTED_LINKS
    assert state.unknown == {"pinned": 1}
    assert len(state.seen) == 17
    assert {key: value for key, value in state.adjacency.items() if value} == {
        M1: {K1, K2},
        M2: {K1},
        M4: {K2},
    }
    assert [link.id for link in state.links_of(M1)] == [K1]
    assert state.links_of(M4) == []
    assert state.visible(M3) is None
    assert state.visible(M4) is not None


def test_golden_journal_folds_to_the_same_state_in_reverse_and_shuffled_order() -> None:
    lines = golden_lines()
    expected = summarize(fold(lines))
    assert summarize(fold(lines[::-1])) == expected
    shuffled = list(lines)
    random.Random(20260105).shuffle(shuffled)
    assert summarize(fold(shuffled)) == expected


def test_golden_known_lines_reencode_byte_for_byte() -> None:
    # field order, omitted defaults and raw UTF-8 are part of the on-disk format
    for line in golden_lines():
        event = decode_line(line)
        if isinstance(event, UnknownEvent) or b'"text":' in line:
            continue
        assert encode_event(event) == line + b"\n"


def test_golden_unknown_event_keeps_its_exact_bytes() -> None:
    line = golden_lines()[15]
    event = decode_line(line)
    assert isinstance(event, UnknownEvent)
    assert (event.type, event.id, event.ts) == ("pinned", "01JGZ8E0000000000000000016", "2026-01-05T11:30:00.000000Z")
    assert event.raw == line


def test_golden_old_style_saved_line_is_upcast_to_content() -> None:
    event = decode_line(golden_lines()[16])
    assert isinstance(event, MemorySaved)
    assert msgspec.to_builtins(event) == {
        "type": "saved",
        "id": "01JGZ8E0000000000000000017",
        "ts": "2026-01-05T09:59:00.000000Z",
        "by": "save_context",
        "memory": M5,
        "kind": "convention",
        "content": "Commit messages say why, not what.",
    }
