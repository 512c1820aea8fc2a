"""Upkeep of the memory directories: compaction (expiry, archiving, the usage stream), history, the
rebuild of the derived state, and the health, warnings and status the doctor and the tools report."""

from __future__ import annotations

import functools
import math
import time
from typing import Any, Literal

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.errors import InvalidInput
from eventmem.core.events import AnyEvent, memory_ids
from eventmem.core.stamps import causal_time_order
from eventmem.core.state import State
from eventmem.core.validation import check_length, check_whole
from eventmem.runner.embedding import Progress
from eventmem.runner.runner import Store
from eventmem.service.lifecycle import (
    archive_candidates,
    archive_memories,
    archived_on,
    due_for_expiry,
    epoch_iso,
    latest_stamp,
    plan_expiry,
)
from eventmem.service.lookups import link_touches
from eventmem.service.part import Part, Shared

__all__ = ["Maintenance"]


class Maintenance(Part):
    """Compaction, history and warnings over every memory directory of the service."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._archive_checked: dict[str, dict[str, str]] = {}
        """Per memory directory: memories compaction looked at without moving anything, by stamp."""

    def compact(
        self,
        *,
        now: float | None = None,
        by: str = "eventmem",
        archive: bool | Literal["daily"] = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """One compaction pass over every memory directory: ``expired`` events for memories whose
        TTL ran out, then (``archive``) the history of memories deleted or expired more than
        ``archive_after_days`` ago moved into an archive segment, then the usage stream shrunk.
        ``archive="daily"`` (the server's scheduler) archives at most once a day per memory
        directory: a rewrite makes every other process of the clone rebuild, so it is batched.
        Safe to run in several processes at once: decisions are re-checked under the journal lock.

        ``now`` later than the clock is refused (its events would be stamped in the future, in a
        tracked journal) unless ``dry_run``, which only says what would be expired and archived."""
        clock = time.time()
        now = clock if now is None else now
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise InvalidInput(f"now must be a time, not {now!r}")
        try:
            epoch_iso(now)
        except (OverflowError, ValueError, OSError):
            raise InvalidInput(f"now must be a time between the years 1 and 9999, not {now!r}") from None
        if dry_run:
            return self._compact_preview(now, archive=archive is not False)
        if now > clock:
            raise InvalidInput(
                f"cannot compact at {epoch_iso(now)}, later than the clock ({epoch_iso(clock)}): its events would "
                "be stamped in the future; only a dry run may look ahead (eventmem compact --now … --dry-run)"
            )
        report: dict[str, Any] = {"expired": [], "archived": [], "usage_compacted": []}
        for store in self.stores():
            store.catch_up()
            with store.read() as view:
                due = due_for_expiry(view, now)
            if due:
                written = store.append_planned(functools.partial(self._plan_expiry, store, now, by))
                report["expired"] += [getattr(e, "memory", "") for e in written]
            if archive is True or (archive == "daily" and not archived_on(store, epoch_iso(now)[:10])):
                result = self._archive_dead(store, now, by)
                if result is not None:
                    report["archived"].append(result)
            if (usage_path := store.compact_usage(epoch_iso(now))) is not None:
                report["usage_compacted"].append(usage_path)
        return report

    def _compact_preview(self, now: float, *, archive: bool) -> dict[str, Any]:
        """What a compaction at ``now`` would do, writing nothing: the memories it would expire and
        those whose history it would archive (already deleted or expired long enough before ``now``)."""
        cutoff = now - self.config.archive_after_days * 86400.0
        report: dict[str, Any] = {"dry_run": True, "now": epoch_iso(now), "would_expire": [], "would_archive": []}
        for store in self.stores():
            store.catch_up()
            with store.read() as view:
                report["would_expire"] += [event.memory for event in plan_expiry(view, now)]
                if archive:
                    report["would_archive"] += archive_candidates(view.fold, cutoff, view.hidden())
        return report

    @staticmethod
    def _plan_expiry(store: Store, now: float, by: str) -> list[AnyEvent]:
        with store.read() as view:
            return list(plan_expiry(view, now, by=by))

    def _archive_dead(self, store: Store, now: float, by: str) -> dict[str, Any] | None:
        cutoff = now - self.config.archive_after_days * 86400.0
        checked = self._archive_checked.setdefault(str(store.paths.base), {})

        def select(state: State) -> list[str]:
            with store.read() as view:
                among = view.hidden() if state is view.fold else None  # the live are no candidates
            found = archive_candidates(state, cutoff, among)
            return [m for m in found if checked.get(m) != latest_stamp(state.memories[m])]

        with store.read() as view:
            candidates = select(view.fold)
        if not candidates:
            return None
        result = archive_memories(store, select, now=now, by=by)
        with store.read() as view:  # looked at: not again until something new happens to them
            memories = view.memories()
            for memory_id in candidates:
                checked[memory_id] = latest_stamp(memories[memory_id])
        if not result.segment:
            return None
        return {
            "segment": result.segment,
            "rewritten": result.rewritten,
            "memories": len(result.memories),
            "events": result.events,
            "bytes_before": result.bytes_before,
            "bytes_after": result.bytes_after,
        }

    def history(self, memory_id: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        """Events (newest last) about one memory, or all, with where each line is in the journal."""
        if memory_id is not None:
            check_length(memory_id, "memory_id")
        if limit:  # 0: every event
            check_whole(limit, "log_limit", "limit")
        rows: list[tuple[str, dict[str, Any]]] = []
        for store in self.stores():
            for segment, result in store.journal.iter_all(with_offsets=True):
                for event, offset in zip(result.events, result.offsets, strict=True):
                    if isinstance(event, UnknownEvent):
                        if memory_id is None:
                            data = {"type": event.type, "id": event.id, "ts": event.ts, "unknown": True}
                            rows.append((event.ts + event.id, data | {"segment": segment.name, "offset": offset}))
                        continue
                    if (
                        memory_id is not None
                        and memory_id not in memory_ids(event)
                        and not (getattr(event, "link", None) and link_touches(store, event, memory_id))
                    ):
                        continue
                    data = msgspec.to_builtins(event)
                    data["segment"], data["offset"] = segment.name, offset
                    rows.append((event.ts + event.id, data))
        rows.sort(key=lambda r: r[0])
        out = [data for _, data in rows]
        if memory_id is not None:  # one memory's story: each event after the one it names as prev
            out = causal_time_order(out, lambda e: (e["id"], e["ts"], e.get("prev", "")))
        return out[-limit:] if limit else out

    def rebuild(
        self, progress: Progress | None = None, *, embedding: Progress | None = None, wait: bool = True
    ) -> dict[str, Any]:
        """Drop the project's derived state and fold its journal again, then write a snapshot; with
        ``wait=False`` the snapshot file is written by a thread: answers are ready when this returns,
        and :meth:`wait_snapshot` (or closing) waits for the file. ``progress`` and ``embedding`` are
        called with (done, of) as events are folded and texts embedded. Returns what was folded: the
        events, segments and bytes of the journal, the live memories and links, the unknown event
        types and the corrupt lines."""
        store = self.project
        store.embed_progress = embedding
        events = store.rebuild(progress, wait=wait)
        segments = store.journal.segments()
        with store.read() as view:
            state = view.fold
            memories = sum(1 for memory_id in state.memories if state.visible(memory_id) is not None)
            links = sum(1 for link in state.links.values() if link.alive)
            unknown = dict(state.unknown)
            problems = view.problems()
        return {
            "events": events,
            "segments": len(segments),
            "journal_bytes": sum(s.size for s in segments),
            "memories": memories,
            "links": links,
            "unknown_events": unknown,
            "corrupt_lines": [{"segment": p.path, "offset": p.offset, "reason": p.reason} for p in problems],
        }

    def wait_snapshot(self) -> None:
        """Wait until a snapshot being written in the background (see :meth:`rebuild`) is on disk."""
        self.project.wait_snapshot()

    def health(self) -> dict[str, Any]:
        """The project journal read whole, for the doctor: its segments, every corrupt line (a loaded
        snapshot's lines too), torn tails, quarantined and refused segments, unknown event types, and
        the embedder and its cache."""
        store = self.project
        segments = store.journal.segments()
        with store.read() as view:
            unknown = view.unknown_event_types()
        torn: list[dict[str, Any]] = []
        corrupt: list[dict[str, Any]] = []
        for segment in segments:
            result = store.journal.scan(segment.path, 0, name=segment.name)
            corrupt.extend({"segment": p.path, "offset": p.offset, "reason": p.reason} for p in result.corrupt)
            if result.torn_tail:
                torn.append({"segment": segment.name, "bytes": result.torn_tail})
        return {
            "segments": [{"name": s.name, "bytes": s.size} for s in segments],
            "corrupt_lines": corrupt,
            "torn_tails": torn,
            "quarantined": store.journal.quarantined(),
            "unknown_event_types": unknown,
            "refused_segments": dict(store.journal.refused),
            "embedder": store.embedder.model_id,
            "cached_embeddings": len(store.embeddings),
        }

    def warnings(self) -> list[str]:
        """Problems the caller should know about (corrupt journal lines, quarantined torn tails, refused
        segments, ignored settings), in words; after a recall in this thread, also whether it had to do
        without vectors (see :meth:`search_notes`)."""
        corrupt: list[str] = []
        for store in self.stores():
            with store.read() as view:
                corrupt += [f"{problem}. Run `eventmem replay audit` for details." for problem in view.problems()]
        return (
            corrupt
            + [note for store in self.stores() for note in store.journal.quarantined()]
            + [reason for store in self.stores() for reason in store.journal.refused.values()]
            + self.shared.ignored_settings
            + self.search_notes()
        )

    def vector_status(self) -> str:
        """The project store's vectors: ``ready``, ``loading``, ``embedding`` or ``unavailable``."""
        return self.project.vector_status()
