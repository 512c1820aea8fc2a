"""What a journal diff holds: the memories and links that changed, and how."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventmem.review.concurrency import ConcurrentEdit

__all__ = ["HEADINGS", "FieldChange", "JournalDiff", "LinkChange", "MemoryChange"]

#: The order changes are listed in, and the heading each gets in a pull request summary.
HEADINGS: Final = {
    "added": "Added",
    "changed": "Changed",
    "promoted": "Promoted",
    "deleted": "Deleted",
    "expired": "Expired",
    "restored": "Restored",
    "archived": "Archived",
    "removed": "Gone from the journal",
}


class FieldChange(msgspec.Struct, kw_only=True):
    field: str
    old: Any
    new: Any
    words: str = ""
    """For a long text: the words that changed, ``[-old-]{+new+}``, with a little context."""


class MemoryChange(msgspec.Struct, kw_only=True):
    """One memory that differs; ``changes`` lists every kind of change, the main one first."""

    memory: str
    changes: list[str]
    kind: str
    title: str
    summary: str
    fields: list[FieldChange] = []
    """For ``changed``: each field that differs, old and new value."""
    by: list[str] = []
    """Who wrote the events behind the change (those the new side has and the old side lacks)."""
    at: str = ""
    """The time of the latest of those events."""
    reasons: list[str] = []
    partial: bool = False
    """The memory's ``saved`` event is on neither side (a diff of one segment): old values unknown."""


class LinkChange(msgspec.Struct, kw_only=True):
    link: str
    change: str
    """``linked`` or ``unlinked``."""
    source: str
    target: str
    relation: str


class JournalDiff(msgspec.Struct, kw_only=True):
    old: str
    new: str
    memories: list[MemoryChange]
    links: list[LinkChange]
    events_added: int
    events_removed: int
    unknown_added: dict[str, int]
    """Events of types this version does not know, among those added: kept, not described."""
    overridden: list[ConcurrentEdit] = []
    """Concurrent edits involving an added event: one writer's value lost to another's, neither
    having seen the other (judged from the journal alone, see :mod:`eventmem.review.concurrency`)."""
    corrupt_added: list[str] = []
    """Lines of the new side that do not decode and are not on the old side (file, byte offset,
    line, reason): left out of the fold, so said here rather than skipped silently."""

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(HEADINGS, 0)
        for change in self.memories:
            for kind in change.changes:
                counts[kind] += 1
        return {kind: n for kind, n in counts.items() if n}
