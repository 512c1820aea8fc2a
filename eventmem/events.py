"""The journal's vocabulary: every change to memory is one of these past-tense facts.

Events are frozen msgspec Structs in one tagged union. A line in the journal is the compact JSON
of one event, its tag first, so a reader of a pull request sees what happened, to which memory,
when and by whom. Rules for evolving them (msgspec schema evolution, see the README):

- new fields always get a default, and a default is never changed once released
  (``omit_defaults`` leaves defaults out of the line, so a changed default would rewrite history);
- a renamed field goes through an upcaster in :mod:`eventmem.codec`;
- a type this version does not know is kept verbatim, skipped by projectors and counted.

This module does no IO.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

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


class Event(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    tag_field="type",
    forbid_unknown_fields=False,
):
    """Fields every event carries, written first on the line after the type tag."""

    id: str
    """Globally unique, time-sortable event id (a ULID)."""
    ts: str
    """UTC time the event happened, ISO-8601 with microseconds and a ``Z``."""
    by: str = ""
    """Who wrote it: the MCP client's name, ``cli``, or a user-given name."""
    prev: str = ""
    """The id of the event that was the head of this memory (for ``unlinked`` and ``linked``, of
    this link) when the writer wrote this one: the fold orders an event after the one it names,
    whatever the stamps say (see :mod:`eventmem.state`). Empty for the first event of a memory."""


class MemorySaved(Event, frozen=True, kw_only=True, tag="saved"):
    """A memory was created (or, for a well-known id such as a section, written anew)."""

    memory: str
    kind: str = "general"
    scope: Scope = "project"
    title: str = ""
    content: str
    summary: str = ""
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    ttl_seconds: int | None = None
    """Seconds until the memory expires; ``None`` means long-term."""
    project: str = ""
    """For a ``global`` memory: the name of the project it was saved from (empty otherwise)."""


class MemoryUpdated(Event, frozen=True, kw_only=True, tag="updated"):
    """Some fields of a memory changed; fields left out are unchanged."""

    memory: str
    kind: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    summary: str | UnsetType = UNSET
    tags: tuple[str, ...] | UnsetType = UNSET
    importance: float | UnsetType = UNSET
    ttl_seconds: int | UnsetType | None = UNSET


class MemoryPromoted(Event, frozen=True, kw_only=True, tag="promoted"):
    """A memory became long-term: its TTL no longer applies."""

    memory: str
    reason: str = ""


class MemoryDeleted(Event, frozen=True, kw_only=True, tag="deleted"):
    """A memory was deleted. A tombstone: later updates do not bring it back, a restore does."""

    memory: str
    reason: str = ""


class MemoryRestored(Event, frozen=True, kw_only=True, tag="restored"):
    """A deleted or expired memory was brought back."""

    memory: str
    reason: str = ""


class MemoryExpired(Event, frozen=True, kw_only=True, tag="expired"):
    """A memory's TTL ran out; written by compaction, never a silent delete."""

    memory: str
    expires_at: str = ""


class LinkAdded(Event, frozen=True, kw_only=True, tag="linked"):
    """A typed, directed relationship between two memories."""

    link: str
    source: str
    target: str
    relation: str = "related_to"
    strength: float = 1.0
    context: str = ""


class LinkRemoved(Event, frozen=True, kw_only=True, tag="unlinked"):
    """A relationship was removed."""

    link: str
    reason: str = ""


class MemoryArchived(Event, frozen=True, kw_only=True, tag="archived"):
    """Compaction moved the history of these memories into an immutable archive segment."""

    memories: tuple[str, ...]
    segment: str
    events: int = 0


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
