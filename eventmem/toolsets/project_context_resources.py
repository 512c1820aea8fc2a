"""The ``.ai`` view as MCP resources (``memory://ai/<file>``), and which of them changed after a write."""

from __future__ import annotations

import hashlib
import logging
import weakref

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from eventmem.context.project_context import ProjectContext
from eventmem.context.reading import is_section_memory
from eventmem.context.render import render_section
from eventmem.context.sections import SECTIONS, Section
from eventmem.errors import InvalidInput
from eventmem.mcp_app import _RUNNING, App
from eventmem.service import MemoryService

__all__ = ["AI_URI", "register_resources", "view_updates"]

log = logging.getLogger("eventmem.mcp")

AI_URI = "memory://ai/{file}"
_NOTIFIED: weakref.WeakKeyDictionary[MemoryService, dict[str, str]] = weakref.WeakKeyDictionary()


def _service() -> MemoryService:
    # static resources get no Context in the SDK: use the app the lifespan opened
    if not _RUNNING:
        raise ResourceNotFoundError("the server is not running")
    return _RUNNING[-1].service


def register_resources(server: MCPServer[App]) -> None:
    """``memory://ai/<file>``: each section rendered as its ``.ai/`` markdown file."""

    def add(section: Section) -> None:
        def read() -> str:
            return render_section(section, ProjectContext(_service()).sections()[section.key])

        server.resource(
            AI_URI.format(file=section.file),
            name=f"ai-{section.file.removesuffix('.md')}",
            title=f"{section.title} (.ai/{section.file})",
            description=f"The project's {section.title.lower()}: {section.hint}.",
            mime_type="text/markdown",
        )(read)

    for section in SECTIONS:
        add(section)


def view_updates(service: MemoryService, everything: bool, changed: set[str]) -> set[str]:
    """After the journal changed: re-render the ``.ai`` view if a section may have changed, and
    return the URIs of the files whose text differs from what this process last announced."""
    try:
        store = service.project
        if not everything:
            with store.lock:
                memories = store.state.memories
                relevant = any(
                    is_section_memory(m, record.kind if (record := memories.get(m)) is not None else "")
                    for m in changed
                )
            if not relevant:
                return set()
        context = ProjectContext(service)
        if service not in _NOTIFIED and not any(context.sections().values()):
            return set()  # no project context in this memory: nothing to render or announce
        view = context.render_view()
        notified = _NOTIFIED.setdefault(service, {})
        uris: set[str] = set()
        for name, text in view["files"].items():
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if notified.get(name) != digest:
                notified[name] = digest
                uris.add(AI_URI.format(file=name))
        return uris
    except InvalidInput as exc:  # a refused render folder (a link, a path outside): said in one line
        log.warning("could not render the .ai view: %s", exc)
        return set()
    except Exception:  # the watcher must outlive a failed render
        log.exception("could not render the .ai view")
        return set()
