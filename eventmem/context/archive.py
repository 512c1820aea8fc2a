"""Archiving project-context entries: a tombstone each, then their history moved to ``archive/`` segments."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from eventmem.core.state import State

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["archive_entries"]


def archive_entries(service: MemoryService, ids: Sequence[str], *, reason: str, by: str = "") -> dict[str, Any]:
    """Archive project-context entries: each is deleted (a tombstone saying why, so it leaves the
    view) and its history is then moved out of the live journal into ``archive/`` segments by the
    lifecycle's compaction, one segment per month the entries were created in. The one function the
    optimization's archiving goes through."""
    if not ids:
        return {"archived": 0, "segments": []}
    store = service.project
    months: dict[str, list[str]] = {}
    for memory_id in ids:
        with store.read() as view:
            record = view.record(memory_id)
        months.setdefault(record.created_at[:7] if record else "", []).append(memory_id)
        service.delete(memory_id, reason=f"archived: {reason}", by=by)
    from eventmem.service.lifecycle import archive_memories  # (the service loads after serve's handshake)

    segments: list[str] = []
    for month in sorted(months):
        result = archive_memories(store, _chooser(months[month]), now=time.time(), by=by)
        if result.segment:
            segments.append(result.segment)
    return {"archived": len(ids), "segments": segments}


def _chooser(ids: Sequence[str]) -> Callable[[State], Iterable[str]]:
    chosen = frozenset(ids)
    return lambda _state: chosen
