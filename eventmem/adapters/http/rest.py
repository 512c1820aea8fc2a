"""The REST routes of ``/api/v1``: thin handlers over the service's public methods.

Each handler names its project in the path, decodes its body into a model of :mod:`.schemas`
(bounded by the shared limits), calls the service in a worker thread, and answers JSON; an error
the caller can fix is a problem+json answer with the service's message, anything else a bare 500.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eventmem.adapters.http.openapi import unprefixed
from eventmem.adapters.http.projects import Project, Projects
from eventmem.adapters.http.responses import (
    HTTP_WRITER,
    Handler,
    as_json,
    body_of,
    call,
    handler,
    problem,
    whole,
)
from eventmem.adapters.http.rest_views import VIEW_ROUTES
from eventmem.adapters.http.schemas import (
    ContextRequest,
    DeleteRequest,
    HitList,
    LinkRequest,
    LinkResult,
    MemoryResult,
    RecallRequest,
    SaveRequest,
    SaveResult,
    SearchRequest,
    SupersedeRequest,
    UpdateRequest,
)
from eventmem.core.errors import InvalidInput, UnknownMemory
from eventmem.core.events import KINDS
from eventmem.core.query_rules import Filters
from eventmem.service import MemoryService
from eventmem.service.browsing import (
    memories_as_of,
    memory_any_status,
    memory_version,
)

__all__ = ["rest_routes"]


def _etag(version: str) -> dict[str, str]:
    return {"ETag": f'"{version}"'} if version else {}


def _accepted(service: MemoryService, memory_id: str, if_match: str | None) -> list[str] | None:
    """The versions ``If-Match`` accepts (``None``: any; an unknown memory is refused here), for the
    service to check under the journal lock."""
    if if_match is None:
        return None
    if not memory_version(service, memory_id):
        raise UnknownMemory(memory_id)
    wanted = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    return None if "*" in wanted else wanted


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
            metadata=body.metadata,
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

    any_status = request.query_params.get("any_status", "") in ("1", "true")

    def run(s: MemoryService) -> tuple[Any, str]:
        memory = memory_any_status(s, memory_id) if any_status else s.get(memory_id)
        return memory, memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(memory, _etag(version))


async def update_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, UpdateRequest)
    if_match = request.headers.get("if-match")

    def run(s: MemoryService) -> tuple[Any, str]:
        with project.write_lock:
            memory = s.update(
                memory_id,
                content=body.content,
                title=body.title,
                summary=body.summary,
                tags=body.tags,
                kind=body.type,
                importance=body.importance,
                ttl_seconds="unchanged" if body.ttl_seconds is msgspec.UNSET else (body.ttl_seconds or None),
                by=body.by or HTTP_WRITER,
                if_version=_accepted(s, memory_id, if_match),
                metadata=body.metadata,
            )
            return memory, memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(MemoryResult(memory=memory), _etag(version))


async def delete_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    reason = request.query_params.get("reason", "")
    by = request.query_params.get("by", "") or HTTP_WRITER
    if_match = request.headers.get("if-match")

    def run(s: MemoryService) -> tuple[Any, str]:
        with project.write_lock:
            memory = s.delete(memory_id, reason=reason, by=by, if_version=_accepted(s, memory_id, if_match))
            return memory, memory_version(s, memory_id)

    memory, version = await call(project, run)
    return as_json(MemoryResult(memory=memory), _etag(version))


async def restore_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, DeleteRequest)
    memory, _ = await call(project, lambda s: s.restore(memory_id, reason=body.reason, by=body.by or HTTP_WRITER))
    return as_json(MemoryResult(memory=memory), _etag(await call(project, lambda s: memory_version(s, memory_id))))


async def promote_memory(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    body = await body_of(request, DeleteRequest)
    memory, _ = await call(project, lambda s: s.promote(memory_id, reason=body.reason, by=body.by or HTTP_WRITER))
    return as_json(MemoryResult(memory=memory))


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


async def related(request: Request, project: Project) -> Response:
    memory_id = request.path_params["memory_id"]
    depth = whole(request.query_params.get("depth"), 1)
    any_status = request.query_params.get("any_status", "") in ("1", "true")

    def run(s: MemoryService) -> list[dict[str, Any]]:
        # a deleted or expired memory asked with any_status has no live links to show (not 410): a page that
        # read the memory live an instant before someone deleted it gets an answer, not an error
        if any_status and memory_any_status(s, memory_id).status != "live":
            return []
        return s.related(memory_id, depth=depth)

    return as_json({"memory": memory_id, "related": await call(project, run)})


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
        return HitList(results=hits, warnings=s.warnings(), hits=hits)

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
            project=body.project,
        )
        return HitList(results=hits, warnings=s.warnings(), hits=hits)

    return as_json(await call(project, run))


def _end(new: str, old: str, name: str) -> str:
    """One end of a link from its name or its old name (``source`` for ``source_id``)."""
    if new and old and new != old:
        raise InvalidInput(f"{name}_id and {name} (its old name) name different memories: give {name}_id alone")
    if not (new or old):
        raise InvalidInput(
            f"{name}_id is required: the id of the memory the link goes {'from' if name == 'source' else 'to'}"
        )
    return new or old


async def link(request: Request, project: Project) -> Response:
    b = await body_of(request, LinkRequest)
    source, target = _end(b.source_id, b.source, "source"), _end(b.target_id, b.target, "target")
    made, created = await call(
        project,
        lambda s: s.link(source, target, b.relation, strength=b.strength, context=b.context, by=b.by or HTTP_WRITER),
    )
    return as_json(LinkResult(link=made, created=created), status=201 if created else 200)


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


def rest_routes(projects: Projects) -> list[Route]:
    """The routes of ``/api/v1`` (without the prefix)."""

    async def list_projects(request: Request) -> Response:
        return as_json({"projects": list(projects.by_name), "default": projects.default.name, "types": list(KINDS)})

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
        (m + "/{memory_id}/related", related, ["GET"]),
        ("/projects/{project}/relationships", link, ["POST"]),
        ("/context/{project}", context, ["GET", "POST"]),
        *VIEW_ROUTES,
    ]
    routes = [Route("/projects", list_projects, methods=["GET"])]
    routes += [Route(path, handler(projects, fn), methods=methods) for path, fn, methods in table]
    routes += [Route(unprefixed(path), handler(projects, fn), methods=methods) for path, fn, methods in table]
    return routes
