"""Concurrent edits: two writers changed the same memory and neither knew of the other's change.

The fold settles every such case deterministically (last writer wins per field by stamp; a delete
is a tombstone), so nothing conflicts; but the losing value was written by someone who never saw
the winner, and a reviewer wants to know. This module finds those cases.

**Writes.** ``saved`` writes every field of a memory, ``updated`` the fields it names, ``promoted``
writes ``ttl_seconds``. A *segment* (``journal/<writer>.<branch>.jsonl``) is one clone writing on
one branch; its lines are in the order that writer appended them.

**Concurrent edit.** Writes ``w1`` and ``w2`` to the same field of the same memory, adjacent in
stamp order (``w1`` older), are a concurrent edit when (1) they come from different segments,
(2) their values differ (an equal value loses nothing), and (3) ``w2`` had not *seen* ``w1``.
So are a ``deleted`` and an edit of a memory that ends deleted, from different segments, when the
later of the two had not seen the earlier (the edit is lost under the tombstone).

**Seen.** A write counts as having seen another when there is evidence of it:

- *journal*: ``w2``'s segment holds, at or before ``w2``'s line, an event about a memory (an
  update, promote, delete, restore, expire, archive, or a link naming it) whose only ``saved``
  event lies in ``w1``'s segment at or after ``w1``'s line. Such an event can only be written by
  someone who had read that segment at least that far, and segments only grow.
- *git* (a working tree of a git repository): the commit that added ``w2``'s line (``git blame``)
  has a first parent whose copy of ``w1``'s segment already holds ``w1``. A line not committed yet
  counts as written on top of the working tree, which holds ``w1``.

Without evidence, the pair is reported. Limits, both deterministic: without git, an edit made
after merging the other branch looks exactly like one made before (the journal alone cannot tell
them apart), so it is reported; with git, a line written before a merge but committed after it
counts as seen. Each event id is counted once, however many lines carry it.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import (
    AnyEvent,
    MemoryDeleted,
    MemoryPromoted,
    MemorySaved,
    MemoryUpdated,
    memory_ids,
)
from eventmem.core.records import REGISTERS
from eventmem.core.stamps import stamp_of
from eventmem.core.state import State
from eventmem.journal.history import Entry, HistoryError, cat_file, git

__all__ = ["Collector", "ConcurrentEdit", "Write", "find_concurrent_edits"]

Decoded = AnyEvent | UnknownEvent
Reader = Callable[[str, int], Decoded | None]
"""Reads back the event on the line at (segment, offset)."""
_BLAME_HEADER = re.compile(rb"^([0-9a-f]{40}) \d+ (\d+) (\d+)$", re.MULTILINE)
_UNCOMMITTED = "0" * 40
_PREVIEW = 200


class Write(msgspec.Struct, kw_only=True):
    """One side of a concurrent edit."""

    event: str
    type: str
    ts: str
    by: str
    segment: str
    offset: int
    value: Any
    """The value written (long text cut to 200 characters); for a delete, ``"deleted"``."""


class ConcurrentEdit(msgspec.Struct, kw_only=True):
    memory: str
    title: str
    field: str
    """The field both wrote, or ``status`` for an edit against a delete."""
    wins: Write
    """The write the fold prefers (the later one; for ``status``, the delete)."""
    loses: Write
    """The write it overrides; neither writer had seen the other's write."""
    evidence: str
    """What "seen" was judged on: ``journal``, or ``journal+git``."""


@dataclass(slots=True)
class _W:
    stamp: str
    segment: int
    offset: int
    event: AnyEvent
    value: Any


