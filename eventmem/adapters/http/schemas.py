"""The REST API's request and response models (msgspec), bounded by :data:`eventmem.core.limits.LIMITS`;
the OpenAPI document (:mod:`.openapi`) is generated from them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from eventmem.core.events import METADATA_KEY_PATTERN
from eventmem.core.limits import CONTENT_BYTES_CEILING, LIMITS
from eventmem.service import Hit, Link, Memory

__all__ = [
    "ContextRequest",
    "DeleteRequest",
    "EventPage",
    "HitList",
    "LinkRequest",
    "LinkResult",
    "MemoryResult",
    "Problem",
    "RecallRequest",
    "SaveRequest",
    "SaveResult",
    "SearchRequest",
    "SupersedeRequest",
    "SupersedeResult",
    "UpdateRequest",
]


Content = Annotated[str, msgspec.Meta(max_length=CONTENT_BYTES_CEILING)]
Title = Annotated[str, msgspec.Meta(max_length=int(LIMITS["title"].high))]
Summary = Annotated[str, msgspec.Meta(max_length=int(LIMITS["summary"].high))]
Tag = Annotated[str, msgspec.Meta(max_length=int(LIMITS["tag"].high))]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=int(LIMITS["tags"].high))]
Kind = Annotated[str, msgspec.Meta(max_length=64)]
Types = Annotated[list[Kind], msgspec.Meta(max_length=int(LIMITS["types"].high))]
Importance = Annotated[float, msgspec.Meta(ge=LIMITS["importance"].low, le=LIMITS["importance"].high)]
Ttl = Annotated[int, msgspec.Meta(ge=int(LIMITS["ttl_seconds"].low), le=int(LIMITS["ttl_seconds"].high))]
Reason = Annotated[str, msgspec.Meta(max_length=int(LIMITS["reason"].high))]
LinkContext = Annotated[str, msgspec.Meta(max_length=int(LIMITS["context"].high))]
By = Annotated[str, msgspec.Meta(max_length=int(LIMITS["by"].high))]
Query = Annotated[str, msgspec.Meta(max_length=int(LIMITS["query"].high))]
Limit = Annotated[int, msgspec.Meta(ge=int(LIMITS["limit"].low), le=int(LIMITS["limit"].high))]
Time = Annotated[str, msgspec.Meta(max_length=int(LIMITS["time"].high))]
MemoryId = Annotated[str, msgspec.Meta(max_length=int(LIMITS["memory_id"].high))]
ProjectName = Annotated[str, msgspec.Meta(max_length=int(LIMITS["project"].high))]
Relation = Annotated[str, msgspec.Meta(max_length=int(LIMITS["relation"].high))]
Strength = Annotated[float, msgspec.Meta(ge=LIMITS["strength"].low, le=LIMITS["strength"].high)]
MaxChars = Annotated[int, msgspec.Meta(ge=int(LIMITS["max_chars"].low), le=int(LIMITS["max_chars"].high))]
PerType = Annotated[int, msgspec.Meta(ge=int(LIMITS["per_type"].low), le=int(LIMITS["per_type"].high))]
MetadataKey = Annotated[
    str,
    msgspec.Meta(
        min_length=int(LIMITS["metadata_key"].low),
        max_length=int(LIMITS["metadata_key"].high),
        pattern=METADATA_KEY_PATTERN,
    ),
]
MetadataValue = Annotated[str, msgspec.Meta(max_length=int(LIMITS["metadata_value"].high))]
Metadata = Annotated[dict[MetadataKey, MetadataValue], msgspec.Meta(max_length=int(LIMITS["metadata"].high))]
Scope = Literal["project", "global"]
Mode = Literal["hybrid", "vector", "keyword"]


class SaveRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A new memory. A singleton type (project, architecture, current_task, coding_style) writes that section."""

    content: Content
    title: Title = ""
    summary: Summary | None = None
    tags: Tags = []
    type: Kind = "general"
    importance: Importance = 0.5
    ttl_seconds: Ttl | None = None
    scope: Scope = "project"
    by: By = ""
    metadata: Metadata = {}


