"""Read-only views rendered from the fold: the markdown summary that MCP resources expose."""

from __future__ import annotations

import time
from collections.abc import Iterator

from eventmem.events import KINDS
from eventmem.service import MemoryService
from eventmem.state import MemoryRecord
from eventmem.store import Store

__all__ = ["live_records", "render_summary"]


def live_records(store: Store, now: float | None = None) -> Iterator[MemoryRecord]:
    """Memories that would be returned: live, not expired by time, not superseded."""
    now = time.time() if now is None else now
    cols = store.columns
    for memory_id, slot in store.slots.items():
        if cols.live[slot] and cols.expires[slot] > now and not cols.superseded[slot]:
            yield store.state.memories[memory_id]


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
