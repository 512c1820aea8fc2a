"""What every REST handler shares: problem+json errors, JSON answers, the project from the path,
the body decoded into its model, and the service called in a worker thread."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from eventmem.adapters.http.projects import Project, Projects
from eventmem.adapters.http.security import BodyTooLarge, problem_body
from eventmem.core.errors import (
    EventmemError,
    InvalidInput,
    LimitExceeded,
    MemoryGone,
    StaleVersion,
    UnknownMemory,
    told_to,
)
from eventmem.core.ids import canonical_id, looks_like_prefix
from eventmem.core.validation import check_metadata
from eventmem.service import MemoryService

__all__ = [
    "HTTP_WRITER",
    "Handler",
    "as_json",
    "body_of",
    "call",
    "handler",
    "problem",
    "whole",
]

log = logging.getLogger("eventmem.http")
T = TypeVar("T")
MEMORY_ID = re.compile(r"^[A-Za-z0-9:_.-]{1,128}$")
HTTP_WRITER = "http"


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    return Response(problem_body(status, title, detail), status, headers, media_type="application/problem+json")


def as_json(value: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status, headers, media_type="application/json")


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, StaleVersion):
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
    """A route's endpoint: the project from the path (the default project on an un-prefixed route),
    and errors as problem+json."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        try:
            project = projects.get(request.path_params.get("project"))
            memory_id = request.path_params.get("memory_id")
            if memory_id is not None:
                if not MEMORY_ID.match(memory_id):
                    raise InvalidInput("a memory id is 1 to 128 letters, digits and :_.-")
                # any case, or a unique prefix of 6 or more characters (the web UI's links and addresses);
                # only a prefix costs a look at the memory
                named = canonical_id(memory_id)
                if looks_like_prefix(named):
                    named = await call(project, lambda s: s.resolve_id(named, prefix=True))
                request.path_params["memory_id"] = named
            return await fn(request, project)
        except (EventmemError, BodyTooLarge, msgspec.ValidationError, msgspec.DecodeError) as exc:
            status, title = _status_of(exc)
            detail = told_to(exc, "http").replace("$.", "") or title
            for name, served in projects.by_name.items():  # no server paths in answers
                detail = detail.replace(str(served.root.root), f"<{name}>")
            return problem(status, title, detail)
        except ClientDisconnect:  # (gone, or cut off for sending too slowly: no one reads an answer)
            return problem(400, "Bad Request", "the request did not arrive whole")
        except Exception:
            log.exception("request %s %s failed", request.method, request.url.path)
            return problem(500, "Internal Server Error", "the request failed; the server log has the details")

    return endpoint


async def body_of(request: Request, model: type[T]) -> T:
    data = await request.body()
    try:
        return msgspec.json.decode(data or b"{}", type=model)
    except msgspec.ValidationError as exc:
        if "metadata`" in str(exc):  # name the entry that is wrong, and why, as the tools do
            given = msgspec.json.decode(data)
            if isinstance(given, dict) and given.get("metadata") is not None:
                check_metadata(given["metadata"])
        raise


def call(project: Project, fn: Callable[[MemoryService], T]) -> Awaitable[T]:
    return run_in_threadpool(lambda: fn(project.service()))


def whole(value: str | None, default: int) -> int:
    if value is None:
        return default
    if not (value.strip().isascii() and value.strip().isdigit()):
        raise InvalidInput(f"expected a whole number, got {value[:40]!r}")
    return int(value)
