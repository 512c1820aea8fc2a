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
  settles them deterministically. Defined in :mod:`eventmem.concurrency` (git history is used as
  evidence of what a writer had seen when the project is a git working tree).

The whole journal is read once; duplicates are confirmed by reading back just the lines involved,
so memory use is one small entry per event id, not the events themselves.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from eventmem.codec import LineError, UnknownEvent, decode_line
from eventmem.concurrency import Collector, ConcurrentEdit
from eventmem.events import (
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
from eventmem.gitrunner import GitError, run_git
from eventmem.ids import iso_to_epoch
from eventmem.journal import Journal, Segment
from eventmem.limits import MAX_CONFIG_BYTES, MAX_LINE_BYTES
from eventmem.project import ProjectPaths
from eventmem.state import event_digest
from eventmem.terminal import printable

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
    "audit",
    "conflicting_ids",
    "findings",
    "future_stamps",
    "trust_findings",
]

FUTURE_SECONDS = 300.0
"""A stamp more than this ahead of the reader's clock is reported."""


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


# -- findings ----------------------------------------------------------------------------------


def findings(report: AuditReport, memory_dir: str = ".eventmem") -> list[Finding]:
    """The audit's errors and warnings as findings, each with its segment's line number; paths are
    ``memory_dir`` (the project's ``.eventmem/``, relative to the project) joined with the segment."""
    located: list[tuple[str, str, int, str, Literal["error", "warning"]]] = [
        ("corrupt-line", line.segment, line.offset, f"not an event: {line.reason}", "error")
        for line in report.corrupt_lines
    ]
    for dup in report.duplicate_ids:
        how = "identical copies" if dup.identical else "copies with different content"
        located.extend(
            ("duplicate-id", loc.segment, loc.offset, f"event id {dup.id} has {how}", dup.severity)
            for loc in dup.locations
        )
    for ref in report.unknown_references:
        what = "link" if ref.role == "link" else "memory"
        message = f"{ref.type} event {ref.event} is about unknown {what} {ref.missing}"
        located.append(("unknown-memory", ref.segment, ref.offset, message, "error"))
    located.extend(
        ("torn-tail", tail.segment, tail.offset, f"{tail.bytes} unterminated bytes", "warning")
        for tail in report.torn_tails
    )
    for skew in report.clock_skew:
        if skew.problem == "future":
            message = f"event {skew.event} is stamped {skew.ts}, {skew.seconds:.0f}s in the future"
            located.append(("future-stamp", skew.segment, skew.offset, message, "warning"))
    lines = _line_numbers(Path(report.root) / memory_dir, {(segment, offset) for _, segment, offset, _, _ in located})
    out = [
        Finding(
            code=code,
            severity=severity,
            path=f"{memory_dir}/{segment}",
            line=lines.get((segment, offset), 0),
            offset=offset,
            message=message,
        )
        for code, segment, offset, message, severity in located
    ]
    out.sort(key=lambda f: (f.path, f.offset, f.code))
    return out + list(report.trust)


def _line_numbers(base: Path, places: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The 1-based line number of each (segment, byte offset), counting newlines before it."""
    by_segment: dict[str, list[int]] = {}
    for segment, offset in places:
        by_segment.setdefault(segment, []).append(offset)
    numbers: dict[tuple[str, int], int] = {}
    for segment, offsets in by_segment.items():
        try:
            fd = os.open(base / segment, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max(offsets))
        for offset in offsets:
            numbers[(segment, offset)] = data.count(b"\n", 0, offset) + 1
    return numbers


def trust_findings(root: Path) -> list[Finding]:
    """Symlinks in ``.eventmem/`` (its cache aside) or in the render folder, and settings of
    ``.eventmem/config.toml`` that reach the network or read the environment."""
    from eventmem.config import is_approved, network_settings

    found: list[Finding] = []
    table = _config_table(root / ".eventmem" / "config.toml")
    folders = [".eventmem"]
    render = table.get("render_ai_dir")
    if isinstance(render, str) and _inside(render):
        folders.append(os.path.normpath(render))
        # a folder on the way to it that is a link leads the view's files out of the project too
        linked = [
            parent for parent in reversed(Path(folders[-1]).parents) if parent.parts and (root / parent).is_symlink()
        ]
        if linked:
            found.extend(_symlinks(root, linked[0].as_posix()))
            folders.pop()
    for folder in folders:
        found.extend(_symlinks(root, folder))
    found.extend(_tracked_cache(root))
    text = _read_capped(root / ".eventmem" / "config.toml")
    settings = network_settings(table)
    approved = bool(settings) and is_approved(root / ".eventmem" / "config.toml")
    for setting in settings:
        key = setting.split(" =", 1)[0]
        message = f"tracked setting {setting}; a tracked setting may only choose what stays on the machine"
        if approved:  # the user's own choice on this machine: noted, and still an error for `eventmem check`
            message = f"tracked setting {setting}; in effect here by `eventmem allow`"
        found.append(
            Finding(
                code="network-setting",
                severity="warning" if approved else "error",
                path=".eventmem/config.toml",
                line=setting_line(text, key),
                offset=-1,
                message=message,
            )
        )
    return found


def _tracked_cache(root: Path) -> list[Finding]:
    """Files of ``.eventmem/cache/`` or ``.eventmem/local/`` that git tracks: each clone's own, so a
    tracked one came from someone else (a snapshot can hold memories that no journal line has)."""
    if not os.path.lexists(root / ".git"):
        return []
    try:
        listed = run_git(root, "ls-files", "-z", "--", ".eventmem/cache", ".eventmem/local", timeout=30, check=False)
    except GitError:
        return []
    message = "a file of this clone's own cache is tracked by git: remove it from the index (`git rm --cached`)"
    return [
        Finding(code="tracked-cache", severity="error", path=name, line=0, offset=-1, message=message)
        for name in sorted(os.fsdecode(item) for item in listed.stdout.split(b"\0") if item)
    ]


def _inside(folder: str) -> bool:
    """A folder named in a setting that stays inside the project (anything else is not walked)."""
    return bool(folder.strip()) and not os.path.isabs(folder) and "\0" not in folder and ".." not in Path(folder).parts


def setting_line(text: str, key: str) -> int:
    """The 1-based line where ``key = …`` is set in a TOML text (1 when it cannot be told)."""
    for number, line in enumerate(text.splitlines(), 1):
        name = line.split("=", 1)[0].strip().strip("\"'")
        if "=" in line and name == key:
            return number
    return 1


def _symlinks(root: Path, folder: str) -> list[Finding]:
    found: list[Finding] = []
    message = "a symlink: paths must never leave the project (git stores it as mode 120000)"
    top = root / folder
    if top.is_symlink():
        return [Finding(code="symlink", severity="error", path=folder, line=0, offset=-1, message=message)]
    for here, dirs, files in os.walk(top):
        relative = os.path.relpath(here, root)
        if relative == os.path.join(".eventmem", "cache"):
            dirs.clear()
            continue
        for name in sorted(dirs + files):
            if os.path.islink(os.path.join(here, name)):
                path = os.path.join(relative, name)
                found.append(Finding(code="symlink", severity="error", path=path, line=0, offset=-1, message=message))
    return found


def _read_capped(path: Path) -> str:
    try:  # a symlinked config is reported, never followed
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")


def _config_table(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(_read_capped(path))
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}
