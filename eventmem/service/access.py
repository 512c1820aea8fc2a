"""Access counting: a read, a recall hit or a duplicate save counts as a use of a memory, which
extends its TTL and, often enough, promotes it to long-term."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from eventmem.core.errors import EventmemError
from eventmem.core.events import AnyEvent, MemoryPromoted
from eventmem.core.ids import new_id, now_iso
from eventmem.runner.runner import Store
from eventmem.service.models import Hit
from eventmem.service.part import Part

__all__ = ["Accesses"]

log = logging.getLogger("eventmem.service")


class Accesses(Part):
    """Counts accesses in each store's local usage stream, after the reply that made them."""

    def record_access(self, store: Store, memory_ids: Sequence[str]) -> None:
        """Count accesses in the local usage stream (one write), extend TTLs, promote the often used;
        in a server, just after the reply (see :meth:`Deferral.defer`): the next call sees them.

        Never fails the read it comes from: a promotion that cannot be written is logged."""
        if memory_ids:
            store.deferral.defer(functools.partial(self._record_access_now, store, list(memory_ids), now_iso()))

    def _record_access_now(self, store: Store, memory_ids: Sequence[str], ts: str) -> None:
        store.record_usage(memory_ids, ts)
        threshold = self.config.promote_accesses
        if threshold <= 0:
            return

        def plan() -> list[AnyEvent]:
            events: list[AnyEvent] = []
            with store.read() as view:
                for memory_id in dict.fromkeys(memory_ids):
                    record = view.visible(memory_id)
                    count = view.access_count(memory_id)
                    if record is not None and record.ttl_seconds is not None and count >= threshold:
                        reason = f"accessed {count} times (promote_accesses {threshold})"
                        promoted = MemoryPromoted(
                            id=new_id(), ts=now_iso(), by="eventmem", prev=record.head, memory=memory_id, reason=reason
                        )
                        events.append(promoted)
            return events

        if not plan():
            return
        try:
            store.append_planned(plan)  # re-checked under the journal lock: written once
        except EventmemError as exc:
            log.warning("could not write a promotion: %s", exc)

    def record_hits(self, owners: dict[str, Store], hits: Sequence[Hit]) -> None:
        for store in self.stores():
            self.record_access(store, [hit.id for hit in hits if owners.get(hit.id) is store])
