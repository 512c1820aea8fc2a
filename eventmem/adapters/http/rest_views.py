"""REST routes over what the journal keeps: a memory's history, the events in pages, the memory as of
a moment, the listing of every status, the graph, the dashboard, the stats and the settings."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from eventmem.adapters.http.projects import Project
from eventmem.adapters.http.responses import as_json, call, whole
from eventmem.adapters.http.schemas import EventPage
from eventmem.core.errors import InvalidInput
from eventmem.service import MemoryService
from eventmem.service.browsing import (
    dashboard,
    effective_settings,
    events_page,
    graph,
    list_memories,
    memories_as_of,
    memory_history,
)

__all__ = ["VIEW_ROUTES"]


async def history_of(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]

    found = await call(project, lambda s: memory_history(s, memory_id))
    return as_json({"memory": memory_id, "history": found})


async def stats(request: Request, project: Project) -> Response:
    data = await call(project, lambda s: s.stats())
    data.pop("root", None)  # no server paths in answers
    data["corrupt_lines"] = [{k: v for k, v in line.items() if k != "segment"} for line in data["corrupt_lines"]]
    return as_json(data)


async def events(request: Request, project: Project) -> Response:
    q = request.query_params
    types = [t for t in q.getlist("type") if t] or None
    limit = whole(q.get("limit"), 100)

    def run(s: MemoryService) -> EventPage:
        page, cursor = events_page(
            s,
            memory=q.get("memory") or None,
            types=types,
            since=q.get("since") or None,
            until=q.get("until") or None,
            writer=q.get("by"),
            cursor=q.get("cursor") or None,
            limit=limit,
        )
        return EventPage(events=page, next_cursor=cursor)

    return as_json(await call(project, run))


async def at(request: Request, project: Project) -> Response:
    when = request.query_params.get("when", "")
    if not when:
        raise InvalidInput("when is required: a time (2026-01-05T10:02:00Z), an event id or a git revision")
    description, views = await call(project, lambda s: memories_as_of(s, when))
    return as_json({"as_of": description, "memories": views})


async def graph_of(request: Request, project: Project) -> Response:
    return as_json(await call(project, graph))


async def dashboard_of(request: Request, project: Project) -> Response:
    return as_json(await call(project, dashboard))


async def settings_of(request: Request, project: Project) -> Response:
    return as_json(await call(project, effective_settings))


def _floats(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise InvalidInput(f"expected a number, got {value[:40]!r}") from None


async def listing(request: Request, project: Project) -> Response:
    q = request.query_params
    offset, limit = whole(q.get("offset"), 0), whole(q.get("limit"), 50)

    def run(s: MemoryService) -> dict[str, object]:
        page, total = list_memories(
            s,
            status=q.get("status") or "live",
            kinds=[t for t in q.getlist("type") if t] or None,
            scope=q.get("scope") or None,
            tags=[t.strip().lower() for t in q.getlist("tag") if t.strip()] or None,
            min_importance=_floats(q.get("min_importance")),
            created_after=q.get("created_after") or None,
            created_before=q.get("created_before") or None,
            updated_after=q.get("updated_after") or None,
            updated_before=q.get("updated_before") or None,
            sort=q.get("sort") or "recent",
            offset=offset,
            limit=limit,
        )
        return {"memories": page, "total": total, "offset": offset, "limit": limit}

    return as_json(await call(project, run))


VIEW_ROUTES = [
    ("/projects/{project}/memories", listing, ["GET"]),
    ("/projects/{project}/memories/{memory_id}/history", history_of, ["GET"]),
    ("/projects/{project}/stats", stats, ["GET"]),
    ("/projects/{project}/dashboard", dashboard_of, ["GET"]),
    ("/projects/{project}/events", events, ["GET"]),
    ("/projects/{project}/as_of", at, ["GET"]),
    ("/projects/{project}/graph", graph_of, ["GET"]),
    ("/projects/{project}/settings", settings_of, ["GET"]),
]
