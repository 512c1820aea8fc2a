"""What changed in the memory between two journals: added, changed (which fields), deleted,
expired, restored, promoted, archived, and links added or removed.

Both sides are folded and the folded memories compared field by field, so the answer does not
depend on how the lines are laid out in segments (a merge, a compaction or a rebase that moves lines
changes nothing here). Who did it and when comes from the events the new side has and the old side
lacks. The result is a :class:`~eventmem.review.journaldiff_model.JournalDiff`, rendered by
:mod:`eventmem.review.journaldiff_render` (or as JSON, the Structs through ``msgspec``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import LinkAdded, LinkRemoved, MemoryDeleted, MemoryPromoted, MemoryRestored, memory_ids
from eventmem.core.records import REGISTERS, LinkRecord, MemoryRecord
from eventmem.core.state import State
from eventmem.core.terminal import printable
from eventmem.journal.history import History, decode_segment, default_base, load, merge_base, read_revision
from eventmem.review.concurrency import find_concurrent_edits
from eventmem.review.journaldiff_model import HEADINGS, FieldChange, JournalDiff, LinkChange, MemoryChange
from eventmem.review.journaldiff_render import show, show_value

# show and show_value are named here too for eventmem replay, which imports them from this module
__all__ = [
    "diff_files",
    "diff_histories",
    "diff_specs",
    "diff_states",
    "field_words",
    "pr_summary",
    "show",
    "show_value",
    "word_diff",
]

#: The events whose ``reason`` explains a change of that kind.
_REASONED: Final[dict[str, type[MemoryDeleted | MemoryRestored | MemoryPromoted]]] = {
    "deleted": MemoryDeleted,
    "restored": MemoryRestored,
    "promoted": MemoryPromoted,
}


def _exists(record: MemoryRecord | None) -> bool:
    return record is not None and record.exists


_SHORT: Final = 40
_CONTEXT_WORDS: Final = 3
_MAX_WORDS: Final = 20_000


def word_diff(old: str, new: str) -> str:
    """The words that changed from ``old`` to ``new``: ``[-removed-]{+added+}``, each change with a few
    words of context either side, ``…`` for what is left out; escaped for a terminal."""
    a, b = old.split()[:_MAX_WORDS], new.split()[:_MAX_WORDS]
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    parts: list[str] = []
    n = _CONTEXT_WORDS
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag != "equal":
            parts += ["[-" + " ".join(a[i1:i2]) + "-]"] if i2 > i1 else []
            parts += ["{+" + " ".join(b[j1:j2]) + "+}"] if j2 > j1 else []
            continue
        words = a[i1:i2]
        first, last = index == 0, index == len(opcodes) - 1
        if first and last:
            continue
        if first:
            parts += ["…", *words[-n:]] if len(words) > n else words
        elif last:
            parts += [*words[:n], "…"] if len(words) > n else words
        else:
            parts += [*words[:n], "…", *words[-n:]] if len(words) > 2 * n else words
    return printable(" ".join(parts))


def field_words(old: Any, new: Any) -> str:
    """For two texts too long to show whole: the words that changed (:func:`word_diff`); else ``""``."""
    if isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > _SHORT:
        return word_diff(old, new)
    return ""


def _field_change(name: str, old: Any, new: Any) -> FieldChange:
    return FieldChange(field=name, old=old, new=new, words=field_words(old, new))


def _changed_fields(old: MemoryRecord | None, new: MemoryRecord) -> list[FieldChange]:
    fields: list[FieldChange] = []
    for name in REGISTERS:
        if _exists(old):
            assert old is not None
            if getattr(old, name) != getattr(new, name):
                fields.append(_field_change(name, getattr(old, name), getattr(new, name)))
        elif name in new.stamps and (old is None or old.stamps.get(name) != new.stamps[name]):
            # a partial journal (one segment) with updates to a memory saved elsewhere
            known = old is not None and name in old.stamps
            fields.append(FieldChange(field=name, old=getattr(old, name) if known else None, new=getattr(new, name)))
    return fields


def _memory_change(memory_id: str, old: MemoryRecord | None, new: MemoryRecord | None) -> MemoryChange | None:
    if new is None or (not new.exists and _exists(old)):
        assert old is not None
        return _change(memory_id, ["removed"], old) if old.exists else None
    changes: list[str] = []
    fields: list[FieldChange] = []
    if new.exists and not _exists(old):
        changes.append("added")
    else:
        fields = _changed_fields(old, new)
        promoted = new.promoted_stamp > (old.promoted_stamp if old else "")
        if promoted:  # the promotion says it: no separate "ttl_seconds → none"
            fields = [f for f in fields if not (f.field == "ttl_seconds" and f.new is None)]
        if fields:
            changes.append("changed")
        if promoted:
            changes.append("promoted")
    before = old.status if old is not None else "live"
    if new.status != before:
        if new.status != "live" and "changed" in changes:  # edited, then deleted: it is gone
            changes.remove("changed")
        changes.append("restored" if new.status == "live" else new.status)
    if new.archived and not (old is not None and old.archived):
        changes.append("archived")
    if not changes:
        return None
    change = _change(memory_id, changes, new, fields)
    change.partial = not new.exists
    return change


def _change(
    memory_id: str, changes: list[str], record: MemoryRecord, fields: Iterable[FieldChange] = ()
) -> MemoryChange:
    return MemoryChange(
        memory=memory_id,
        changes=changes,
        kind=record.kind,
        title=record.title,
        summary=record.summary or record.content[:120],
        fields=list(fields),
    )


def _link_change(link_id: str, old: LinkRecord | None, new: LinkRecord) -> LinkChange | None:
    was = old is not None and old.alive
    if new.alive == was:
        return None
    change = "linked" if new.alive else "unlinked"
    return LinkChange(link=link_id, change=change, source=new.source, target=new.target, relation=new.relation)


def diff_states(old: State, new: State, *, old_name: str = "old", new_name: str = "new") -> JournalDiff:
    """Memory-level differences between two folded states (no attribution)."""
    memories: list[MemoryChange] = []
    for memory_id in sorted(old.memories.keys() | new.memories.keys()):
        change = _memory_change(memory_id, old.memories.get(memory_id), new.memories.get(memory_id))
        if change is not None:
            memories.append(change)
    order = list(HEADINGS)
    memories.sort(key=lambda c: (order.index(c.changes[0]), c.memory))
    links = [
        link
        for link_id, record in sorted(new.links.items())
        if (link := _link_change(link_id, old.links.get(link_id), record)) is not None
    ]
    return JournalDiff(
        old=old_name,
        new=new_name,
        memories=memories,
        links=links,
        events_added=0,
        events_removed=0,
        unknown_added={},
    )


def diff_histories(old: History, new: History) -> JournalDiff:
    """What ``new`` changed relative to ``old``, with who did it from the events ``new`` adds.

    Only the memories and links that some event on one side but not the other is about are folded:
    a memory's record depends on the events about it alone, so no other memory can differ."""
    old_ids, new_ids = old.ids(), new.ids()
    differing = old_ids ^ new_ids
    memories: set[str] = set()
    links: set[str] = set()
    ends: dict[str, tuple[str, str]] = {}
    added: dict[str, Any] = {}
    for side in (old, new):
        for entry in side.entries:
            event = entry.event
            if isinstance(event, LinkAdded):
                ends[event.link] = (event.source, event.target)
            if event.id not in differing:
                continue
            if side is new:
                added.setdefault(event.id, event)
            if not isinstance(event, UnknownEvent):
                memories.update(memory_ids(event))
                if link := getattr(event, "link", ""):
                    links.add(link)

    def part(side: History) -> History:
        return History(side.source, [e for e in side.entries if _about(e.event, memories, links)])

    diff = diff_states(part(old).fold(), part(new).fold(), old_name=old.source, new_name=new.source)
    diff.events_added = len(added)
    diff.events_removed = len(old_ids - new_ids)
    known = {(problem.path, problem.offset, problem.reason) for problem in old.problems}
    diff.corrupt_added = [str(p) for p in new.problems if (p.path, p.offset, p.reason) not in known]
    diff.overridden = [
        edit for edit in find_concurrent_edits(new.entries) if edit.wins.event in added or edit.loses.event in added
    ]
    by_memory: dict[str, list[Any]] = {}
    for event in sorted(added.values(), key=lambda e: (e.ts, e.id)):
        if isinstance(event, UnknownEvent):
            diff.unknown_added[event.type] = diff.unknown_added.get(event.type, 0) + 1
            continue
        touched = ends.get(event.link, ()) if isinstance(event, LinkRemoved) else memory_ids(event)
        for memory_id in touched:
            by_memory.setdefault(memory_id, []).append(event)
    for change in diff.memories:
        events = by_memory.get(change.memory, [])
        change.by = sorted({event.by for event in events if event.by})
        change.at = events[-1].ts if events else ""
        explained = tuple(_REASONED[kind] for kind in change.changes if kind in _REASONED)
        change.reasons = [reason for event in events if isinstance(event, explained) and (reason := event.reason)]
    return diff


