"""What the service returns: memories, saves, links and search hits, and how they are built from the fold's records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.core.stamps import ts_of

if TYPE_CHECKING:
    from eventmem.service.lifecycle import Step

__all__ = ["Hit", "Link", "Memory", "Saved", "link_view", "related_entry"]


class Memory(msgspec.Struct, kw_only=True):
    """A memory as tools and the CLI show it."""

    id: str
    kind: str
    scope: str
    title: str
    content: str
    summary: str
    tags: list[str]
    importance: float
    ttl_seconds: int | None
    created_at: str
    updated_at: str
    expires_at: str | None
    created_by: str
    updated_by: str
    status: str
    superseded: bool = False
    access_count: int = 0
    """Accesses counted in this clone's local usage stream (reads, recalls, duplicate saves)."""
    promoted: bool = False
    """Made long-term by a ``promoted`` event (important at save, often used, or by hand)."""
    project: str = ""
    """The project it belongs to: this one for project memories; for global ones, where they were saved."""
    metadata: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
    """What it carries that has no field of its own (an import's times, authors, original type);
    left out when it has none, so that the usual memory costs an agent no extra keys."""
    source: str | msgspec.UnsetType = msgspec.UNSET
    """Its original id in the store it was imported from; left out when it has none."""


class Saved(msgspec.Struct, kw_only=True):
    """What a save did: the memory, and whether it already existed (a duplicate save)."""

    memory: Memory
    deduplicated: bool = False
    section: str = ""
    """For a singleton type (project, architecture, current_task, coding_style): the project-context
    section the save wrote (``currentTask``); its memory is the section's, with its well-known id."""


class Link(msgspec.Struct, kw_only=True):
    """A relationship as tools show it."""

    id: str
    source: str
    target: str
    relation: str
    strength: float
    context: str
    created_at: str
    created_by: str


class Hit(msgspec.Struct, kw_only=True):
    """One search result."""

    id: str
    score: float
    kind: str
    scope: str
    project: str = ""
    """The project the memory is of: the one it was saved in (as the store that answered names it:
    the folder's name in process, its name in the database with ``serve --store``); for a global
    memory, the folder of the project it was saved from; empty when not known."""
    title: str
    summary: str
    tags: list[str]
    importance: float
    created_at: str
    updated_at: str
    vector_score: float
    keyword_score: float
    content: str | None = None


def link_view(link: LinkRecord) -> Link:
    return Link(
        id=link.id,
        source=link.source,
        target=link.target,
        relation=link.relation,
        strength=link.strength,
        context=link.context,
        created_at=ts_of(link.added_stamp),
        created_by=link.added_by,
    )


def related_entry(step: Step, record: MemoryRecord) -> dict[str, Any]:
    """One memory a walk reached, as ``related`` returns it: how it was reached, and what it is."""
    return {
        "id": step.memory,
        "depth": step.depth,
        "relation": step.relation,
        "direction": step.direction,
        "strength": step.strength,
        "context": step.context,
        "link": step.via,
        "from": step.parent,
        "kind": record.kind,
        "scope": record.scope,
        "title": record.title,
        "summary": record.summary,
        "importance": record.importance,
    }