class SaveResult(msgspec.Struct, kw_only=True):
    memory: Memory
    deduplicated: bool = False
    section: str = ""


class MemoryResult(msgspec.Struct, kw_only=True):
    """What a change to one memory (update, delete, restore, promote) answers: the memory as it is now,
    in the same ``{"memory": ...}`` envelope a save answers with."""

    memory: Memory


UpdateTtl = Annotated[int, msgspec.Meta(ge=0, le=int(LIMITS["ttl_seconds"].high))]


class UpdateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Fields to change; absent fields stay. ``ttl_seconds`` 0 (or null) makes the memory long-term,
    as the ``update_memory`` tool and ``eventmem update --ttl 0`` do."""

    content: Content | None = None
    title: Title | None = None
    summary: Summary | None = None
    tags: Tags | None = None
    type: Kind | None = None
    importance: Importance | None = None
    ttl_seconds: UpdateTtl | msgspec.UnsetType | None = msgspec.UNSET
    by: By = ""
    metadata: Metadata | None = None
    """Replaces the whole metadata."""


class DeleteRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Reason = ""
    by: By = ""


class SupersedeRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    content: Content
    title: Title | None = None
    summary: Summary | None = None
    tags: Tags | None = None
    type: Kind | None = None
    importance: Importance | None = None
    ttl_seconds: Ttl | None = None
    reason: Reason = ""
    by: By = ""


class Filters(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    types: Types = []
    tags: Tags = []
    scope: Literal["project", "global", "all"] | None = None
    min_importance: Importance | None = None
    created_after: Time | None = None
    created_before: Time | None = None
    include_superseded: bool = False


class SearchRequest(Filters, kw_only=True, forbid_unknown_fields=True):
    """Filters and an optional query; without a query, a listing sorted by importance or recency."""

    query: Query | None = None
    limit: Limit = 10
    mode: Mode = "hybrid"
    sort: Literal["relevance", "importance", "recent"] | None = None
    include_content: bool = False
    project: ProjectName | None = None


class RecallRequest(Filters, kw_only=True, forbid_unknown_fields=True):
    query: Query
    limit: Limit = 5
    mode: Mode = "hybrid"
    include_content: bool = False
    project: ProjectName | None = None
    """Only memories of this project (by name); ``*``: of every project the memory reaches."""


OldName = msgspec.Meta(extra_json_schema={"deprecated": True})


class HitList(msgspec.Struct, kw_only=True):
    """The memories found, as ``results``, the name the tools (``recall_memories``, ``search_memories``)
    and ``eventmem --json search`` give them; ``hits`` is their old REST name, kept for one release."""

    results: list[Hit]
    warnings: list[str] = []
    hits: Annotated[list[Hit], OldName] = []


class LinkRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A link from ``source_id`` to ``target_id`` (both required), named as the ``create_relationship`` tool
    names them; ``source`` and ``target`` are their old names, accepted for one release."""

    source_id: MemoryId = ""
    target_id: MemoryId = ""
    source: Annotated[MemoryId, OldName] = ""
    """Deprecated: the old name of ``source_id``."""
    target: Annotated[MemoryId, OldName] = ""
    """Deprecated: the old name of ``target_id``."""
    relation: Relation = "related_to"
    strength: Strength = 1.0
    context: LinkContext = ""
    by: By = ""


class LinkResult(msgspec.Struct, kw_only=True):
    link: Link
    created: bool


class SupersedeResult(msgspec.Struct, kw_only=True):
    memory: Memory
    """The new memory."""
    link: Link
    """Its ``supersedes`` link to the old one."""


class ContextRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    max_chars: MaxChars = 4000
    types: Types = []
    include_global: bool = True
    per_type: PerType = 0


class EventPage(msgspec.Struct, kw_only=True):
    """Journal events oldest first; ``next_cursor`` is null on the last page."""

    events: list[dict[str, Any]]
    next_cursor: str | None = None


class Problem(msgspec.Struct, kw_only=True):
    """An error (RFC 9457 problem details)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
