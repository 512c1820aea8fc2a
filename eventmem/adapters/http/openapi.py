"""The OpenAPI 3.1 document of ``/api/v1``, generated from the models of :mod:`.schemas`: served at
``/api/v1/openapi.json`` and committed as ``schema/openapi.json`` (``tools/openapi.py``)."""

from __future__ import annotations

from typing import Any

import msgspec

from eventmem import __version__
from eventmem.adapters.http.schemas import (
    ContextRequest,
    DeleteRequest,
    EventPage,
    HitList,
    LinkRequest,
    LinkResult,
    MemoryResult,
    Problem,
    RecallRequest,
    SaveRequest,
    SaveResult,
    SearchRequest,
    SupersedeRequest,
    SupersedeResult,
    UpdateRequest,
)
from eventmem.service import Memory

__all__ = ["OPERATIONS", "openapi_document", "unprefixed"]

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
    "MemoryResult": MemoryResult,
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
        "MemoryResult",
        [P, ID, ("if-match", "header", "string")],
    ),
    (
        "delete",
        "/projects/{project}/memories/{memory_id}",
        "Delete a memory (it can be restored)",
        None,
        "MemoryResult",
        [P, ID, ("reason", "query", "string"), ("if-match", "header", "string")],
    ),
    (
        "post",
        "/projects/{project}/memories/{memory_id}/restore",
        "Restore a deleted or expired memory",
        "DeleteRequest",
        "MemoryResult",
        [P, ID],
    ),
    (
        "post",
        "/projects/{project}/memories/{memory_id}/promote",
        "Make a memory long-term",
        "DeleteRequest",
        "MemoryResult",
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
        "Memories linked to this one (with any_status, none for a deleted or expired one instead of 410)",
        None,
        "object",
        [P, ID, ("depth", "query", "integer"), ("any_status", "query", "string")],
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


STREAM = "/projects/{project}/stream"
"""The change stream: server-sent events, not JSON (the UI listens to it)."""
DEFAULT_PROJECT = " (the default project: the only one served, or the one --default-project names)"


def unprefixed(path: str) -> str:
    """A project-named path for the default project: ``/projects/{project}/memories`` is ``/memories``."""
    return path.removeprefix("/projects/{project}").removesuffix("/{project}")


def _for_default_project(operations: list[Operation]) -> list[Operation]:
    """Each project-named operation again, without the project: the routes the team-memory design names
    (``POST /memories``, ``POST /relationships`` ...), answered for the default project."""
    return [
        (method, unprefixed(path), summary + DEFAULT_PROJECT, body, result, [p for p in params if p != P])
        for method, path, summary, body, result, params in operations
        if P in params
    ]


def _stream_operation(problem: dict[str, Any], *, named: bool = True) -> dict[str, Any]:
    return {
        "summary": "Server-sent events: one `change` event each time the project's journal changes"
        + ("" if named else DEFAULT_PROJECT),
        "description": (
            "Each event is `event: change` with `data` a JSON object `{project, seq}`: something changed, ask again. "
            "A comment is sent now and then to keep the connection open; `retry` is 2000 ms."
        ),
        "operationId": "get_projects_project_stream" if named else "get_stream",
        "parameters": [
            {"name": "project", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}
        ]
        if named
        else [],
        "responses": {
            "200": {
                "description": "An endless stream",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            "4XX": {"description": "A refused request", "content": problem},
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``/api/v1``, from the models above."""
    _, components = msgspec.json.schema_components(
        [*BODIES.values(), *RESULTS.values()], ref_template="#/components/schemas/{name}"
    )
    paths: dict[str, dict[str, Any]] = {}
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for method, path, summary, body, result, params in OPERATIONS + _for_default_project(OPERATIONS):
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
    paths[STREAM] = {"get": _stream_operation(problem)}
    paths[unprefixed(STREAM)] = {"get": _stream_operation(problem, named=False)}
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
