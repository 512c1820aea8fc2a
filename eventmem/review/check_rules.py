"""The rules ``eventmem check`` holds added events to: no reused id, no unknown memory, no far-future stamp."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import (
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.ids import iso_to_epoch
from eventmem.review.audit_report import Finding
from eventmem.review.check_git import Line, error_finding
from eventmem.review.check_segments import Decoded

__all__ = ["FUTURE_SECONDS", "Rules", "segment_name_ok"]

FUTURE_SECONDS: Final = 300.0


class Rules:
    """The rules about added events, against the base's journal and the other added events."""

    def __init__(self, base: list[Decoded], now: float, commit_times: dict[tuple[str, int], float]) -> None:
        self.now = now
        self.commit_times = commit_times
        self.by_id: dict[str, Decoded] = {}
        self.creators: dict[str, str] = {}
        self.memories: set[str] = set()
        self.links: set[str] = set()
        for event in base:
            self.by_id.setdefault(event.id, event)
            self._learn(event)

    def _learn(self, event: Decoded) -> None:
        if isinstance(event, MemorySaved):
            self.memories.add(event.memory)
            self.creators.setdefault(event.memory, event.by)
        elif isinstance(event, LinkAdded):
            self.links.add(event.link)

    def apply(self, events: list[tuple[Line, Decoded]], findings: list[Finding]) -> None:
        from eventmem.core.sections import SECTIONS

        sections = {section.memory_id for section in SECTIONS if section.singleton}
        base_ids = set(self.by_id)
        for _, event in events:  # the branch may save a memory after an event about it
            if event.id not in base_ids:
                self._learn(event)
        seen: dict[str, Decoded] = {}
        for line, event in events:

            def report(code: str, message: str, line: Line = line) -> None:
                findings.append(error_finding(code, line.path, line.number, line.offset, message))

            self._future(line, event, report)
            earlier = self.by_id.get(event.id) if event.id in base_ids else seen.get(event.id)
            if earlier is not None and earlier != event:
                where = "the base" if event.id in base_ids else "another added line"
                report("reused-id", f"event id {event.id} is already used by {where}, with different content")
            seen.setdefault(event.id, event)
            if isinstance(event, UnknownEvent) or earlier is not None:
                continue
            if isinstance(event, MemoryArchived) and not segment_name_ok(event.segment):
                report(
                    "bad-segment",
                    f"archived event {event.id} names the segment {event.segment!r}, not a file of archive/ or "
                    "journal/ (a path that leads elsewhere is never a segment)",
                )
            if isinstance(event, MemorySaved) and event.memory not in sections:
                creator = self.creators.get(event.memory, event.by)
                if creator != event.by:
                    report("reused-id", f"memory id {event.memory} already exists, created by {creator or '?'!r}")
            for missing, what in self._references(event):
                report(
                    "unknown-memory", f"{tag_of(event)} event {event.id} is about {what} {missing}, unknown to the base"
                )

    def _future(self, line: Line, event: Decoded, report: Any) -> None:
        try:
            at = iso_to_epoch(event.ts)
        except (ValueError, OverflowError):
            return
        committed = self.commit_times.get((line.path, line.number), self.now)
        limit, what = (committed, "the commit that added it") if committed < self.now else (self.now, "now")
        if at - limit > FUTURE_SECONDS:
            moment = f"{datetime.fromtimestamp(limit, UTC):%Y-%m-%dT%H:%M:%SZ}"
            report("future-stamp", f"event {event.id} is stamped {event.ts}, {at - limit:.0f}s after {what} ({moment})")

    def _references(self, event: Decoded) -> list[tuple[str, str]]:
        match event:
            case LinkAdded():
                return [(m, "memory") for m in (event.source, event.target) if m not in self.memories]
            case LinkRemoved():
                return [] if event.link in self.links else [(event.link, "link")]
            case MemoryUpdated() | MemoryPromoted() | MemoryDeleted() | MemoryRestored() | MemoryExpired():
                return [] if event.memory in self.memories else [(event.memory, "memory")]
        return []


def segment_name_ok(name: str) -> bool:
    """Whether an ``archived`` event's segment is a file right inside ``archive/`` or ``journal/``."""
    folder, _, file = name.partition("/")
    return (
        folder in ("archive", "journal")
        and file.endswith(".jsonl")
        and "/" not in file
        and "\\" not in file
        and "\0" not in file
        and file not in (".jsonl", "..jsonl")
        and not file.startswith(".")
    )


def tag_of(event: Decoded) -> str:
    return event.type if isinstance(event, UnknownEvent) else str(event.__struct_config__.tag)
