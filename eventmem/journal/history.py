"""The journal as it is on disk or as it was at a git revision, folded as of any moment.

A :class:`History` is the set of events of one journal (journal and archive segments) together with
where each line is. It comes from the working tree (:func:`read_worktree`), from any folder or file
(:func:`load` with a path), or from a git revision (:func:`read_revision`: ``git ls-tree`` and one
``git cat-file --batch``; git runs here, never on the hot path of a server).

Time travel folds a subset of the events: everything stamped at or before a time, at or before one
event (its stamp: time, then event id, the order the fold itself uses), or everything a revision
held. :func:`memory_log` tells the story of one memory, event by event, with what each one changed.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.errors import InvalidInput, JournalCorrupt
from eventmem.core.events import AnyEvent, LinkAdded, LinkRemoved, memory_ids
from eventmem.core.ids import parse_iso, to_iso
from eventmem.core.records import (
    REGISTERS,  # the fold's own list of last-writer-wins fields
    MemoryRecord,
)
from eventmem.core.stamps import causal_time_order, stamp_of
from eventmem.core.state import State
from eventmem.journal.decoder import decode_bytes
from eventmem.journal.gitrunner import GitError, git_bytes
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths

__all__ = [
    "AsOf",
    "Entry",
    "History",
    "HistoryError",
    "LogLine",
    "as_of",
    "cat_file",
    "decode_segment",
    "default_base",
    "git",
    "load",
    "memory_log",
    "merge_base",
    "read_revision",
    "read_worktree",
    "status_at",
]

Decoded = AnyEvent | UnknownEvent
WORKTREE = "WORKTREE"
"""The spelling of "the journal as it is in the working tree" wherever a revision is expected."""
_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
_SEGMENT_DIRS = (".eventmem/archive", ".eventmem/journal")


class HistoryError(InvalidInput):
    """A revision, path, time or event id that cannot be read or found."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One event and where its line is: the segment (relative to ``.eventmem/``) and byte offset."""

    event: Decoded
    segment: str
    offset: int

    @property
    def stamp(self) -> str:
        return stamp_of(self.event.ts, self.event.id)


@dataclass(slots=True)
class History:
    """The events of one journal, as read from one place (``source`` says which)."""

    source: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[JournalCorrupt] = field(default_factory=list)

    def fold(self, until: str | None = None) -> State:
        """The state folded from every event, or from those stamped at or before ``until``."""
        state = State()
        with _no_gc():
            state.fold([entry.event for entry in self.entries if until is None or entry.stamp <= until])
        return state

    def ids(self) -> set[str]:
        return {entry.event.id for entry in self.entries}

    def find(self, event_id: str) -> Entry | None:
        return next((entry for entry in self.entries if entry.event.id == event_id), None)


# -- reading -----------------------------------------------------------------------------------


def decode_segment(data: bytes, name: str) -> tuple[list[Entry], list[JournalCorrupt]]:
    """Decode one segment's bytes with the journal's decoder (:func:`eventmem.journal.journal.decode_bytes`):
    an unterminated tail counts when it is a complete event, as it does for a reader of the file."""
    result = decode_bytes(data, name, with_offsets=True)
    entries = [Entry(event, name, offset) for event, offset in zip(result.events, result.offsets, strict=True)]
    return entries, result.corrupt


@contextmanager
def _no_gc() -> Iterator[None]:
    """Bulk decoding and folding make many young objects: the cyclic GC would cost most of the time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _history(source: str, segments: Iterable[tuple[str, bytes]]) -> History:
    history = History(source)
    with _no_gc():
        for name, data in segments:
            entries, problems = decode_segment(data, name)
            history.entries.extend(entries)
            history.problems.extend(problems)
    return history


def read_worktree(paths: ProjectPaths, *, source: str = WORKTREE) -> History:
    """The journal as it is on disk now (journal and archive segments)."""
    return _history(source, ((s.name, s.path.read_bytes()) for s in Journal(paths).segments()))


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """:func:`eventmem.journal.gitrunner.git_bytes`, a failure as :class:`HistoryError` with git's own message."""
    try:
        return git_bytes(root, *args, stdin=stdin)
    except GitError as exc:
        raise HistoryError(str(exc)) from None


