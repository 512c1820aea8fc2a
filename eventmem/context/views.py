"""Read-only views rendered from the fold: the markdown summary that MCP resources expose."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from eventmem.core.events import KINDS
from eventmem.core.records import MemoryRecord

if TYPE_CHECKING:
    from eventmem.runner.readview import ReadView
    from eventmem.service import MemoryService

__all__ = ["live_ids", "live_records", "render_summary"]


def live_ids(
    view: ReadView, now: float | None = None, *, kinds: Iterable[str] | None = None, ids: Iterable[str] = ()
) -> list[str]:
    """The memories that would be returned (live, not expired by time, not superseded), in order;
    with ``kinds``, only memories of those types and those named in ``ids``. Read from the filter
    columns: no memory is looked at."""
    mask = view.mask(now=now)
    if kinds is not None:
        mask &= view.of_kinds(kinds, ids)
    return view.ids(mask)


def live_records(view: ReadView, now: float | None = None) -> Iterator[MemoryRecord]:
    """The memories of :func:`live_ids`."""
    memories = view.memories()
    for memory_id in live_ids(view, now):
        yield memories[memory_id]


def render_summary(service: MemoryService, *, per_kind: int = 5) -> str:
    """Markdown: counts, then the most important and most recent memories of each type."""
    with service.project.read() as view:
        records = list(live_records(view))
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
