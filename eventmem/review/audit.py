"""A read-only audit of one journal: every line of every segment checked, nothing changed.

What is checked, and how bad each finding is (``report.ok`` is false only for errors):

- **corrupt lines** (error): a complete line that does not decode as an event. Decoding *is* the
  schema check: the line must be JSON with a known ``type`` and fields of the right types, or an
  unknown ``type`` with a string ``id`` and ``ts``.
- **duplicate event ids**: the same event id on two or more lines. When every copy decodes to the
  same event (an identical line brought in twice, e.g. by merging two branches that both carry the
  same history, or a compaction interrupted between writing the archive and cutting the journal),
  it is a *warning*: the fold treats a replayed event as a no-op, so the state is unaffected. When
  the copies differ it is an *error*: every process folds the same copy (the one whose canonical
  line has the smallest SHA-256 digest, named by ``folded``) and ignores the others, so what they
  say is lost. :func:`conflicting_ids` lists these alone.
- **events about unknown memories** (error): ``updated``, ``promoted``, ``deleted``, ``restored``
  or ``expired`` of a memory that no ``saved`` event creates; a ``linked`` whose source or target
  was never saved; an ``unlinked`` of a link that was never added. (``archived`` is left out: it
  names memories in bulk and is the compaction's own bookkeeping.)
- **torn tails** (warning): bytes after the last newline of a segment, a write in progress or cut
  short by a crash; readers stop before them and the next writer cuts them off.
- **unknown event types** (information): lines from a newer version, kept and counted.
- **clock skew** (warning): an event stamped more than ``skew_seconds`` (5 minutes) after the
  audit's own clock, or whose timestamp and the time inside its ULID event id disagree by more than
  that. The fold orders events by time among those written without seeing each other, so a stamp
  far ahead wins over every concurrent edit (an edit made after it names it as ``prev`` and wins).
  :func:`future_stamps` lists the stamps ahead of the clock alone.
- **trust** (error): a symlink inside ``.eventmem/`` or the tracked render folder (paths must never
  leave the project), and a ``.eventmem/config.toml`` setting that reaches the network or reads the
  environment (a tracked setting may only choose what stays on the machine).
- **concurrent edits** (information): two writes to one field of one memory from different segments
  where the later had not seen the earlier, or an edit lost under a concurrent delete; the fold
  settles them deterministically. Defined in :mod:`eventmem.review.concurrency` (git history is used as
  evidence of what a writer had seen when the project is a git working tree).

The whole journal is read once; duplicates are confirmed by reading back just the lines involved,
so memory use is one small entry per event id, not the events themselves.

Its report is in :mod:`eventmem.review.audit_report`, its findings in :mod:`eventmem.review.audit_findings` and its
trust checks in :mod:`eventmem.review.trust_audit`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Literal

from eventmem.core.codec import LineError, UnknownEvent, decode_line
from eventmem.core.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.ids import iso_to_epoch
from eventmem.core.limits import MAX_LINE_BYTES
from eventmem.core.stamps import event_digest
from eventmem.journal.journal import Journal, Segment
from eventmem.journal.project import ProjectPaths
from eventmem.review.audit_report import (
    AuditReport,
    ClockSkew,
    CorruptLine,
    Counts,
    DuplicateId,
    Location,
    TornTail,
    UnknownReference,
)
from eventmem.review.concurrency import Collector
from eventmem.review.trust_audit import trust_findings

__all__ = ["FUTURE_SECONDS", "AuditReport", "audit", "conflicting_ids", "future_stamps"]

FUTURE_SECONDS = 300.0
"""A stamp more than this ahead of the reader's clock is reported."""


