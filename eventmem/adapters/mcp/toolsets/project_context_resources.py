"""The ``.ai`` view as MCP resources (``memory://ai/<file>``), and which of them changed after a write."""

from __future__ import annotations

import logging

from mcp.server import MCPServer

from eventmem.adapters.mcp.app import App, Running
from eventmem.context.project_context import ProjectContext
from eventmem.context.reading import ContextReader
from eventmem.context.render import render_section
from eventmem.core.errors import InvalidInput
from eventmem.core.sections import SECTIONS, Section

__all__ = ["AI_URI", "register_resources", "view_updates"]

log = logging.getLogger("eventmem.mcp")

AI_URI = "memory://ai/{file}"


def register_resources(server: MCPServer[App], running: Running) -> None:
    """``memory://ai/<file>``: each section rendered as its ``.ai/`` markdown file (read from the
    memory ``running`` holds: static resources get no Context in the SDK)."""

    def add(section: Section) -> None:
        def read() -> str:
            return render_section(section, ProjectContext(running.service()).sections()[section.key])

        server.resource(
            AI_URI.format(file=section.file),
            name=f"ai-{section.file.removesuffix('.md')}",
            title=f"{section.title} (.ai/{section.file})",
            description=f"The project's {section.title.lower()}: {section.hint}.",
            mime_type="text/markdown",
        )(read)

    for section in SECTIONS:
        add(section)


def view_updates(app: App, everything: bool, changed: set[str]) -> set[str]:
    """After the journal changed: re-render the ``.ai`` view of the app's memory if a section may have
    changed, and return the URIs of the files whose text differs from what the app last announced."""
    service = app.service_
    if service is None:
        return set()
    try:
        if not everything and not ContextReader(service).touches(changed):
            return set()
        context = ProjectContext(service)
        if app.announced is None and not context.has_entries():
            return set()  # no project context in this memory: nothing to render or announce
        view = context.render_view()
        notified = app.announced = {} if app.announced is None else app.announced
        uris: set[str] = set()
        for name, digest in view["sha256"].items():
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
