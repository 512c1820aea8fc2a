"""Single reads of one store through its read view, for commands that need one record or link."""

from __future__ import annotations

from eventmem.core.events import AnyEvent
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.runner.readview import ReadView
from eventmem.runner.runner import Store

__all__ = ["has_links", "head_of", "known_record", "link_of", "link_touches", "record_of"]


def known_record(view: ReadView, memory_id: str) -> MemoryRecord:
    """The folded record of a memory the journal names (a ``KeyError`` otherwise)."""
    record = view.record(memory_id)
    if record is None:
        raise KeyError(memory_id)
    return record


def record_of(store: Store, memory_id: str) -> MemoryRecord:
    """:func:`known_record`, in a read of its own."""
    with store.read() as view:
        return known_record(view, memory_id)


def link_of(store: Store, link_id: str) -> LinkRecord:
    """The folded record of a link the journal names (a ``KeyError`` otherwise)."""
    with store.read() as view:
        link = view.link(link_id)
    if link is None:
        raise KeyError(link_id)
    return link


def head_of(store: Store, memory_id: str) -> str:
    """The id of the last event about a memory: the ``prev`` of the next one."""
    with store.read() as view:
        return view.head_of(memory_id)


def has_links(store: Store, memory_id: str) -> bool:
    with store.read() as view:
        return bool(view.link_ids_of(memory_id))


def link_touches(store: Store, event: AnyEvent, memory_id: str) -> bool:
    """Whether the link an event names has this memory at one of its ends."""
    with store.read() as view:
        link = view.link(getattr(event, "link", ""))
    return link is not None and memory_id in (link.source, link.target)
