"""The port through which the service writes a project-context section.

A save of a singleton type (project, architecture, current_task, coding_style) in project scope is that
section's text (see :mod:`eventmem.core.sections`), written by the project-memory protocol, which sits
beside the service (:mod:`eventmem.context`) and renders the ``.ai`` view: whoever opens a service for
its callers (the adapters) plugs the protocol in; a service opened without it refuses such a save."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from eventmem.service.app import MemoryService

__all__ = ["SectionWriter"]


class SectionWriter(Protocol):
    """Replace the text of the section named ``key`` of ``service``'s project, as ``by``."""

    def __call__(self, service: MemoryService, key: str, content: str, by: str) -> None: ...
