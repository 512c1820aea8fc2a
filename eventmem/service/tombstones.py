"""What a deleted or expired memory left behind, and the events that bring it back.

A memory that is not live is still in the fold (a tombstone) and its events are still in the
journal. :func:`gone` turns that into the error a tool answers with (what happened, when, by whom,
why, and how to restore it); :func:`restore_events` plans the restore. Pure over a store's fold and
segments: nothing here appends.
"""

from __future__ import annotations

import math

from eventmem.core.codec import LineError, decode_line
from eventmem.core.errors import MemoryGone
from eventmem.core.events import AnyEvent, LinkAdded, MemoryDeleted, MemoryExpired, MemoryRestored, MemoryUpdated
from eventmem.core.ids import new_id
from eventmem.core.records import MemoryRecord
from eventmem.core.stamps import id_of, ts_of
from eventmem.runner.runner import Store

__all__ = ["expired_error", "gone", "latest_tombstone", "restore_events"]


def latest_tombstone(store: Store, record: MemoryRecord) -> MemoryDeleted | MemoryExpired | None:
    """The ``deleted`` or ``expired`` event the memory's status comes from, read from the segments
    (archive included). Only lines naming the memory are decoded; ``None`` if none is found."""
    wanted = record.deleted_stamp if record.status == "deleted" else record.expired_stamp
    needle = record.id.encode("utf-8")
    for segment in store.journal.segments():
        try:
            data = segment.path.read_bytes()
        except OSError:
            continue
        for line in data.split(b"\n"):
            if needle not in line:
                continue
            try:
                event = decode_line(line)
            except LineError:
                continue
            if (
                isinstance(event, MemoryDeleted | MemoryExpired)
                and event.memory == record.id
                and event.id == id_of(wanted)
            ):
                return event
    return None


def gone(store: Store, record: MemoryRecord) -> MemoryGone:
    """The error for a memory whose latest tombstone (a ``deleted`` or ``expired`` event) hides it."""
    event = latest_tombstone(store, record)
    stamp = record.deleted_stamp if record.status == "deleted" else record.expired_stamp
    at = event.ts if event is not None else ts_of(stamp)
    by = event.by if event is not None else ""
    if isinstance(event, MemoryDeleted):
        return MemoryGone(record.id, "deleted", at, by=by, reason=event.reason)
    if record.status == "deleted":
        return MemoryGone(record.id, "deleted", at, by=by)
    ran_out = event.expires_at if isinstance(event, MemoryExpired) and event.expires_at else at
    return MemoryGone(record.id, "expired", ran_out, by=by, reason=_ttl_reason(record))


def expired_error(record: MemoryRecord, expires_at: str) -> MemoryGone:
    """The error for a memory whose TTL ran out before any ``expired`` event was written."""
    return MemoryGone(record.id, "expired", expires_at, reason=_ttl_reason(record))


def _ttl_reason(record: MemoryRecord) -> str:
    return f"its TTL of {record.ttl_seconds} seconds ran out" if record.ttl_seconds else "its TTL ran out"


def restore_events(
    store: Store, record: MemoryRecord, *, ts: str, by: str, reason: str, now: float, stores: list[Store]
) -> list[tuple[Store, AnyEvent]]:
    """The events that restore a deleted or expired memory, each with the store it goes to.

    - a ``restored`` event;
    - a memory with a TTL that has run out gets a fresh one: ``ttl_seconds`` written again, so its
      expiry counts from the restore (an ``updated`` event; ``promote_memory`` makes it long-term);
    - the links its delete removed (``unlinked`` in the same append as the ``deleted`` event) come
      back as new links, to memories that are live now; a link stays in the store it was in.
    """
    restored = MemoryRestored(id=new_id(), ts=ts, by=by, prev=record.head, memory=record.id, reason=reason)
    out: list[tuple[Store, AnyEvent]] = [(store, restored)]
    with store.read() as view:
        expires = view.expires_at(record)
    if not math.isinf(expires) and expires <= now:
        fresh_ttl = MemoryUpdated(
            id=new_id(), ts=ts, by=by, prev=restored.id, memory=record.id, ttl_seconds=record.ttl_seconds
        )
        out.append((store, fresh_ttl))
    if record.status != "deleted":
        return out
    deleted_at = ts_of(record.deleted_stamp)
    seen: set[tuple[str, str, str]] = set()
    for where in stores:
        with where.read() as view:
            removed = [link for i in sorted(view.link_ids_of(record.id)) if (link := view.link(i)) is not None]
            alive = {(link.source, link.target, link.relation) for link in view.links_of(record.id)}
        for link in removed:
            if not link.removed_stamp or ts_of(link.removed_stamp) != deleted_at:
                continue
            other = link.target if link.source == record.id else link.source
            if not any(_live(s, other, now) for s in stores):
                continue
            key = (link.source, link.target, link.relation)
            if key in seen or key in alive:
                continue
            seen.add(key)
            again = LinkAdded(
                id=new_id(),
                ts=ts,
                by=by,
                link=new_id(),
                source=link.source,
                target=link.target,
                relation=link.relation,
                strength=link.strength,
                context=link.context,
            )
            out.append((where, again))
    return out


def _live(store: Store, memory_id: str, now: float) -> bool:
    with store.read() as view:
        return view.alive(memory_id, now)
