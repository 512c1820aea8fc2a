"""Memory lifecycle: dedup keys, expiry and archive planning, graph walks, the context bundle.

Planning is pure (state in, decisions out); the one function here that does IO is
:func:`archive_memories`, the compaction mechanism every archive policy goes through:

- only the segment this clone appends to on this branch (``journal/<writer>.<branch>.jsonl``) is
  rewritten: another clone's segment, or this clone's segment of another branch, still receives
  appends elsewhere, and a rewrite would make the next ``git merge`` conflict with them;
- the lines about the chosen memories (and their links) are copied byte for byte into a new,
  immutable ``archive/<writer>.<branch>.<date>.<n>.jsonl`` (atomic write); then the live segment is
  replaced atomically by its other lines plus one ``archived`` event saying what moved where;
- all under the journal lock. Archive segments are folded like journal segments, so the state is
  the same before and after, and a replay up to any time gives what it gave before. A crash between
  the two writes leaves some lines in both places: the fold ignores a replayed event, and the audit
  reports identical duplicates as a warning only;
- lines of unknown (newer) event types and lines that do not decode stay in the journal untouched.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple

from eventmem.core.codec import UnknownEvent, encode_event
from eventmem.core.dedup import dedup_key
from eventmem.core.events import (
    KINDS,
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    MemoryExpired,
)
from eventmem.core.ids import new_id, to_iso
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.core.stamps import normalize_ts, wall_of
from eventmem.core.state import State
from eventmem.journal.decoder import segment_lines

if TYPE_CHECKING:
    from eventmem.runner.readview import ReadView
    from eventmem.runner.runner import Store

__all__ = [
    "ArchiveResult",
    "ContextLine",
    "Step",
    "archive_candidates",
    "archive_memories",
    "archived_on",
    "context_bundle",
    "dedup_key",
    "due_for_expiry",
    "latest_stamp",
    "plan_expiry",
    "split_lines",
    "walk",
]

Direction = Literal["out", "in", "both"]


# -- expiry -----------------------------------------------------------------------------------


_FIRST_ISO, _LAST_ISO = "0001-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z"
_FIRST_EPOCH = datetime(1, 1, 2, tzinfo=UTC).timestamp()
_LAST_EPOCH = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


def epoch_iso(epoch: float) -> str:
    """The fixed-width ISO form of a moment. Never raises: a moment past the year 9999 (or not a
    number), as a stamp plus a huge TTL already in a journal can make, shows as the last moment of
    9999, one before the year 1 as the first moment of the year 1."""
    if math.isnan(epoch) or epoch >= _LAST_EPOCH:
        return _LAST_ISO if math.isnan(epoch) or epoch >= _LAST_EPOCH + 86_400 else _last_day(epoch)
    if epoch < _FIRST_EPOCH:
        return _FIRST_ISO
    return to_iso(datetime.fromtimestamp(epoch, UTC))


def _last_day(epoch: float) -> str:
    return to_iso(datetime(9999, 12, 31, tzinfo=UTC) + timedelta(seconds=epoch - _LAST_EPOCH))


def due_for_expiry(view: ReadView, now: float) -> list[str]:
    """Live memories whose expiry column says their TTL ran out (a cheap pre-check)."""
    return view.due_for_expiry(now)


def plan_expiry(view: ReadView, now: float, *, by: str = "") -> list[MemoryExpired]:
    """``expired`` events for the live memories of a view whose TTL (usage included) ran out."""
    events: list[MemoryExpired] = []
    ts = epoch_iso(now)
    for memory_id in view.due_for_expiry(now):
        record = view.visible(memory_id)
        if record is None:
            continue
        expires = view.expires_at(record)  # the column may lag a usage refresh
        if math.isinf(expires) or expires > now:
            continue
        events.append(
            MemoryExpired(id=new_id(), ts=ts, by=by, prev=record.head, memory=memory_id, expires_at=epoch_iso(expires))
        )
    return events


# -- archive ----------------------------------------------------------------------------------


def _tombstone(record: MemoryRecord) -> str:
    return max(record.deleted_stamp, record.expired_stamp)


def latest_stamp(record: MemoryRecord) -> str:
    """The stamp of the latest event about a memory (links and archive bookkeeping aside)."""
    return max(record.created_stamp, record.updated_stamp, _tombstone(record), record.restored_stamp)


def _latest_wall(record: MemoryRecord) -> str:
    """The time and id of the latest event about a memory by its stamp (an ``archived`` event names
    many memories, so it has no ``prev`` and is compared with the others by time)."""
    stamps = (record.created_stamp, record.updated_stamp, record.deleted_stamp, record.expired_stamp)
    return max(wall_of(stamp) for stamp in (*stamps, record.restored_stamp))


def archive_candidates(state: State, before: float, among: Iterable[str] | None = None) -> list[str]:
    """Deleted or expired memories whose tombstone is older than ``before`` (epoch seconds) and
    that gained events since they were last archived; looked for ``among`` these ids if given."""
    cutoff = normalize_ts(epoch_iso(before))
    out = []
    memories = state.memories
    pairs = memories.items() if among is None else ((m, memories[m]) for m in among if m in memories)
    for memory_id, record in pairs:
        if not (record.deleted_stamp or record.expired_stamp) or not record.exists or record.status == "live":
            continue
        if wall_of(_tombstone(record))[: len(cutoff)] >= cutoff:
            continue
        if record.archived_stamp and wall_of(record.archived_stamp) >= _latest_wall(record):
            continue
        out.append(memory_id)
    out.sort()
    return out


def _moves(event: AnyEvent | UnknownEvent, memories: set[str], links: set[str]) -> str | None:
    """The memory a line is archived for (or ``""`` for a link line), ``None`` when it stays."""
    match event:
        case UnknownEvent() | MemoryArchived():
            return None
        case LinkAdded(link=link) | LinkRemoved(link=link):
            return "" if link in links else None
        case _:
            memory: str = getattr(event, "memory", "")
            return memory if memory in memories else None


def split_lines(data: bytes, memories: set[str], links: set[str]) -> tuple[list[bytes], list[bytes], set[str]]:
    """Split a segment's lines into (kept, moved, memories that had a line moved), as the journal's
    decoder reads them (:func:`eventmem.journal.journal.segment_lines`). Bytes are kept exactly (each line
    ends with a newline); a line that does not decode is kept."""
    kept: list[bytes] = []
    moved: list[bytes] = []
    moved_memories: set[str] = set()
    for line, event in segment_lines(data):
        line = line if line.endswith(b"\n") else line + b"\n"
        target = None if event is None else _moves(event, memories, links)
        if target is None:
            kept.append(line)
        else:
            moved.append(line)
            if target:
                moved_memories.add(target)
    return kept, moved, moved_memories


@dataclass
class ArchiveResult:
    segment: str = ""
    """The new archive segment (relative to ``.eventmem/``), empty when nothing moved."""
    memories: list[str] = field(default_factory=list)
    events: int = 0
    """Lines moved."""
    rewritten: str = ""
    """The live segment that was rewritten."""
    bytes_before: int = 0
    bytes_after: int = 0


def _archive_prefix(store: Store, day: str) -> str:
    """``<writer>.<branch>.<yyyymmdd>.``: archive segments this clone wrote on this branch that day."""
    return f"{store.paths.writer_id()}.{store.paths.branch()}.{day.replace('-', '')}."


def archived_on(store: Store, day: str) -> bool:
    """Whether this clone archived on this branch on ``day`` (``yyyy-mm-dd``)."""
    if not store.paths.archive_dir.is_dir():
        return False
    return any(store.paths.archive_dir.glob(_archive_prefix(store, day) + "*.jsonl"))


def _archive_name(store: Store, day: str) -> str:
    prefix = _archive_prefix(store, day)
    taken = set()
    for path in store.paths.archive_dir.glob(prefix + "*.jsonl"):
        number = path.name.removeprefix(prefix).removesuffix(".jsonl")
        if number.isdigit():
            taken.add(int(number))
    n = 1
    while n in taken:
        n += 1
    return f"{prefix}{n}.jsonl"


def archive_memories(
    store: Store,
    select: Callable[[State], Iterable[str]],
    *,
    now: float,
    by: str = "",
) -> ArchiveResult:
    """Move the history of the memories ``select`` picks (on the caught-up state, under the journal
    lock) from this clone's segment for this branch into a new archive segment. Any memory may be
    picked (a project-context policy may archive live ones): the state does not change."""
    result = ArchiveResult()
    paths = store.paths
    segment_path = paths.journal_dir / paths.segment_name()
    with store.writing():
        if not segment_path.exists():
            return result
        with store.journal.lock.hold():
            store.catch_up()
            with store.read() as view:
                memories = set(select(view.fold))
                links = {link for m in memories for link in view.link_ids_of(m)}
            if not memories:
                return result
            data = store.journal.read_settled(segment_path)
            kept, moved, moved_memories = split_lines(data, memories, links)
            if not moved:
                return result
            name = _archive_name(store, epoch_iso(now)[:10])
            archive_path = paths.archive_dir / name
            event = MemoryArchived(
                id=new_id(),
                ts=epoch_iso(now),
                by=by,
                memories=tuple(sorted(moved_memories)),
                segment=f"archive/{name}",
                events=len(moved),
            )
            live = b"".join(kept) + encode_event(event)
            store.journal.rewrite_segment(segment_path, live, archive=archive_path, archived=b"".join(moved))
            live_name = f"journal/{segment_path.name}"
            store.adopt_segments([f"archive/{name}", live_name])
            store.apply_adopted([event])
            result = ArchiveResult(
                segment=f"archive/{name}",
                memories=list(event.memories),
                events=len(moved),
                rewritten=live_name,
                bytes_before=len(data),
                bytes_after=len(live),
            )
    store.save_snapshot(background=True)
    return result


# -- relationships ----------------------------------------------------------------------------


class Step(NamedTuple):
    """One memory reached by a walk: how far, and by which link from which memory."""

    memory: str
    depth: int
    via: str
    """The link followed."""
    source: str
    target: str
    relation: str
    strength: float
    context: str
    direction: Literal["out", "in"]
    """``out``: the link points away from the memory it was reached from."""
    parent: str


def _order(step: Step) -> tuple[float, str, str, str]:
    """Strongest first, then by memory, relation and link: the same order whichever store answers."""
    return (-step.strength, step.memory, step.relation, step.via)


def walk(
    start: str,
    links_of: Callable[[str], Iterable[LinkRecord]],
    *,
    depth: int,
    relations: Iterable[str] = (),
    direction: Direction = "both",
    keep: Callable[[str], bool] = lambda _m: True,
    limit: int = 0,
) -> list[Step]:
    """Breadth-first walk from ``start`` along live links, nearest first (strongest first at the
    same depth). ``keep`` says whether a memory may be reached (and walked through). A memory reached
    by several links at its depth (``solves`` and ``has_spaces`` between the same two memories) is
    one step per link: every live link is shown, whichever store answers."""
    wanted = set(relations)
    seen = {start}
    frontier = [start]
    out: list[Step] = []
    for level in range(1, depth + 1):
        steps: list[Step] = []
        followed: set[str] = set()
        reached: set[str] = set()
        for memory in frontier:
            for link in links_of(memory):
                if not link.alive or (wanted and link.relation not in wanted):
                    continue
                way: Literal["out", "in"]
                if link.source == memory and direction != "in":
                    other, way = link.target, "out"
                elif link.target == memory and direction != "out":
                    other, way = link.source, "in"
                else:
                    continue
                if other in seen or link.id in followed or not keep(other):
                    continue
                followed.add(link.id)
                reached.add(other)
                steps.append(
                    Step(
                        other,
                        level,
                        link.id,
                        link.source,
                        link.target,
                        link.relation,
                        link.strength,
                        link.context,
                        way,
                        memory,
                    )
                )
        seen |= reached
        if limit and len(out) + len(steps) >= limit:
            out += heapq.nsmallest(limit - len(out), steps, key=_order)
            return out
        steps.sort(key=_order)
        out.extend(steps)
        frontier = list(dict.fromkeys(s.memory for s in steps))
        if not frontier:
            break
    return out


# -- the session-start context bundle ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContextLine:
    record: MemoryRecord
    scope: str
    text: str


def _line(record: MemoryRecord, scope: str) -> str:
    head = f"{record.title}: {record.summary}" if record.title and record.summary else record.title or record.summary
    head = " ".join(head.split())
    where = ", global" if scope == "global" else ""
    date = (record.updated_at or record.created_at)[:10]
    return f"- {head} (importance {record.importance:g}, {date}{where}) `{record.id}`\n"


def _heading(kind: str) -> str:
    return f"\n## {kind.replace('_', ' ').capitalize()}\n"


def context_bundle(
    records: Iterable[tuple[MemoryRecord, str]],
    *,
    max_chars: int,
    title: str,
    per_kind: int = 0,
) -> tuple[str, list[ContextLine], int]:
    """The session-start bundle: for each type, alternately its most important and its most recent
    memory, types taking turns, while the rendered markdown stays within ``max_chars``.

    ``records`` are (memory, scope) pairs. Returns (markdown, the memories included, how many were
    left out)."""
    by_kind: dict[str, list[tuple[MemoryRecord, str]]] = {}
    for record, scope in records:
        by_kind.setdefault(record.kind, []).append((record, scope))
    total = sum(len(v) for v in by_kind.values())
    queues: dict[str, list[tuple[MemoryRecord, str]]] = {}
    for kind, group in by_kind.items():
        important = sorted(group, key=lambda rs: (rs[0].importance, rs[0].updated_stamp), reverse=True)
        recent = sorted(group, key=lambda rs: rs[0].updated_stamp, reverse=True)
        order: list[tuple[MemoryRecord, str]] = []
        taken: set[str] = set()
        for pair in _alternate(important, recent):
            if pair[0].id not in taken:
                taken.add(pair[0].id)
                order.append(pair)
        queues[kind] = order[:per_kind] if per_kind else order
    kinds = [k for k in KINDS if k in queues] + sorted(k for k in queues if k not in KINDS)
    header = f"# {title}\n"
    used = len(header)
    chosen: dict[str, list[ContextLine]] = {}
    position = dict.fromkeys(kinds, 0)
    active = list(kinds)
    while active and used < max_chars:
        still: list[str] = []
        for kind in active:
            queue = queues[kind]
            while position[kind] < len(queue):
                record, scope = queue[position[kind]]
                position[kind] += 1
                text = _line(record, scope)
                cost = len(text) + (0 if kind in chosen else len(_heading(kind)))
                if used + cost <= max_chars:
                    chosen.setdefault(kind, []).append(ContextLine(record, scope, text))
                    used += cost
                    break
            if position[kind] < len(queue):
                still.append(kind)
        active = still
    parts = [header]
    included: list[ContextLine] = []
    for kind in kinds:
        if kind in chosen:
            parts.append(_heading(kind))
            parts.extend(line.text for line in chosen[kind])
            included.extend(chosen[kind])
    return "".join(parts), included, total - len(included)


Pair = tuple[MemoryRecord, str]


def _alternate(a: list[Pair], b: list[Pair]) -> Iterator[Pair]:
    for x, y in zip(a, b, strict=True):
        yield x
        yield y