@dataclass(slots=True)
class Collector:
    """Fed every event once (with where its line is), then asked for the concurrent edits."""

    segments: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)
    _lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Memory id to the (segment, offset) of every event about it."""
    _saves: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    """Memory id to where its only ``saved`` line is; ``None`` when it has several."""
    _touches: list[tuple[int, int, str]] = field(default_factory=list)

    def add(self, event: Decoded, segment: str, offset: int) -> None:
        if isinstance(event, UnknownEvent):
            return
        index = self._index.get(segment)
        if index is None:
            index = self._index[segment] = len(self.segments)
            self.segments.append(segment)
        about = memory_ids(event)
        for memory in about:
            self._lines.setdefault(memory, []).append((index, offset))
        if isinstance(event, MemorySaved):
            self._saves[event.memory] = None if event.memory in self._saves else (index, offset)
        else:
            self._touches.extend((index, offset, memory) for memory in about)

    def find(self, read: Reader, *, git_root: Path | None = None) -> list[ConcurrentEdit]:
        """The concurrent edits, oldest first; ``git_root`` adds git evidence of "seen"."""
        horizon = self._horizon()
        pairs: list[tuple[str, str, _W, _W, str]] = []  # memory, field, earlier, later, title
        for memory, lines in self._lines.items():
            if len({segment for segment, _ in lines}) > 1:
                pairs.extend(self._candidates(memory, lines, read))
        pairs = [p for p in pairs if not _journal_seen(horizon, p[3], p[2])]
        evidence = "journal"
        if git_root is not None and pairs:
            seen = self._git_seen(git_root, [(later, earlier) for _, _, earlier, later, _ in pairs])
            if seen is not None:
                evidence = "journal+git"
                pairs = [p for p, was_seen in zip(pairs, seen, strict=True) if not was_seen]
        edits = [self._report(*pair, evidence) for pair in pairs]
        edits.sort(key=lambda e: (e.wins.ts, e.wins.event, e.field))
        return edits

    # -- candidates ----------------------------------------------------------------------------

    def _candidates(
        self, memory: str, lines: list[tuple[int, int]], read: Reader
    ) -> Iterable[tuple[str, str, _W, _W, str]]:
        events: dict[str, _W] = {}
        for segment, offset in lines:
            event = read(self.segments[segment], offset)
            if event is not None and not isinstance(event, UnknownEvent) and event.id not in events:
                events[event.id] = _W(stamp_of(event.ts, event.id), segment, offset, event, None)
        state = State()
        state.fold([w.event for w in events.values()])
        for w in events.values():  # the fold's own order: causal first (prev), then time
            w.stamp = state.key_of_event(w.event)
        ordered = sorted(events.values(), key=lambda w: w.stamp)
        record = state.memories.get(memory)
        title = record.title or record.summary if record is not None else ""
        registers: dict[str, list[_W]] = {}
        for w in ordered:
            for name, value in _writes(w.event):
                registers.setdefault(name, []).append(_W(w.stamp, w.segment, w.offset, w.event, value))
        prevs = {w.event.id: w.event.prev for w in ordered}
        for name, writes in registers.items():
            for earlier, later in itertools.pairwise(writes):
                if (
                    earlier.segment != later.segment
                    and earlier.value != later.value
                    and not _named_before(prevs, later.event.id, earlier.event.id)
                ):
                    yield memory, name, earlier, later, title
        if record is None or record.status != "deleted":
            return
        tomb = max((w for w in ordered if isinstance(w.event, MemoryDeleted)), key=lambda w: w.stamp)
        tomb.value = "deleted"
        latest_edit: dict[int, _W] = {}
        for w in ordered:
            if w.segment != tomb.segment and _writes(w.event):
                latest_edit[w.segment] = w
        for edit in latest_edit.values():
            edit.value = dict(_writes(edit.event))
            earlier, later = (edit, tomb) if edit.stamp < tomb.stamp else (tomb, edit)
            if not _named_before(prevs, later.event.id, earlier.event.id):
                yield memory, "status", earlier, later, title

    def _report(self, memory: str, name: str, earlier: _W, later: _W, title: str, evidence: str) -> ConcurrentEdit:
        wins, loses = (
            (later, earlier) if name != "status" or isinstance(later.event, MemoryDeleted) else (earlier, later)
        )
        return ConcurrentEdit(
            memory=memory,
            title=title,
            field=name,
            wins=self._write(wins),
            loses=self._write(loses),
            evidence=evidence,
        )

    def _write(self, w: _W) -> Write:
        value = w.value
        if isinstance(value, str) and len(value) > _PREVIEW:
            value = value[: _PREVIEW - 1] + "…"
        return Write(
            event=w.event.id,
            type=str(type(w.event).__struct_config__.tag),
            ts=w.event.ts,
            by=w.event.by,
            segment=self.segments[w.segment],
            offset=w.offset,
            value=msgspec.to_builtins(value),
        )

    # -- evidence of "seen" --------------------------------------------------------------------

    def _horizon(self) -> dict[tuple[int, int], tuple[list[int], list[int]]]:
        """(reader segment, read segment) to offsets in the reader and, from there on, how far into
        the read segment it had certainly read (a running maximum)."""
        raw: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for segment, offset, memory in self._touches:
            save = self._saves.get(memory)
            if save is not None and save[0] != segment:
                raw.setdefault((segment, save[0]), []).append((offset, save[1]))
        horizon: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        for key, points in raw.items():
            points.sort()
            reach: list[int] = []
            for _, far in points:
                reach.append(max(far, reach[-1]) if reach else far)
            horizon[key] = ([at for at, _ in points], reach)
        return horizon

    def _git_seen(self, root: Path, pairs: list[tuple[_W, _W]]) -> list[bool] | None:
        """For each (later, earlier): did git history show the later one's writer had the earlier?
        ``None`` when ``root`` is not a git working tree."""
        try:
            git(root, "rev-parse", "--is-inside-work-tree")
        except HistoryError:
            return None
        blames = {segment: _blame(root, self.segments[segment]) for segment in {later.segment for later, _ in pairs}}
        specs: list[str | None] = []  # where the later line's writer would have had the earlier one
        for later, earlier in pairs:
            commit = blames[later.segment](later.offset)
            if commit == _UNCOMMITTED:  # not committed yet: written on top of the working tree
                specs.append(None)
            else:
                specs.append(f"{commit}^:./.eventmem/{self.segments[earlier.segment]}")
        wanted = sorted({spec for spec in specs if spec is not None})
        blobs = dict(zip(wanted, cat_file(root, wanted), strict=True))
        seen: list[bool] = []
        for spec, (_, earlier) in zip(specs, pairs, strict=True):
            blob = blobs[spec] if spec is not None else None
            seen.append(spec is None or (blob is not None and earlier.event.id.encode() in blob))
        return seen


def find_concurrent_edits(entries: Iterable[Entry], *, git_root: Path | None = None) -> list[ConcurrentEdit]:
    """The concurrent edits among events already in memory (a :class:`~eventmem.journal.history.History`)."""
    collector = Collector()
    at: dict[tuple[str, int], Decoded] = {}
    ids: set[str] = set()
    for entry in entries:
        if entry.event.id not in ids:
            ids.add(entry.event.id)
            collector.add(entry.event, entry.segment, entry.offset)
            at[(entry.segment, entry.offset)] = entry.event
    return collector.find(lambda segment, offset: at.get((segment, offset)), git_root=git_root)


def _writes(event: AnyEvent) -> list[tuple[str, Any]]:
    match event:
        case MemorySaved():
            return [(name, getattr(event, name)) for name in REGISTERS]
        case MemoryUpdated():
            return [
                (name, value)
                for name in REGISTERS
                if (value := getattr(event, name, msgspec.UNSET)) is not msgspec.UNSET
            ]
        case MemoryPromoted():
            return [("ttl_seconds", None)]
        case _:
            return []


def _journal_seen(horizon: dict[tuple[int, int], tuple[list[int], list[int]]], later: _W, earlier: _W) -> bool:
    found = horizon.get((later.segment, earlier.segment))
    if found is None:
        return False
    offsets, reach = found
    at = bisect.bisect_right(offsets, later.offset) - 1
    return at >= 0 and reach[at] >= earlier.offset


def _blame(root: Path, segment: str) -> Callable[[int], str]:
    """Byte offset of a line in the working tree's copy of ``segment`` to the commit that added it."""
    data = (root / ".eventmem" / segment).read_bytes()
    line_starts = [0, *(match.end() for match in re.finditer(rb"\n", data))]
    by_line: dict[int, str] = {}
    try:
        out = git(root, "blame", "--incremental", "--", f".eventmem/{segment}")
    except HistoryError:  # not tracked yet: every line is uncommitted
        out = b""
    for match in _BLAME_HEADER.finditer(out):
        commit, first, count = match.group(1).decode(), int(match.group(2)), int(match.group(3))
        for line in range(first, first + count):
            by_line[line] = commit
    return lambda offset: by_line.get(bisect.bisect_right(line_starts, offset), _UNCOMMITTED)


def _named_before(prevs: dict[str, str], later: str, earlier: str) -> bool:
    """Whether ``earlier`` is on the chain of ``prev`` that ``later`` names: its writer had seen it
    (the journal's own evidence; a forged chain only makes the pair look seen, and the fold agrees)."""
    seen: set[str] = set()
    current = prevs.get(later, "")
    while current and current not in seen:
        if current == earlier:
            return True
        seen.add(current)
        current = prevs.get(current, "")
    return False
