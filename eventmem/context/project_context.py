"""The shared project-memory protocol on the journal: sections in, events out, ``.ai/`` files as a view.

:class:`ProjectContext` is a thin layer over :class:`~eventmem.service.MemoryService`: every change
is a command of the service (so an event on the journal), every read folds the journal first. The
rendering, parsing and planning are pure functions in :mod:`~eventmem.context.render`,
:mod:`~eventmem.context.parse` and :mod:`~eventmem.context.optimization`; what is in this package's
other modules is the IO: reading the fold, appending, writing the view files, reading an ``.ai/``
directory.

Size guard: a list section (decisions, recent changes, conversation summaries, todo) has a limit
(``section_max_bytes``, 256 KB by default). A write that would take it over is *paused*: nothing is
written, and the result carries the optimization plan. Applying the plan trims any section above
75% of its limit to 50% (archiving its oldest entries), so the same write then fits, as long as one
call adds at most a quarter of the limit to a section (a larger addition is refused outright).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eventmem.context.pmp_import import PmpImport
from eventmem.context.reading import BY_KEY
from eventmem.context.render import is_placeholder, render_section, summarize_section
from eventmem.context.suggestions import ContextSuggestions
from eventmem.core.sections import SECTIONS, Entry

if TYPE_CHECKING:  # (the service's modules load after a server answers initialize)
    from eventmem.service import MemoryService

__all__ = ["ProjectContext", "write_section"]


class ProjectContext(ContextSuggestions, PmpImport):
    """The protocol's commands and queries over one service. ``by`` names the writer (the MCP
    client, ``cli``, or :data:`~eventmem.context.reading.IMPORT_BY`).

    Its parts: reading the fold (:mod:`~eventmem.context.reading`), the view files
    (:mod:`~eventmem.context.view`), writes and the optimization (:mod:`~eventmem.context.writes`),
    suggestions (:mod:`~eventmem.context.suggestions`) and the import (:mod:`~eventmem.context.pmp_import`);
    here, what the tools read."""

    # -- tools: reading -----------------------------------------------------------------------

    def bootstrap(self) -> dict[str, Any]:
        """Core sections in full, the others summarized, the files to read next and the warnings."""
        sections = self.sections()
        self.render_view()
        core: dict[str, str] = {}
        supplemental: dict[str, Any] = {}
        recommended: list[str] = []
        for section in SECTIONS:
            entries = sections[section.key]
            if section.core:
                core[section.key] = entries[0].content if entries else ""
                continue
            brief = summarize_section(section, entries)
            brief["file"] = self.file_of(section)
            supplemental[section.key] = brief
            if brief["omitted"] and (self.view_dir() / section.file).exists():
                recommended.append(brief["file"])
        return {
            "status": "success",
            "projectRoot": str(self.paths.root),
            "coreContext": core,
            "supplementalContext": supplemental,
            "recommendedNextFiles": recommended,
            "warnings": self.warnings(sections),
        }

    def warnings(self, sections: Mapping[str, Sequence[Entry]]) -> list[str]:
        out: list[str] = []
        for section in SECTIONS:
            if not section.singleton:
                continue
            entries = sections.get(section.key, ())
            tool = "update_current_task" if section.key == "currentTask" else "update_context_section"
            if not entries:
                out.append(f"{section.key} ({section.file}) is missing: write {section.hint} ({tool}).")
            elif is_placeholder(entries[0].content):
                out.append(f"{section.key} ({section.file}) is still a placeholder: write {section.hint} ({tool}).")
        out += self.service.warnings()
        return out

    def full(self) -> dict[str, Any]:
        sections = self.sections()
        self.render_view()
        return {
            "status": "success",
            "projectRoot": str(self.paths.root),
            "sections": {s.key: render_section(s, sections[s.key]) for s in SECTIONS},
            "files": {s.key: self.file_of(s) for s in SECTIONS},
            "warnings": self.warnings(sections),
        }

    def current_task(self) -> dict[str, Any]:
        section = BY_KEY["currentTask"]
        entries = self.sections()["currentTask"]
        entry = entries[0] if entries else None
        content = entry.content if entry else ""
        return {
            "status": "success",
            "currentTask": content,
            "isPlaceholder": is_placeholder(content),
            "updatedAt": entry.updated_at if entry else None,
            "updatedBy": entry.updated_by if entry else None,
            "file": self.file_of(section),
        }

    def effective_root(self) -> dict[str, Any]:
        root = self.service.root
        return {
            "status": "success",
            "projectRoot": str(root.root),
            "memoryRoot": str(self.paths.base),
            "projectRootSource": root.source,
            "viewDir": str(self.view_dir()),
            "viewTracked": self.view_tracked,
        }


def write_section(service: MemoryService, key: str, content: str, by: str) -> None:
    """The service's section port (:class:`~eventmem.service.app.SectionWriter`): a save of a
    singleton type replaces that section's text through the protocol, which renders the ``.ai`` view."""
    ProjectContext(service, by=by).write_section(key, content)
