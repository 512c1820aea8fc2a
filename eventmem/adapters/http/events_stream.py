"""Server-sent events for the web UI: a ``change`` event per project whenever its journal changes,
whichever process wrote it (this server, another agent's stdio server, a ``git pull``).

One watcher per project (:func:`eventmem.journal.watcher.watch_journal`) tells every open stream (the UI
then asks again, and every REST call catches up first); a stream also sends a comment now and then
so that proxies keep it open.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from eventmem.adapters.http.projects import Project, Projects
from eventmem.core.errors import InvalidInput
from eventmem.journal.watcher import watch_journal

__all__ = ["Changes"]

log = logging.getLogger("eventmem.http")
KEEPALIVE_SECONDS = 15.0


class Changes:
    """The open streams per project, and the watchers feeding them."""

    def __init__(self, projects: Projects) -> None:
        self.projects = projects
        self.listeners: dict[str, set[MemoryObjectSendStream[dict[str, Any]]]] = {}
        self.counter = 0
        self.stop = anyio.Event()

    async def run(self, tasks: TaskGroup) -> None:
        """Start a watcher per project in ``tasks`` (stopped by :meth:`close`)."""
        for project in self.projects.by_name.values():
            tasks.start_soon(self._watch, project)

    async def _watch(self, project: Project) -> None:
        await anyio.to_thread.run_sync(project.ready.wait)
        service = project.service_
        if service is None:
            return

        async def changed(paths: set[str] | None) -> None:
            await self.publish(project.name)  # readers catch up on their next call

        await watch_journal(project.root.root / ".eventmem", changed, self.stop)

    async def publish(self, name: str) -> None:
        self.counter += 1
        message = {"project": name, "seq": self.counter}
        for stream in list(self.listeners.get(name, ())):
            try:
                stream.send_nowait(message)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # a slow reader: it will fetch everything on the next change anyway

    def close(self) -> None:
        self.stop.set()

    def routes(self) -> list[Route]:
        """The stream of a named project, and of the default one (``/stream``)."""

        async def stream(request: Request) -> Response:
            try:
                project = self.projects.get(request.path_params.get("project"))
            except InvalidInput as exc:
                body = json.dumps({"title": "Not Found", "status": 404, "detail": str(exc)})
                return Response(body, 404, media_type="application/problem+json")
            return StreamingResponse(
                self._events(project.name), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
            )

        return [
            Route("/projects/{project}/stream", stream, methods=["GET"]),
            Route("/stream", stream, methods=["GET"]),
        ]

    async def _events(self, name: str) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self.listeners.setdefault(name, set()).add(send)
        try:
            yield "retry: 2000\n: connected\n\n"
            while not self.stop.is_set():
                with anyio.move_on_after(KEEPALIVE_SECONDS):
                    message = await receive.receive()
                    yield f"event: change\ndata: {json.dumps(message)}\n\n"
                    continue
                yield ": keep-alive\n\n"
        finally:
            self.listeners.get(name, set()).discard(send)
            send.close()
            receive.close()