def audit(
    paths: ProjectPaths, *, now: float | None = None, skew_seconds: float = 300.0, use_git: bool = True
) -> AuditReport:
    """Check every line of every segment (archive and journal) of the project at ``paths``.

    ``now`` is the audit's clock (default: the time of the call); ``use_git`` lets the concurrent
    edit check consult git history when the project is a git working tree."""
    now = time.time() if now is None else now
    skewed: list[ClockSkew] = []
    collector = Collector()
    segments = Journal(paths).segments()
    counts = Counts(segments=len(segments), bytes=sum(s.size for s in segments))
    corrupt: list[CorruptLine] = []
    torn: list[TornTail] = []
    unknown_types: dict[str, int] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    repeats: dict[str, list[tuple[int, int]]] = {}
    memories: set[str] = set()
    links: set[str] = set()
    # references to ids not created *yet* in scan order; most are resolved by a later segment
    pending: list[UnknownReference] = []

    for index, segment in enumerate(segments):
        result = Journal.scan(segment.path, with_offsets=True, name=segment.name)
        corrupt.extend(CorruptLine(p.path, p.offset, p.reason) for p in result.corrupt)
        if result.torn_tail:
            torn.append(TornTail(segment.name, result.end, result.torn_tail))
        counts.events += len(result.events)
        for event, offset in zip(result.events, result.offsets, strict=True):
            if event.id in first_seen:
                repeats.setdefault(event.id, [first_seen[event.id]]).append((index, offset))
            else:
                first_seen[event.id] = (index, offset)
                collector.add(event, segment.name, offset)
                skewed.extend(_skew(event, segment.name, offset, now, skew_seconds))
            if isinstance(event, UnknownEvent):
                unknown_types[event.type] = unknown_types.get(event.type, 0) + 1
                continue
            refs: tuple[tuple[str, Literal["memory", "source", "target", "link"]], ...] = ()
            match event:
                case MemorySaved():
                    memories.add(event.memory)
                case LinkAdded():
                    links.add(event.link)
                    refs = ((event.source, "source"), (event.target, "target"))
                case LinkRemoved():
                    refs = ((event.link, "link"),)
                case MemoryUpdated() | MemoryPromoted() | MemoryDeleted() | MemoryRestored() | MemoryExpired():
                    refs = ((event.memory, "memory"),)
            for missing, role in refs:
                known = links if role == "link" else memories
                if missing not in known:
                    pending.append(
                        UnknownReference(
                            event=event.id,
                            type=str(event.__struct_config__.tag),
                            missing=missing,
                            role=role,
                            segment=segment.name,
                            offset=offset,
                        )
                    )

    unknown_refs = [ref for ref in pending if ref.missing not in (links if ref.role == "link" else memories)]
    duplicates = [_duplicate(event_id, places, segments) for event_id, places in repeats.items()]
    corrupt.sort(key=lambda c: (c.segment, c.offset))
    counts.distinct_events = len(first_seen)
    counts.memories = len(memories)
    counts.links = len(links)
    counts.corrupt_lines = len(corrupt)
    counts.unknown_events = sum(unknown_types.values())
    trust = trust_findings(paths.root)
    ok = (
        not corrupt
        and not unknown_refs
        and all(d.identical for d in duplicates)
        and all(finding.severity != "error" for finding in trust)
    )
    return AuditReport(
        root=str(paths.root),
        ok=ok,
        counts=counts,
        corrupt_lines=corrupt,
        duplicate_ids=duplicates,
        unknown_references=unknown_refs,
        torn_tails=torn,
        unknown_types=dict(sorted(unknown_types.items())),
        clock_skew=skewed,
        concurrent_edits=collector.find(_reader(segments), git_root=paths.root if use_git else None),
        trust=trust,
    )


_CROCKFORD = {char: value for value, char in enumerate("0123456789ABCDEFGHJKMNPQRSTVWXYZ")}


def _ulid_seconds(event_id: str) -> float | None:
    """The time inside a ULID event id, or ``None`` when the id is not a ULID."""
    if len(event_id) != 26:
        return None
    value = 0
    for char in event_id[:10]:
        digit = _CROCKFORD.get(char)
        if digit is None:
            return None
        value = value * 32 + digit
    return value / 1000.0


