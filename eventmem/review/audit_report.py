"""What an audit of a journal found: its report, and a finding as ``eventmem check`` and ``doctor`` tell it."""

from __future__ import annotations

from typing import Literal

import msgspec

from eventmem.core.terminal import printable
from eventmem.review.concurrency import ConcurrentEdit

__all__ = [
    "AuditReport",
    "ClockSkew",
    "CorruptLine",
    "Counts",
    "DuplicateId",
    "Finding",
    "Location",
    "TornTail",
    "UnknownReference",
]


class Location(msgspec.Struct, frozen=True):
    """Where a line starts: the segment (relative to ``.eventmem/``) and its byte offset."""

    segment: str
    offset: int


class CorruptLine(msgspec.Struct, frozen=True):
    segment: str
    offset: int
    reason: str


class TornTail(msgspec.Struct, frozen=True):
    segment: str
    offset: int
    """Where the unterminated bytes start (the end of the last complete line)."""
    bytes: int


class DuplicateId(msgspec.Struct, kw_only=True):
    id: str
    locations: list[Location]
    identical: bool
    """Every copy decodes to the same event."""
    severity: Literal["error", "warning"]
    folded: Location | None = None
    """The copy every process folds (the smallest digest of the canonical line); ``None`` when
    a copy could not be read back."""


class UnknownReference(msgspec.Struct, frozen=True, kw_only=True):
    """An event about a memory (or link) that no event in the journal creates."""

    event: str
    type: str
    missing: str
    """The memory id (or, for ``unlinked``, the link id) that is never created."""
    role: Literal["memory", "source", "target", "link"]
    segment: str
    offset: int


class ClockSkew(msgspec.Struct, frozen=True, kw_only=True):
    """An event whose timestamp is in the future, or far from the time inside its event id."""

    event: str
    ts: str
    by: str
    problem: Literal["future", "id_mismatch"]
    seconds: float
    """How far ahead of the audit's clock, or how far from the id's time."""
    segment: str
    offset: int


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One problem, told alike by ``audit``, ``doctor`` and ``check``: ``path:line: message``."""

    code: str
    """What kind: ``corrupt-line``, ``duplicate-id``, ``unknown-memory``, ``future-stamp``, ``symlink``…"""
    severity: Literal["error", "warning"]
    path: str
    """The file, relative to the project (doctor, audit) or the repository (check)."""
    line: int
    """1-based line number in that file; 0 when the finding is about the whole file."""
    offset: int
    """Byte offset of that line; -1 when the finding is about the whole file."""
    message: str

    def render(self) -> str:
        where = f"{printable(self.path)}:{self.line}:"
        at = f" (byte {self.offset})" if self.offset >= 0 else ""
        return f"{where} {self.severity}: {printable(self.message)}{at}"


class Counts(msgspec.Struct, kw_only=True):
    segments: int = 0
    bytes: int = 0
    events: int = 0
    """Lines that decode as events (unknown types and duplicate copies included)."""
    distinct_events: int = 0
    memories: int = 0
    """Distinct memory ids that some ``saved`` event creates."""
    links: int = 0
    corrupt_lines: int = 0
    unknown_events: int = 0


class AuditReport(msgspec.Struct, kw_only=True):
    root: str
    ok: bool
    """No corrupt line, no duplicate id with differing content, no event about an unknown memory."""
    counts: Counts
    corrupt_lines: list[CorruptLine]
    duplicate_ids: list[DuplicateId]
    unknown_references: list[UnknownReference]
    torn_tails: list[TornTail]
    unknown_types: dict[str, int]
    """Events of types this version does not know, by type: kept, skipped by projectors."""
    clock_skew: list[ClockSkew] = []
    concurrent_edits: list[ConcurrentEdit] = []
    trust: list[Finding] = []
    """Symlinks in ``.eventmem/`` or the render folder, tracked settings that reach the network."""

    @property
    def errors(self) -> int:
        duplicates = sum(1 for d in self.duplicate_ids if d.severity == "error")
        trust = sum(1 for finding in self.trust if finding.severity == "error")
        return len(self.corrupt_lines) + duplicates + len(self.unknown_references) + trust

    @property
    def warnings(self) -> int:
        duplicates = sum(1 for d in self.duplicate_ids if d.severity == "warning")
        return len(self.torn_tails) + duplicates + len(self.clock_skew)
