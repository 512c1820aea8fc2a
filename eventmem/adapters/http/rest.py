"""The REST routes of ``/api/v1``: thin handlers over the service's public methods.

Each handler names its project in the path, decodes its body into a model of :mod:`.schemas`
(bounded by the shared limits), calls the service in a worker thread, and answers JSON; an error
the caller can fix is a problem+json answer with the service's message, anything else a bare 500.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eventmem.adapters.http.projects import Project, Projects
from eventmem.adapters.http.schemas import (
    ContextRequest,
    DeleteRequest,
    EventPage,
    HitList,
    LinkRequest,
    LinkResult,
    RecallRequest,
    SaveRequest,
    SaveResult,
    SearchRequest,
    SupersedeRequest,
    UpdateRequest,
)
from eventmem.adapters.http.security import BodyTooLarge, problem_body
from eventmem.errors import EventmemError, InvalidInput, LimitExceeded, MemoryGone, UnknownMemory
from eventmem.query import Filters
from eventmem.service import MemoryService
from eventmem.service_events import (
    dashboard,
    effective_settings,
    events_page,
    graph,
    memories_as_of,
    memory_history,
    memory_version,
)

__all__ = ["PreconditionFailed", "problem", "rest_routes"]

log = logging.getLogger("eventmem.http")
T = TypeVar("T")
MEMORY_ID = re.compile(r"^[A-Za-z0-9:_.-]{1,128}$")
HTTP_WRITER = "http"


class PreconditionFailed(EventmemError):
    """``If-Match`` names a version the memory no longer has."""


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    return Response(problem_body(status, title, detail), status, headers, media_type="application/problem+json")


def as_json(value: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status, headers, media_type="application/json")


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, PreconditionFailed):
        return 412, "Precondition Failed"
    if isinstance(exc, MemoryGone):
        return 410, "Gone"
    if isinstance(exc, UnknownMemory | KeyError):
        return 404, "Not Found"
    if isinstance(exc, LimitExceeded | BodyTooLarge):
        return 413, "Content Too Large"
    if isinstance(exc, InvalidInput | msgspec.ValidationError | msgspec.DecodeError):
        return 400, "Bad Request"
    return 503, "Service Unavailable"


Handler = Callable[[Request, Project], Awaitable[Response]]


def handler(projects: Projects, fn: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A route's endpoint: the project from the path, and errors as problem+json."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        try:
            project = projects.get(request.path_params["project"])
            memory_id = request.path_params.get("memory_id")
            if memory_id is not None and not MEMORY_ID.match(memory_id):
                raise InvalidInput("a memory id is 1 to 128 letters, digits and :_.-")
            return await fn(request, project)
        except (EventmemError, BodyTooLarge, msgspec.ValidationError, msgspec.DecodeError) as exc:
            status, title = _status_of(exc)
            return problem(status, title, str(exc).replace("$.", "") or title)
        except Exception:
            log.exception("request %s %s failed", request.method, request.url.path)
            return problem(500, "Internal Server Error", "the request failed; the server log has the details")

    return endpoint


async def body_of(request: Request, model: type[T]) -> T:
    data = await request.body()
    return msgspec.json.decode(data or b"{}", type=model)


def call(project: Project, fn: Callable[[MemoryService], T]) -> Awaitable[T]:
    return run_in_threadpool(lambda: fn(project.service()))


def _etag(version: str) -> dict[str, str]:
    return {"ETag": f'"{version}"'} if version else {}


def _check_version(service: MemoryService, memory_id: str, if_match: str | None) -> None:
    if if_match is None:
        return
    current = memory_version(service, memory_id)
    if not current:
        raise UnknownMemory(memory_id)
    wanted = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    if "*" not in wanted and current not in wanted:
        raise PreconditionFailed(
            f"memory {memory_id} changed since that version (now {current}); read it again, then retry the change"
        )


def _filters(body: SearchRequest | RecallRequest) -> Filters:
    try:
        return Filters(
            kinds=tuple(t.strip().lower() for t in body.types),
            tags=tuple(t.strip().lower() for t in body.tags),
            scope=body.scope,
            min_importance=body.min_importance,
            created_after=body.created_after,
            created_before=body.created_before,
            include_superseded=body.include_superseded,
        )
    except (msgspec.ValidationError, TypeError) as exc:
        raise InvalidInput(f"bad filter: {exc}") from exc


# -- handlers ------------------------------------------------------------------------------------


async def save(request: Request, project: Project) -> Response:
    body = await body_of(request, SaveRequest)

    def run(s: MemoryService) -> tuple[SaveResult, str]:
        saved = s.save_result(
            body.content,
            title=body.title,
            summary=body.summary,
            tags=body.tags,
            kind=body.type,
            importance=body.importance,
            ttl_seconds=body.ttl_seconds,
            scope=body.scope,
            by=body.by or HTTP_WRITER,
        )
        result = SaveResult(memory=saved.memory, deduplicated=saved.deduplicated, section=saved.section)
        return result, memory_version(s, saved.memory.id)

    result, version = await call(project, run)
    return as_json(result, _etag(version), 200 if result.deduplicated else 201)


async def get_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    when = request.query_params.get("as_of")
    if when:
        description, views = await call(project, lambda s: memories_as_of(s, when))
        found = next((v for v in views if v["id"] == memory_id), None)
        if found is None:
            return problem(404, "Not Found", f"memory {memory_id} did not exist {description}")
        return as_json({"as_of": description, "memory": found})

    def run(s: MemoryService) -> tuple[Any, str]:
        return s.get(memory_id), memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(memory, _etag(version))


async def update_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, UpdateRequest)
    if_match = request.headers.get("if-match")

    def run(s: MemoryService) -> tuple[Any, str]:
        with project.write_lock:
            _check_version(s, memory_id, if_match)
            memory = s.update(
                memory_id,
                content=body.content,
                title=body.title,
                summary=body.summary,
                tags=body.tags,
                kind=body.type,
                importance=body.importance,
                ttl_seconds="unchanged" if body.ttl_seconds is msgspec.UNSET else body.ttl_seconds,
                by=body.by or HTTP_WRITER,
            )
            return memory, memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(memory, _etag(version))


async def delete_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    reason = request.query_params.get("reason", "")
    by = request.query_params.get("by", "") or HTTP_WRITER
    if_match = request.headers.get("if-match")

    def run(s: MemoryService) -> tuple[Any, str]:
        with project.write_lock:
            _check_version(s, memory_id, if_match)
            memory = s.delete(memory_id, reason=reason, by=by)
            return memory, memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(memory, _etag(version))


async def restore_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, DeleteRequest)
    memory, _ = await call(project, lambda s: s.restore(memory_id, reason=body.reason, by=body.by or HTTP_WRITER))
    return as_json(memory, _etag(await call(project, lambda s: memory_version(s, memory_id))))


async def promote_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, DeleteRequest)
    memory, _ = await call(project, lambda s: s.promote(memory_id, reason=body.reason, by=body.by or HTTP_WRITER))
    return as_json(memory)


async def supersede_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    b = await body_of(request, SupersedeRequest)

    def run(s: MemoryService) -> dict[str, Any]:
        memory, link = s.supersede(
            memory_id,
            b.content,
            title=b.title,
            summary=b.summary,
            tags=b.tags,
            kind=b.type,
            importance=b.importance,
            ttl_seconds=b.ttl_seconds,
            reason=b.reason,
            by=b.by or HTTP_WRITER,
        )
        return {"memory": memory, "link": link}

    return as_json(await call(project, run), status=201)


async def history_of(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]

    found = await call(project, lambda s: memory_history(s, memory_id))
    return as_json({"memory": memory_id, "history": found})


async def related(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    depth = _int(request.query_params.get("depth"), 1)
    found = await call(project, lambda s: s.related(memory_id, depth=depth))
    return as_json({"memory": memory_id, "related": found})


def _int(value: str | None, default: int) -> int:
    if value is None:
        return default
    if not value.strip().isdigit():
        raise InvalidInput(f"expected a whole number, got {value[:40]!r}")
    return int(value)


async def search(request: Request, project: Project) -> Response:
    body = await body_of(request, SearchRequest)

    def run(s: MemoryService) -> HitList:
        hits = s.search(
            body.query,
            limit=body.limit,
            filters=_filters(body),
            project=body.project,
            mode=body.mode,
            sort=body.sort,
            include_content=body.include_content,
            access=True,
        )
        return HitList(hits=hits, warnings=s.warnings())

    return as_json(await call(project, run))


async def recall(request: Request, project: Project) -> Response:
    body = await body_of(request, RecallRequest)

    def run(s: MemoryService) -> HitList:
        hits = s.recall(
            body.query,
            limit=body.limit,
            filters=_filters(body),
            include_content=body.include_content,
            mode=body.mode,
            access=True,
        )
        return HitList(hits=hits, warnings=s.warnings())

    return as_json(await call(project, run))


async def link(request: Request, project: Project) -> Response:
    b = await body_of(request, LinkRequest)
    made, created = await call(
        project,
        lambda s: s.link(
            b.source, b.target, b.relation, strength=b.strength, context=b.context, by=b.by or HTTP_WRITER
        ),
    )
    return as_json(LinkResult(link=made, created=created), status=201 if created else 200)


async def stats(request: Request, project: Project) -> Response:
    data = await call(project, lambda s: s.stats())
    data.pop("root", None)  # no server paths in answers
    data["corrupt_lines"] = [{k: v for k, v in line.items() if k != "segment"} for line in data["corrupt_lines"]]
    return as_json(data)


async def context(request: Request, project: Project) -> Response:
    body = await body_of(request, ContextRequest) if request.method == "POST" else ContextRequest()
    return as_json(
        await call(
            project,
            lambda s: s.context(
                max_chars=body.max_chars, types=body.types, include_global=body.include_global, per_type=body.per_type
            ),
        )
    )


async def events(request: Request, project: Project) -> Response:
    q = request.query_params
    types = [t for t in q.getlist("type") if t] or None
    limit = _int(q.get("limit"), 100)

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


def rest_routes(projects: Projects) -> list[Route]:
    """The routes of ``/api/v1`` (without the prefix)."""

    async def list_projects(request: Request) -> Response:
        return as_json({"projects": list(projects.by_name), "default": projects.default.name})

    m = "/projects/{project}/memories"
    table: list[tuple[str, Handler, list[str]]] = [
        (m, save, ["POST"]),
        (m + "/search", search, ["POST"]),
        (m + "/recall", recall, ["POST"]),
        (m + "/{memory_id}", get_memory, ["GET"]),
        (m + "/{memory_id}", update_memory, ["PUT"]),
        (m + "/{memory_id}", delete_memory, ["DELETE"]),
        (m + "/{memory_id}/restore", restore_memory, ["POST"]),
        (m + "/{memory_id}/promote", promote_memory, ["POST"]),
        (m + "/{memory_id}/supersede", supersede_memory, ["POST"]),
        (m + "/{memory_id}/history", history_of, ["GET"]),
        (m + "/{memory_id}/related", related, ["GET"]),
        ("/projects/{project}/relationships", link, ["POST"]),
        ("/projects/{project}/stats", stats, ["GET"]),
        ("/projects/{project}/dashboard", dashboard_of, ["GET"]),
        ("/projects/{project}/events", events, ["GET"]),
        ("/projects/{project}/as_of", at, ["GET"]),
        ("/projects/{project}/graph", graph_of, ["GET"]),
        ("/projects/{project}/settings", settings_of, ["GET"]),
        ("/context/{project}", context, ["GET", "POST"]),
    ]
    routes = [Route("/projects", list_projects, methods=["GET"])]
    routes += [Route(path, handler(projects, fn), methods=methods) for path, fn, methods in table]
    return routes