def _skew(event: AnyEvent | UnknownEvent, segment: str, offset: int, now: float, limit: float) -> list[ClockSkew]:
    try:
        at = iso_to_epoch(event.ts)
    except ValueError:
        return []
    problems: list[tuple[Literal["future", "id_mismatch"], float]] = []
    if at - now > limit:
        problems.append(("future", at - now))
    minted = _ulid_seconds(event.id)
    if minted is not None and abs(at - minted) > limit:
        problems.append(("id_mismatch", abs(at - minted)))
    by = "" if isinstance(event, UnknownEvent) else event.by
    return [
        ClockSkew(
            event=event.id, ts=event.ts, by=by, problem=kind, seconds=round(far, 3), segment=segment, offset=offset
        )
        for kind, far in problems
    ]


def _reader(segments: Sequence[Segment]) -> Callable[[str, int], AnyEvent | UnknownEvent | None]:
    """Reads back the event at (segment name, offset), one line at a time."""
    by_name = {segment.name: segment for segment in segments}
    return lambda name, offset: _event_at(by_name[name], offset)


def _duplicate(event_id: str, places: list[tuple[int, int]], segments: list[Segment]) -> DuplicateId:
    """Read back each copy of a repeated event id and compare what they decode to."""
    copies = [_event_at(segments[index], offset) for index, offset in places]
    identical = all(copy is not None and copy == copies[0] for copy in copies)
    locations = [Location(segments[index].name, offset) for index, offset in places]
    folded = None
    if all(copy is not None for copy in copies):
        digests = [event_digest(copy) for copy in copies if copy is not None]
        folded = locations[digests.index(min(digests))]
    return DuplicateId(
        id=event_id,
        locations=locations,
        identical=identical,
        severity="warning" if identical else "error",
        folded=folded,
    )


def future_stamps(
    paths: ProjectPaths, *, now: float | None = None, ahead_seconds: float = FUTURE_SECONDS
) -> list[ClockSkew]:
    """Every event of the project at ``paths`` stamped more than ``ahead_seconds`` after ``now``
    (default: the time of the call), with its segment and byte offset, in journal order."""
    now = time.time() if now is None else now
    found: list[ClockSkew] = []
    for segment in Journal(paths).segments():
        result = Journal.scan(segment.path, with_offsets=True, name=segment.name)
        for event, offset in zip(result.events, result.offsets, strict=True):
            found.extend(s for s in _skew(event, segment.name, offset, now, ahead_seconds) if s.problem == "future")
    return found


def conflicting_ids(paths: ProjectPaths) -> list[DuplicateId]:
    """Event ids carried by lines that differ, each with the copy folded (see :class:`DuplicateId`)."""
    segments = Journal(paths).segments()
    first_seen: dict[str, tuple[int, int]] = {}
    repeats: dict[str, list[tuple[int, int]]] = {}
    for index, segment in enumerate(segments):
        result = Journal.scan(segment.path, with_offsets=True, name=segment.name)
        for event, offset in zip(result.events, result.offsets, strict=True):
            if event.id in first_seen:
                repeats.setdefault(event.id, [first_seen[event.id]]).append((index, offset))
            else:
                first_seen[event.id] = (index, offset)
    duplicates = (_duplicate(event_id, places, segments) for event_id, places in repeats.items())
    return [duplicate for duplicate in duplicates if not duplicate.identical]


def _event_at(segment: Segment, offset: int) -> AnyEvent | UnknownEvent | None:
    try:
        with open(segment.path, "rb") as handle:
            handle.seek(offset)
            return decode_line(handle.readline(MAX_LINE_BYTES + 1).rstrip(b"\n"))  # (longer: refused by the decoder)
    except (OSError, LineError):  # the file changed since it was scanned: cannot confirm identity
        return None
