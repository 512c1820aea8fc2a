"""Reading a project's context from the fold: every section's live entries, and the optimization plan."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from eventmem.context.optimization import Plan, plan_optimization
from eventmem.context.views import live_ids
from eventmem.core.errors import InvalidInput
from eventmem.core.sections import SECTIONS, Entry, Section, section_named

if TYPE_CHECKING:
    from eventmem.core.records import MemoryRecord, RecordHead
    from eventmem.service import MemoryService

__all__ = [
    "BY_KEY",
    "IMPORT_BY",
    "LIST_KINDS",
    "SECTION_IMPORTANCE",
    "SINGLETON_IDS",
    "ContextReader",
    "Mode",
    "SectionOrder",
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


class SectionOrder(NamedTuple):
    """A section's entries by id, in the order they are rendered, and whether any has a title."""

    ids: list[str]
    titled: bool


def _section_of(record: MemoryRecord | RecordHead) -> Section | None:
    """The section a live memory is an entry of: a singleton's by its well-known id, a list's by kind."""
    singleton = SINGLETON_IDS.get(record.id)
    section = singleton or LIST_KINDS.get(record.kind)
    if section is None or (section.singleton and singleton is None):
        return None
    return section


def _entry(section: Section, record: MemoryRecord) -> Entry:
    return Entry(
        id=record.id,
        title=record.title if not section.singleton else "",
        content=record.content,
        summary=record.summary,
        created_at=record.created_at,
        updated_at=record.updated_at or record.created_at,
        updated_by=record.updated_by,
    )


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
        out: dict[str, list[tuple[str, Entry]]] = {section.key: [] for section in SECTIONS}
        for batch in self._section_records():
            for section, record in batch:
                out[section.key].append((record.created_stamp, _entry(section, record)))
        return {key: [entry for _, entry in sorted(items, key=lambda item: item[0])] for key, items in out.items()}

    def order(self) -> dict[str, SectionOrder]:
        """Each section's entries as :meth:`sections` orders them, by id, and whether one has a title:
        what a render of one entry at a time needs (:meth:`entries_of`). Records still encoded are
        read for their id, type, title and creation alone (a large project's decisions are tens of
        megabytes of text, decoded)."""
        self.store.catch_up()
        out: dict[str, list[tuple[str, str]]] = {section.key: [] for section in SECTIONS}
        titled: set[str] = set()
        for batch in self._candidates():
            with self.store.read() as view:
                for memory_id in batch:
                    head = view.visible_head(memory_id)
                    section = _section_of(head) if head is not None else None
                    if head is None or section is None:
                        continue
                    out[section.key].append((head.created_stamp, head.id))
                    if head.title and not section.singleton:
                        titled.add(section.key)
        return {
            key: SectionOrder([memory_id for _, memory_id in sorted(items, key=lambda item: item[0])], key in titled)
            for key, items in out.items()
        }

    def entries_of(self, section: Section, memory_ids: Sequence[str]) -> Iterator[Entry]:
        """The entries of ``section`` among ``memory_ids``, in their order, read a batch at a time
        (the lock is not held between batches). A memory deleted, or moved out of the section, since
        the ids were read is left out."""
        store = self.store
        for start in range(0, len(memory_ids), _SCAN_BATCH):
            with store.read() as view:
                batch = [
                    _entry(section, record)
                    for memory_id in memory_ids[start : start + _SCAN_BATCH]
                    if (record := view.visible_unkept(memory_id)) is not None and _section_of(record) is section
                ]
            yield from batch

    def has_entries(self) -> bool:
        """Whether any section holds an entry: read from the filter columns, no memory decoded."""
        self.store.catch_up()
        with self.store.read() as view:
            return bool(live_ids(view, kinds=LIST_KINDS, ids=SINGLETON_IDS))

    def _candidates(self) -> Iterator[list[str]]:
        """The ids of the live memories of the sections' types and ids, a batch at a time; picked from
        the filter columns (no memory decoded). The store's lock is held while a batch is read, not
        between batches, so that a large project's view is read without holding up the calls that
        come in meanwhile."""
        with self.store.read() as view:
            candidates = live_ids(view, kinds=LIST_KINDS, ids=SINGLETON_IDS)
        for start in range(0, len(candidates), _SCAN_BATCH):
            yield candidates[start : start + _SCAN_BATCH]

    def _section_records(self) -> Iterator[list[tuple[Section, MemoryRecord]]]:
        """The live memories of the sections, with their section, a batch at a time, each record
        decoded for this read alone (not kept decoded)."""
        self.store.catch_up()
        for candidates in self._candidates():
            with self.store.read() as view:
                batch = [
                    (section, record)
                    for memory_id in candidates
                    if (record := view.visible_unkept(memory_id)) is not None
                    and (section := _section_of(record)) is not None
                ]
            yield batch

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
