"""The ``.ai/`` folder of the shared project-memory protocol, written out.

The eight section files rendered from the journal exactly as the project's own ``.ai`` view is
(see :func:`eventmem.context.render.render_section`), into any folder. Reading a ``.ai/`` folder in is
``eventmem import pmp`` (:meth:`eventmem.context.project_context.ProjectContext.import_pmp`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eventmem.context.project_context import ProjectContext
from eventmem.context.render import render_section
from eventmem.core.sections import SECTIONS
from eventmem.journal.files import atomic_write

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["write"]


def write(service: MemoryService, folder: Path) -> int:
    """Write the section files into ``folder`` (made if missing); returns the number of entries."""
    folder.mkdir(parents=True, exist_ok=True)
    sections = ProjectContext(service).sections()
    for section in SECTIONS:
        entries = sections.get(section.key, [])
        atomic_write(folder / section.file, render_section(section, entries).encode("utf-8"), durable=False)
    return sum(len(entries) for entries in sections.values())