def _about(event: Any, memories: set[str], links: set[str]) -> bool:
    if isinstance(event, UnknownEvent):
        return False
    return getattr(event, "link", "") in links or any(memory in memories for memory in memory_ids(event))


def diff_specs(root: Path, old: str, new: str) -> JournalDiff:
    """Diff two journals named like :func:`eventmem.journal.history.load` names them (paths or revisions)."""
    return diff_histories(load(root, old), load(root, new))


def diff_files(old_path: str, new_path: str, name: str) -> JournalDiff:
    """Diff two copies of one segment file (what git hands a diff driver; ``/dev/null`` is empty)."""

    def read(path: str, label: str) -> History:
        data = b"" if path == "/dev/null" else Path(path).read_bytes()
        entries, problems = decode_segment(data, name)
        return History(label, entries, problems)

    return diff_histories(read(old_path, f"a/{name}"), read(new_path, f"b/{name}"))


def pr_summary(root: Path, base: str | None = None, head: str = "HEAD") -> tuple[JournalDiff, str]:
    """The memory changes of ``head`` since it forked from ``base``, and the fork point."""
    base = base or default_base(root)
    fork = merge_base(root, base, head)
    diff = diff_histories(read_revision(root, fork), read_revision(root, head))
    diff.old = f"{base} (merge base {fork[:12]})"
    return diff, fork
