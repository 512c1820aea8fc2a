"""The REST API's request and response models (msgspec), bounded by :data:`eventmem.limits.LIMITS`,
and the OpenAPI 3.1 document generated from them (committed as ``schema/openapi.json``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from eventmem import __version__
from eventmem.limits import CONTENT_BYTES_CEILING, LIMITS
from eventmem.service import Hit, Link, Memory

__all__ = [
    "ContextRequest",
    "DeleteRequest",
    "EventPage",
    "HitList",
    "LinkRequest",
    "LinkResult",
    "Problem",
    "RecallRequest",
    "SaveRequest",
    "SaveResult",
    "SearchRequest",
    "SupersedeRequest",
    "SupersedeResult",
    "UpdateRequest",
    "openapi_document",
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


class SaveResult(msgspec.Struct, kw_only=True):
    memory: Memory
    deduplicated: bool = False
    section: str = ""


class UpdateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Fields to change; absent fields stay. ``ttl_seconds`` null makes the memory long-term."""

    content: Content | None = None
    title: Title | None = None
    summary: Summary | None = None
    tags: Tags | None = None
    type: Kind | None = None
    importance: Importance | None = None
    ttl_seconds: Ttl | msgspec.UnsetType | None = msgspec.UNSET
    by: By = ""


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


class HitList(msgspec.Struct, kw_only=True):
    hits: list[Hit]
    warnings: list[str] = []


class LinkRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    source: MemoryId
    target: MemoryId
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


# -- the OpenAPI document ------------------------------------------------------------------------

BODIES: dict[str, type] = {
    "SaveRequest": SaveRequest,
    "UpdateRequest": UpdateRequest,
    "DeleteRequest": DeleteRequest,
    "SupersedeRequest": SupersedeRequest,
    "SearchRequest": SearchRequest,
    "RecallRequest": RecallRequest,
    "LinkRequest": LinkRequest,
    "ContextRequest": ContextRequest,
}
RESULTS: dict[str, type] = {
    "Memory": Memory,
    "SaveResult": SaveResult,
    "HitList": HitList,
    "LinkResult": LinkResult,
    "SupersedeResult": SupersedeResult,
    "EventPage": EventPage,
    "Problem": Problem,
}

Operation = tuple[str, str, str, str | None, str, list[tuple[str, str, str]]]
"""(method, path, summary, request body model, response model, [(parameter, in, type)])."""