def read_revision(root: Path, rev: str) -> History:
    """The journal as the commit ``rev`` holds it (``root`` is the project root, inside the repo)."""
    try:
        commit = git_bytes(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except GitError as exc:  # (git missing or too slow: said as such)
        reason = f"{rev!r} is neither a path nor a git revision of {root}" if exc.returncode else str(exc)
        raise HistoryError(reason) from None
    listing = git(root, "ls-tree", "-r", "-z", commit, "--", *_SEGMENT_DIRS)
    blobs: list[tuple[str, str]] = []
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.decode("utf-8", "surrogateescape").partition("\t")
        mode, kind, oid = meta.split()
        if kind == "blob" and path.endswith(".jsonl") and mode != "120000":
            blobs.append((path.removeprefix(".eventmem/"), oid))
    blobs.sort()
    contents = cat_file(root, [oid for _, oid in blobs])
    return _history(
        f"{rev} ({commit[:12]})", ((name, data or b"") for (name, _), data in zip(blobs, contents, strict=True))
    )


def cat_file(root: Path, specs: Sequence[str]) -> list[bytes | None]:
    """The bytes of each object (``<oid>`` or ``<rev>:<path>``) through one ``git cat-file
    --batch``, in order; ``None`` for one that does not exist."""
    if not specs:
        return []
    out = git(root, "cat-file", "--batch", stdin="".join(f"{spec}\n" for spec in specs).encode())
    found: list[bytes | None] = []
    position = 0
    for _ in specs:
        header_end = out.index(b"\n", position)
        header = out[position:header_end].split()
        position = header_end + 1
        if len(header) != 3 or not header[2].isdigit():  # "<spec> missing" or "ambiguous"
            found.append(None)
            continue
        size = int(header[2])
        found.append(out[position : position + size])
        position += size + 1
    return found


def _read_path(path: Path) -> History:
    if path.is_file():
        return _history(str(path), [(f"journal/{path.name}", path.read_bytes())])
    project = path if (path / ".eventmem").is_dir() else path.parent if path.name == ".eventmem" else None
    if project is not None:
        return read_worktree(ProjectPaths(project), source=str(path))
    files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
    return _history(str(path), ((f"{path.name}/{p.name}", p.read_bytes()) for p in files))


def load(root: Path, spec: str) -> History:
    """A journal named by the user: ``WORKTREE`` (or ``.``), a path (a project, its ``.eventmem/``,
    a folder of segments or one segment file), else a git revision of the project at ``root``."""
    if spec in (WORKTREE, "", "."):
        return read_worktree(ProjectPaths(root))
    path = Path(spec)
    if path.exists():
        return _read_path(path)
    return read_revision(root, spec)


def merge_base(root: Path, a: str, b: str, *, names: tuple[str, str] | None = None) -> str:
    """The commit ``a`` and ``b`` forked from; a :class:`HistoryError` naming the rewrite when they share
    none (``names``: how to call them in it)."""
    try:
        return git_bytes(root, "merge-base", a, b).decode().strip()
    except GitError as exc:
        if exc.returncode != 1:
            raise HistoryError(str(exc)) from None
    one, other = names or (a, b)
    raise HistoryError(
        f"{one} and {other} have no commit in common: the history was rewritten (a force-push of a rebased or "
        f"squashed branch, a filtered repository) or they are unrelated; nothing can be compared. Check "
        f"against the base {other} was made from, or fetch {one} again"
    )


def default_base(root: Path) -> str:
    """The branch a pull request most likely targets: ``origin/HEAD``, else main, else master."""
    for candidate in ("origin/HEAD", "main", "master", "origin/main", "origin/master"):
        try:
            git(root, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
        except HistoryError:
            continue
        return candidate
    raise HistoryError("no base given and none of origin/HEAD, main or master exists")


# -- time travel -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AsOf:
    state: State
    description: str
    """What was folded, in words: ``as of 2026-01-05T10:02:00.000000Z``, ``as of event …``."""
    moment: datetime | None
    """The time looked at (``None`` for a revision: its journal as committed, whatever the time)."""


def as_of(root: Path, when: str, *, history: History | None = None) -> AsOf:
    """The state as of ``when``: an event id (everything up to and including that event), a time
    (``2026-01-05``, ``2026-01-05T10:02:00Z``: everything stamped at or before it) or a git
    revision (everything that revision's journal held). ``history`` defaults to the working tree."""
    if _ULID.match(when.upper()):
        history = history or read_worktree(ProjectPaths(root))
        entry = history.find(when.upper())
        if entry is not None:
            event = entry.event
            return AsOf(history.fold(entry.stamp), f"as of event {event.id} ({event.ts})", parse_iso(event.ts))
    moment = _parse_time(when)
    if moment is not None:
        history = history or read_worktree(ProjectPaths(root))
        limit = to_iso(moment)
        # every event id sorts below "~": all events of that very microsecond are included
        return AsOf(history.fold(limit + "~"), f"as of {limit}", moment)
    try:
        revision = read_revision(root, when)
    except HistoryError:
        raise HistoryError(f"{when!r} is not a time, an event id of the journal, or a git revision") from None
    return AsOf(revision.fold(), f"as of revision {revision.source}", None)


def _parse_time(text: str) -> datetime | None:
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return None
    try:
        moment = parse_iso(text)
    except ValueError:
        return None
    if len(text) == 10:  # a bare date means the end of that day
        moment = moment.replace(hour=23, minute=59, second=59, microsecond=999999)
    return moment


def status_at(record: MemoryRecord, moment: datetime | None = None) -> str:
    """The status a reader saw at ``moment``: a TTL that had run out counts as expired."""
    status = record.status
    if status == "live" and record.ttl_seconds is not None and moment is not None:
        expires = parse_iso(record.ttl_set_at).timestamp() + record.ttl_seconds
        if expires <= moment.astimezone(UTC).timestamp():
            return "expired"
    return status


# -- the story of one memory ---------------------------------------------------------------------


class LogLine(msgspec.Struct, kw_only=True):
    """One event in a memory's history and what it changed there."""

    ts: str
    event: str
    type: str
    by: str
    segment: str
    offset: int
    changes: dict[str, list[Any]] = {}
    """Field name to ``[before, after]``; ``status`` too when the event changed it."""
    note: str = ""
    other: str = ""
    """The memory at a link's other end (``linked``, ``unlinked``), so that a reader can name it."""


def _visible_fields(record: MemoryRecord | None) -> dict[str, Any]:
    if record is None or not record.exists:
        return {}
    values: dict[str, Any] = {name: getattr(record, name) for name in REGISTERS}
    values["status"] = record.status
    return values


def memory_log(history: History, memory_id: str) -> list[LogLine]:
    """Every event about ``memory_id`` (links to and from it included), in time order with each event
    after its ``prev`` (:func:`~eventmem.core.stamps.causal_time_order`), each with the fields it
    changed as the memory looked right before and right after it."""
    ends = {
        entry.event.link: (entry.event.source, entry.event.target)
        for entry in history.entries
        if isinstance(entry.event, LinkAdded)
    }
    mine: dict[str, tuple[Entry, AnyEvent]] = {}  # by event id: a line merged in twice is told once
    for entry in history.entries:
        event = entry.event
        if isinstance(event, UnknownEvent) or event.id in mine:
            continue
        if memory_id in memory_ids(event) or (isinstance(event, LinkRemoved) and memory_id in ends.get(event.link, ())):
            mine[event.id] = (entry, event)
    state = State()
    lines: list[LogLine] = []
    strengths: dict[str, float] = {}  # by link id: its strength so far, to tell a strength update
    ordered = causal_time_order(mine.values(), lambda pair: (pair[1].id, pair[1].ts, pair[1].prev))
    for entry, event in ordered:
        note = _note(event, memory_id)
        if isinstance(event, LinkAdded):
            before_strength = strengths.get(event.link)
            if before_strength is not None and before_strength != event.strength:
                note += f" (strength {before_strength:g} → {event.strength:g})"
            strengths[event.link] = event.strength
        link_ends = (event.source, event.target) if isinstance(event, LinkAdded) else ()
        if isinstance(event, LinkRemoved):
            link_ends = ends.get(event.link, ())
        other = next((end for end in link_ends if end != memory_id), "")
        before = _visible_fields(state.memories.get(memory_id))
        state.apply(event)
        after = _visible_fields(state.memories.get(memory_id))
        if before:
            changes = {k: [before[k], v] for k, v in after.items() if before[k] != v}
        else:  # first seen: what it was saved with (defaults left out, as on the line)
            changes = {k: [None, v] for k, v in after.items() if v not in (None, "", ())}
        lines.append(
            LogLine(
                ts=event.ts,
                event=event.id,
                type=str(type(event).__struct_config__.tag),
                by=event.by,
                segment=entry.segment,
                offset=entry.offset,
                changes=msgspec.to_builtins(changes),
                note=note,
                other=other,
            )
        )
    return lines


def _note(event: AnyEvent, memory_id: str) -> str:
    reason: str = getattr(event, "reason", "")
    if isinstance(event, LinkAdded):
        if event.source == memory_id:
            return f"{event.relation} → {event.target}"
        return f"{event.source} {event.relation} → this"
    if isinstance(event, LinkRemoved):
        return f"link {event.link} removed" + (f": {reason}" if reason else "")
    return reason


def memory_at(record: MemoryRecord, moment: datetime | None = None) -> dict[str, Any]:
    """A memory as a reader saw it at ``moment`` (``eventmem replay at``, the REST ``as_of``)."""
    return {
        "id": record.id,
        "kind": record.kind,
        "scope": record.scope,
        "title": record.title,
        "summary": record.summary,
        "content": record.content,
        "tags": list(record.tags),
        "importance": record.importance,
        "ttl_seconds": record.ttl_seconds,
        "status": status_at(record, moment),
        "created_at": record.created_at,
        "created_by": record.created_by,
        "updated_at": record.updated_at or record.created_at,
        "updated_by": record.updated_by,
    }
