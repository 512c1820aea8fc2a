"""What the lifecycle hooks ask of the service: many memories saved as one batch by one writer, and
the project's returnable memories as plain rows for the hooks' own fast index.

A batch goes through the same checks as :meth:`~eventmem.service.commands.Commands.save_result`:
every text is checked and scrubbed (secrets, ``<private>`` spans) before anything is written, a
content that duplicates a live memory (or an earlier item of the batch) is left out, and the events
go out in one append under the journal lock, so ``eventmem diff`` and a pull request show the batch as
one block by one writer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from eventmem.core.dedup import dedup_key
from eventmem.core.errors import InvalidInput
from eventmem.core.events import AnyEvent, MemoryPromoted, MemorySaved
from eventmem.core.ids import iso_to_epoch, new_id, now_iso
from eventmem.core.sections import singleton_of_kind
from eventmem.core.validation import check_length, check_metadata
from eventmem.service.inputs import check_by, check_importance, check_kind, check_ttl, normalize_tags
from eventmem.service.lookups import record_of
from eventmem.service.models import Saved
from eventmem.service.part import Part

__all__ = ["BatchItem", "Batches"]


class BatchItem(msgspec.Struct, kw_only=True, frozen=True):
    """One memory of a batch (the fields of a save)."""

    content: str
    title: str = ""
    summary: str | None = None
    tags: tuple[str, ...] = ()
    kind: str = "general"
    importance: float = 0.5
    ttl_seconds: int | None = None
    metadata: dict[str, str] = {}
    source: str = ""


class Batches(Part):
    """``save_batch`` and ``memory_rows``."""

    def save_batch(self, items: Sequence[BatchItem], *, by: str) -> list[Saved]:
        """Save ``items`` as project memories in one append by the writer ``by``. Every item is checked
        first (nothing is written if one is refused); an item whose content normalises to a live
        memory's, or to an earlier item's, is not written and comes back ``deduplicated``."""
        check_by(by)
        ts = now_iso()
        planned: list[MemorySaved] = []
        for item in items:
            kind = check_kind(item.kind)
            if singleton_of_kind(kind) is not None:
                raise InvalidInput(f"a batch cannot write the {kind} section; save it on its own")
            content = self._clean_text(item.content, "content", required=True)
            title = self._clean_text(item.title, "title", required=False)
            summary = None if item.summary is None else self._clean_text(item.summary, "summary", required=False)
            check_length(item.source, "source")
            planned.append(
                MemorySaved(
                    id=new_id(),
                    ts=ts,
                    by=by,
                    memory=new_id(),
                    kind=kind,
                    scope="project",
                    title=title,
                    content=content,
                    summary=summary if summary else self.shared.summarizer.summarize([content])[0],
                    tags=normalize_tags(list(item.tags)),
                    importance=check_importance(item.importance),
                    ttl_seconds=check_ttl(item.ttl_seconds),
                    metadata=check_metadata(dict(item.metadata)) if item.metadata else {},
                    source=item.source,
                )
            )
        store = self.project
        duplicates: dict[int, str] = {}

        def plan() -> list[AnyEvent]:
            duplicates.clear()
            now = time.time()
            seen: dict[bytes, int] = {}
            events: list[AnyEvent] = []
            with store.read() as view:
                for index, event in enumerate(planned):
                    key = dedup_key(event.content)
                    if key in seen:
                        duplicates[index] = planned[seen[key]].memory
                        continue
                    found = [m for m in view.duplicates(event.content) if view.returnable(m, now)]
                    if found:
                        duplicates[index] = found[0]
                        continue
                    seen[key] = index
                    events.append(event)
                    if event.ttl_seconds is not None and event.importance >= self.config.promote_importance:
                        reason = f"saved with importance {event.importance:g}"
                        events.append(
                            MemoryPromoted(id=new_id(), ts=ts, by=by, prev=event.id, memory=event.memory, reason=reason)
                        )
            return events

        if planned:
            store.append_planned(plan)
        results: list[Saved] = []
        for index, event in enumerate(planned):
            memory_id = duplicates.get(index, event.memory)
            results.append(
                Saved(memory=self.view(store, record_of(store, memory_id)), deduplicated=index in duplicates)
            )
        return results

    def memory_rows(self, *, content_chars: int = 2000) -> list[dict[str, Any]]:
        """The project's returnable memories (live, not expired, not superseded) as plain rows, the
        content cut to ``content_chars``: what the hooks' fast index holds."""
        store = self.project
        store.catch_up()
        now = time.time()
        rows: list[dict[str, Any]] = []
        with store.read() as view:
            for memory_id, record in view.memories().items():
                if not record.exists or not view.returnable(memory_id, now):
                    continue
                expires = view.expires_at(record)
                rows.append(
                    {
                        "id": memory_id,
                        "kind": record.kind,
                        "title": record.title,
                        "summary": record.summary,
                        "content": record.content[:content_chars],
                        "tags": list(record.tags),
                        "importance": record.importance,
                        "created_at": _seconds(record.created_at),
                        "updated_at": _seconds(record.updated_at or record.created_at),
                        "created_by": record.created_by,
                        "expires_at": None if math.isinf(expires) else expires,
                    }
                )
        return rows


def _seconds(ts: str) -> float:
    """An event time as seconds since the epoch (0 when there is none or it does not parse)."""
    try:
        return iso_to_epoch(ts) if ts else 0.0
    except ValueError:
        return 0.0


def items_from(rows: Sequence[Mapping[str, Any]]) -> list[BatchItem]:
    """Plain mappings (a pending file's lines) as :class:`BatchItem` values; a row that is not one is
    refused in one line."""
    try:
        return [msgspec.convert(dict(row), BatchItem) for row in rows]
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"not a memory to save: {exc}") from None