TEXT_PARAMETER = {"maxLength": 200}
WHOLE_PARAMETER = {"minimum": 1, "maximum": 500}
CREATING = ("SaveResult", "LinkResult", "SupersedeResult")
"""Results of operations that answer 201 when they made something."""
P = ("project", "path", "string")
ID = ("memory_id", "path", "string")
OPERATIONS: list[Operation] = [
    ("get", "/projects", "The projects this server serves", None, "object", []),
    (
        "get",
        "/projects/{project}/memories",
        "Browse memories of any status: filtered, sorted, paged by offset",
        None,
        "object",
        [
            P,
            ("status", "query", "string"),
            ("type", "query", "string"),
            ("scope", "query", "string"),
            ("tag", "query", "string"),
            ("sort", "query", "string"),
            ("offset", "query", "integer"),
            ("limit", "query", "integer"),
        ],
    ),
    ("post", "/projects/{project}/memories", "Save a memory", "SaveRequest", "SaveResult", [P]),
    (
        "get",
        "/projects/{project}/memories/{memory_id}",
        "One memory (ETag: its version); as_of: a time, event id or git revision",
        None,
        "Memory",
        [P, ID, ("as_of", "query", "string"), ("any_status", "query", "string")],
    ),
    (
        "put",
        "/projects/{project}/memories/{memory_id}",
        "Update a memory (If-Match: its version, else 412)",
        "UpdateRequest",
        "Memory",
        [P, ID, ("if-match", "header", "string")],
    ),
    (
        "delete",
        "/projects/{project}/memories/{memory_id}",
        "Delete a memory (it can be restored)",
        None,
        "Memory",
        [P, ID, ("reason", "query", "string"), ("if-match", "header", "string")],
    ),
    (
        "post",
        "/projects/{project}/memories/{memory_id}/restore",
        "Restore a deleted or expired memory",
        "DeleteRequest",
        "Memory",
        [P, ID],
    ),
    (
        "post",
        "/projects/{project}/memories/{memory_id}/promote",
        "Make a memory long-term",
        "DeleteRequest",
        "Memory",
        [P, ID],
    ),
    (
        "post",
        "/projects/{project}/memories/{memory_id}/supersede",
        "Replace a memory by a corrected one",
        "SupersedeRequest",
        "SupersedeResult",
        [P, ID],
    ),
    (
        "get",
        "/projects/{project}/memories/{memory_id}/history",
        "The memory's events, what each changed",
        None,
        "object",
        [P, ID],
    ),
    (
        "get",
        "/projects/{project}/memories/{memory_id}/related",
        "Memories linked to this one",
        None,
        "object",
        [P, ID, ("depth", "query", "integer")],
    ),
    (
        "post",
        "/projects/{project}/memories/search",
        "Hybrid search with filters, or a listing",
        "SearchRequest",
        "HitList",
        [P],
    ),
    (
        "post",
        "/projects/{project}/memories/recall",
        "Recall memories relevant to a query",
        "RecallRequest",
        "HitList",
        [P],
    ),
    ("post", "/projects/{project}/relationships", "Link two memories", "LinkRequest", "LinkResult", [P]),
    ("get", "/projects/{project}/stats", "Counts of the project's journal", None, "object", [P]),
    (
        "get",
        "/projects/{project}/dashboard",
        "Counts by type, scope, project and tag; saves per day; recent activity",
        None,
        "object",
        [P],
    ),
    (
        "get",
        "/projects/{project}/events",
        "Journal events, paged and filtered",
        None,
        "EventPage",
        [
            P,
            ("memory", "query", "string"),
            ("type", "query", "string"),
            ("since", "query", "string"),
            ("until", "query", "string"),
            ("by", "query", "string"),
            ("cursor", "query", "string"),
            ("limit", "query", "integer"),
        ],
    ),
    (
        "get",
        "/projects/{project}/as_of",
        "Every memory as it was at a time, event id or git revision",
        None,
        "object",
        [P, ("when", "query", "string")],
    ),
    ("get", "/projects/{project}/graph", "Linked memories and their links", None, "object", [P]),
    ("get", "/projects/{project}/settings", "The effective settings and where each came from", None, "object", [P]),
    ("get", "/context/{project}", "The session-start bundle", None, "object", [P]),
    ("post", "/context/{project}", "The session-start bundle, with options", "ContextRequest", "object", [P]),
]


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``/api/v1``, from the models above."""
    _, components = msgspec.json.schema_components(
        [*BODIES.values(), *RESULTS.values()], ref_template="#/components/schemas/{name}"
    )
    paths: dict[str, dict[str, Any]] = {}
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for method, path, summary, body, result, params in OPERATIONS:
        schema = {"type": "object"} if result == "object" else {"$ref": f"#/components/schemas/{result}"}
        operation: dict[str, Any] = {
            "summary": summary,
            "operationId": f"{method}_{path.strip('/').replace('/', '_').replace('{', '').replace('}', '')}",
            "parameters": [
                {
                    "name": name,
                    "in": where,
                    "required": where == "path",
                    "schema": {
                        "type": kind,
                        **({"maxLength": 200} if kind == "string" else {"minimum": 1, "maximum": 500}),
                    },
                }
                for name, where, kind in params
            ],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
                **(
                    {"201": {"description": "Created", "content": {"application/json": {"schema": schema}}}}
                    if result in CREATING
                    else {}
                ),
                "4XX": {"description": "A refused request", "content": problem},
            },
        }
        if body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
            }
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "eventmem REST API", "version": __version__},
        "servers": [{"url": "/api/v1"}],
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
        "paths": paths,
    }
