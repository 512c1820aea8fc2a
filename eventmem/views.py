"""Read-only views rendered from the fold: the markdown summary that MCP resources expose."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import numpy as np

from eventmem.events import KINDS
from eventmem.records import MemoryRecord
from eventmem.service import MemoryService
from eventmem.store import Store

__all__ = ["live_records", "live_slots", "render_summary"]


def live_slots(
    store: Store, now: float | None = None, *, kinds: Iterable[str] | None = None, ids: Iterable[str] = ()
) -> list[int]:
    """Slots of the memories that would be returned (live, not expired by time, not superseded),
    in order; with ``kinds``, only memories of those types and those named in ``ids``. Read from the
    filter columns: no memory is looked at. Call with the store's lock held."""
    now = time.time() if now is None else now
    cols = store.columns
    count = len(store.slot_ids)
    mask = cols.live[:count] & (cols.expires[:count] > now) & ~cols.superseded[:count]
    if kinds is not None:
        wanted = store.slots_of_kinds(kinds)
        for memory_id in ids:
            slot = store.slots.get(memory_id)
            if slot is not None:
                wanted[slot] = True
        mask &= wanted
    slots: list[int] = np.flatnonzero(mask).tolist()
    return slots


def live_records(store: Store, now: float | None = None) -> Iterator[MemoryRecord]:
    """The memories of :func:`live_slots`."""
    memories = store.state.memories
    for slot in live_slots(store, now):
        yield memories[store.slot_ids[slot]]


def render_summary(service: MemoryService, *, per_kind: int = 5) -> str:
    """Markdown: counts, then the most important and most recent memories of each type."""
    store = service.project
    with store.lock:
        records = list(live_records(store))
    lines = [f"# Project memory: {service.root.root.name}", ""]
    if not records:
        lines.append("No memories yet. Save decisions, fixes and conventions as you work.")
        return "\n".join(lines) + "\n"
    by_kind: dict[str, list[MemoryRecord]] = {}
    for record in records:
        by_kind.setdefault(record.kind, []).append(record)
    counts = ", ".join(f"{len(by_kind[k])} {k}" for k in KINDS if k in by_kind)
    lines += [f"{len(records)} memories: {counts}.", ""]
    for kind in KINDS:
        group = by_kind.get(kind)
        if not group:
            continue
        group.sort(key=lambda r: (r.importance, r.updated_stamp), reverse=True)
        lines.append(f"## {kind.replace('_', ' ').capitalize()}")
        for record in group[:per_kind]:
            title = record.title or record.summary
            tags = f" #{' #'.join(record.tags)}" if record.tags else ""
            lines.append(f"- {title} (importance {record.importance:g}, {record.updated_at[:10]}){tags} `{record.id}`")
        if len(group) > per_kind:
            lines.append(f"- … and {len(group) - per_kind} more")
        lines.append("")
    return "\n".join(lines)
