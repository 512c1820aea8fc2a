"""Reading a project's context from the fold: every section's live entries, and the optimization plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

from eventmem.context.optimization import Plan, plan_optimization
from eventmem.context.views import live_ids
from eventmem.core.errors import InvalidInput
from eventmem.core.sections import SECTIONS, Entry, Section, section_named

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = [
    "BY_KEY",
    "IMPORT_BY",
    "LIST_KINDS",
    "SECTION_IMPORTANCE",
    "SINGLETON_IDS",
    "ContextReader",
    "Mode",
    "is_section_memory",
    "section_of",
]

IMPORT_BY: Final = "import:pmp"
SECTION_IMPORTANCE: Final = 0.8
BY_KEY: Final = {section.key: section for section in SECTIONS}
LIST_KINDS: Final = {section.kind: section for section in SECTIONS if not section.singleton}
_SCAN_BATCH: Final = 256
SINGLETON_IDS: Final = {section.memory_id: section for section in SECTIONS if section.singleton}

Mode = Literal["replace", "append"]


def section_of(name: str) -> Section:
    section = section_named(name)
    if section is None:
        names = ", ".join(s.key for s in SECTIONS)
        raise InvalidInput(f"unknown section {name!r}; choose one of: {names}")
    return section


def is_section_memory(memory_id: str, kind: str) -> bool:
    return memory_id in SINGLETON_IDS or kind in LIST_KINDS


class ContextReader:
    """The protocol's reads over one service. ``by`` names the writer (the MCP client, ``cli``, or
    :data:`IMPORT_BY`)."""

    def __init__(self, service: MemoryService, *, by: str = "") -> None:
        self.service = service
        self.store = service.project
        self.paths = service.project.paths
        self.config = service.config
        self.by = by

    # -- reading ------------------------------------------------------------------------------

    def sections(self) -> dict[str, list[Entry]]:
        """Every section's live entries, list entries in created order.

        The store's lock is taken a batch of memories at a time, so that a large project's view is
        read without holding up the calls that come in meanwhile."""
        self.store.catch_up()
        out: dict[str, list[tuple[str, Entry]]] = {section.key: [] for section in SECTIONS}
        store = self.store
        with store.read() as view:  # picked from the columns: only these memories are read (and decoded)
            candidates = live_ids(view, kinds=LIST_KINDS, ids=SINGLETON_IDS)
        for start in range(0, len(candidates), _SCAN_BATCH):
            with store.read() as view:
                for memory_id in candidates[start : start + _SCAN_BATCH]:
                    record = view.visible_unkept(memory_id)  # (read once: every decision, convention...)
                    if record is None:
                        continue
                    singleton = SINGLETON_IDS.get(record.id)
                    section = singleton or LIST_KINDS.get(record.kind)
                    if section is None or (section.singleton and singleton is None):
                        continue
                    entry = Entry(
                        id=record.id,
                        title=record.title if not section.singleton else "",
                        content=record.content,
                        summary=record.summary,
                        created_at=record.created_at,
                        updated_at=record.updated_at or record.created_at,
                        updated_by=record.updated_by,
                    )
                    out[section.key].append((record.created_stamp, entry))
        return {key: [entry for _, entry in sorted(items, key=lambda item: item[0])] for key, items in out.items()}

    def touches(self, memory_ids: Iterable[str]) -> bool:
        """Whether any of these memories is (or was) an entry of a section: the view may have changed."""
        with self.store.read() as view:
            memories = view.memories()
            return any(
                is_section_memory(m, record.kind if (record := memories.get(m)) is not None else "") for m in memory_ids
            )

    @property
    def limit(self) -> int:
        return self.config.section_max_bytes

    def plan(self, sections: Mapping[str, Sequence[Entry]] | None = None) -> Plan:
        return plan_optimization(self.sections() if sections is None else sections, limit=self.limit)
