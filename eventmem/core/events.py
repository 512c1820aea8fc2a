"""The journal's vocabulary: every change to memory is one of these past-tense facts.

Events are frozen msgspec Structs in one tagged union. A line in the journal is the compact JSON
of one event, its tag first, so a reader of a pull request sees what happened, to which memory,
when and by whom. Rules for evolving them (msgspec schema evolution, see the README):

- new fields always get a default, and a default is never changed once released
  (``omit_defaults`` leaves defaults out of the line, so a changed default would rewrite history);
- a renamed field goes through an upcaster in :mod:`eventmem.core.codec`;
- a type this version does not know is kept verbatim, skipped by projectors and counted.

This module does no IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from eventmem.core.limits import CONTENT_BYTES_CEILING, limit

__all__ = [
    "KINDS",
    "RELATIONS",
    "SCOPES",
    "AnyEvent",
    "Event",
    "LinkAdded",
    "LinkRemoved",
    "MemoryArchived",
    "MemoryDeleted",
    "MemoryExpired",
    "MemoryPromoted",
    "MemoryRestored",
    "MemorySaved",
    "MemoryUpdated",
]

Scope = Literal["project", "global"]

#: Memory kinds. The first group is the team-memory model, the second the project-context sections
#: of the shared project-memory protocol. Free-form kinds are refused so filters stay meaningful.
KINDS: Final = (
    "general",
    "decision",
    "fix",
    "error",
    "solution",
    "problem",
    "code_pattern",
    "workflow",
    "convention",
    "task",
    # project-context sections
    "project",
    "architecture",
    "current_task",
    "todo",
    "coding_style",
    "recent_change",
    "conversation_summary",
)
SCOPES: Final = ("project", "global")
#: Well-known relation kinds; any other lower_snake_case relation is accepted as free-form.
RELATIONS: Final = ("solves", "causes", "related_to", "supersedes", "depends_on")


def _text(name: str) -> Meta:
    bound = limit(name)
    return Meta(min_length=int(bound.low), max_length=int(bound.high))


def _whole(name: str) -> Meta:
    bound = limit(name)
    return Meta(ge=int(bound.low), le=int(bound.high))


_YEAR = "(?:19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2})"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DAY = "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
#: ISO-8601 with a zone (``Z`` or an offset), a day in the calendar of a year from 1970 to 9899 (so
#: that no accepted time plus the longest TTL passes the year 9999).
TIMESTAMP_PATTERN: Final = (
    f"^(?:{_YEAR}-{_DAY}|(?={_YEAR}){_LEAP_YEAR}-02-29)"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:0[0-9]|1[0-4]):[0-5][0-9])$"
)
ID_PATTERN: Final = r"^[A-Za-z0-9:_.\-]+$"
RELATION_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
METADATA_KEY_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"

Timestamp = Annotated[str, Meta(pattern=TIMESTAMP_PATTERN)]
EventId = Annotated[str, _text("event_id"), Meta(pattern=ID_PATTERN)]
MemoryId = Annotated[str, _text("memory_id"), Meta(pattern=ID_PATTERN)]
PrevId = Annotated[str, Meta(max_length=int(limit("event_id").high), pattern=ID_PATTERN.replace("+$", "*$"))]
"""An event id, or empty."""
if TYPE_CHECKING:  # (a str to the code that builds events; checked by the service before that)
    Kind = str
else:  # a Literal to the decoder: a set lookup, several times cheaper than a pattern
    Kind = Literal[KINDS]
Title = Annotated[str, _text("title")]
Summary = Annotated[str, _text("summary")]
Content = Annotated[str, Meta(max_length=CONTENT_BYTES_CEILING)]
"""(Characters here; the decoder also checks the UTF-8 bytes against the ceiling.)"""
Tags = Annotated[tuple[Annotated[str, _text("tag")], ...], _text("tags")]
Unit = Annotated[float, Meta(ge=0, le=1)]
Ttl = Annotated[int, _whole("ttl_seconds")]
Reason = Annotated[str, _text("reason")]
Metadata = Annotated[
    dict[
        Annotated[str, _text("metadata_key"), Meta(pattern=METADATA_KEY_PATTERN)],
        Annotated[str, _text("metadata_value")],
    ],
    _text("metadata"),
]
"""What a memory carries that has no field of its own (an import's times, authors, original type)."""
Source = Annotated[str, _text("source")]


class Event(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    tag_field="type",
    forbid_unknown_fields=False,
):
    """Fields every event carries, written first on the line after the type tag."""

    id: EventId
    """Globally unique, time-sortable event id (a ULID)."""
    ts: Timestamp
    """UTC time the event happened, ISO-8601 with microseconds and a ``Z``."""
    by: Annotated[str, _text("by")] = ""
    """Who wrote it: the MCP client's name, ``cli``, or a user-given name."""
    prev: PrevId = ""
    """The id of the event that was the head of this memory (for ``unlinked`` and ``linked``, of
    this link) when the writer wrote this one: the fold orders an event after the one it names,
    whatever the stamps say (see :mod:`eventmem.core.state`). Empty for the first event of a memory."""


class MemorySaved(Event, frozen=True, kw_only=True, tag="saved"):
    """A memory was created (or, for a well-known id such as a section, written anew)."""

    memory: MemoryId
    kind: Kind = "general"
    scope: Scope = "project"
    title: Title = ""
    content: Content
    summary: Summary = ""
    tags: Tags = ()
    importance: Unit = 0.5
    ttl_seconds: Ttl | None = None
    """Seconds until the memory expires; ``None`` means long-term."""
    project: Annotated[str, _text("project")] = ""
    """For a ``global`` memory: the name of the project it was saved from (empty otherwise)."""
    metadata: Metadata = {}
    source: Source = ""
    """The memory's original id in the store it was imported from (``server-memory:Alice``), or empty."""
    created_at: Annotated[str, Meta(pattern=f"^$|{TIMESTAMP_PATTERN}")] = ""
    """For an import: when the memory was made, as the store it came from says (its ``created_at``
    then; ``ts`` stays when it was imported). Empty: when this event was written."""
    updated_at: Annotated[str, Meta(pattern=f"^$|{TIMESTAMP_PATTERN}")] = ""
    """For an import: when the store it came from last changed it. Empty: as ``created_at``."""


class MemoryUpdated(Event, frozen=True, kw_only=True, tag="updated"):
    """Some fields of a memory changed; fields left out are unchanged."""

    memory: MemoryId
    kind: Kind | UnsetType = UNSET
    title: Title | UnsetType = UNSET
    content: Content | UnsetType = UNSET
    summary: Summary | UnsetType = UNSET
    tags: Tags | UnsetType = UNSET
    importance: Unit | UnsetType = UNSET
    ttl_seconds: Ttl | UnsetType | None = UNSET
    metadata: Metadata | UnsetType = UNSET
    """Replaces the whole metadata."""


class MemoryPromoted(Event, frozen=True, kw_only=True, tag="promoted"):
    """A memory became long-term: its TTL no longer applies."""

    memory: MemoryId
    reason: Reason = ""


class MemoryDeleted(Event, frozen=True, kw_only=True, tag="deleted"):
    """A memory was deleted. A tombstone: later updates do not bring it back, a restore does."""

    memory: MemoryId
    reason: Reason = ""


class MemoryRestored(Event, frozen=True, kw_only=True, tag="restored"):
    """A deleted or expired memory was brought back."""

    memory: MemoryId
    reason: Reason = ""


class MemoryExpired(Event, frozen=True, kw_only=True, tag="expired"):
    """A memory's TTL ran out; written by compaction, never a silent delete."""

    memory: MemoryId
    expires_at: Annotated[str, Meta(pattern=f"^$|{TIMESTAMP_PATTERN}")] = ""


class LinkAdded(Event, frozen=True, kw_only=True, tag="linked"):
    """A typed, directed relationship between two memories."""

    link: MemoryId
    source: MemoryId
    target: MemoryId
    relation: Annotated[str, _text("relation"), Meta(pattern=RELATION_PATTERN)] = "related_to"
    strength: Unit = 1.0
    context: Annotated[str, _text("context")] = ""


class LinkRemoved(Event, frozen=True, kw_only=True, tag="unlinked"):
    """A relationship was removed."""

    link: MemoryId
    reason: Reason = ""


class MemoryArchived(Event, frozen=True, kw_only=True, tag="archived"):
    """Compaction moved the history of these memories into an immutable archive segment."""

    memories: Annotated[tuple[MemoryId, ...], _text("archived_memories")]
    segment: Annotated[str, _text("segment")]
    events: Annotated[int, Meta(ge=0)] = 0


AnyEvent = (
    MemorySaved
    | MemoryUpdated
    | MemoryPromoted
    | MemoryDeleted
    | MemoryRestored
    | MemoryExpired
    | LinkAdded
    | LinkRemoved
    | MemoryArchived
)

EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    MemorySaved,
    MemoryUpdated,
    MemoryPromoted,
    MemoryDeleted,
    MemoryRestored,
    MemoryExpired,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
)


def memory_ids(event: Event) -> tuple[str, ...]:
    """The memories an event is about (a link names two; an archive names many)."""
    match event:
        case LinkAdded(source=source, target=target):
            return (source, target)
        case MemoryArchived(memories=memories):
            return memories
        case LinkRemoved():
            return ()
        case _:
            memory: str = getattr(event, "memory", "")
            return (memory,) if memory else ()
