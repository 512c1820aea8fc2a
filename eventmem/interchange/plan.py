"""What an import would do to the project: the events to append, and the dry-run's account of them.

The plan compares each item read with the memory its original id maps to (see
:func:`~eventmem.interchange.mapping.memory_id_for`): none yet is *added* (a ``saved`` event), one
with other fields is *updated* (an ``updated`` event with the fields that differ), the same is
*unchanged*. A memory deleted here since an earlier import stays deleted (*kept*). Links are added
once, by a link id derived from their two ends and relation. Every item is checked against
eventmem's limits first: what cannot fit is reported by file and line or row and left out, what was
cut to fit is reported and taken in. Every event has the same writer (``import:FORMAT@BATCH``) and
time, so the import reads as one change. Pure: reads a fold, writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from eventmem.core.errors import SecretRefused
from eventmem.core.events import AnyEvent, LinkAdded, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso
from eventmem.core.limits import LIMITS
from eventmem.core.redact import scrub
from eventmem.core.sections import singleton_of_kind
from eventmem.core.state import State
from eventmem.core.summarizer import Summarizer
from eventmem.core.validation import has_visible
from eventmem.interchange.mapping import (
    Bundle,
    Item,
    Problem,
    Relation,
    link_id_for,
    memory_id_for,
    metadata_fields,
)

__all__ = ["BATCH", "Plan", "plan_batches"]


@dataclass
class Plan:
    format: str
    by: str
    dry_run: bool = True
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Memories deleted (or expired) here since an earlier import: left as they are."""
    other_project: int = 0
    links_added: int = 0
    links_updated: int = 0
    links_unchanged: int = 0
    problems: list[Problem] = field(default_factory=list)
    events: int = 0
    """Events planned (and appended, unless a dry run)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "by": self.by,
            "dryRun": self.dry_run,
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "kept": len(self.kept),
            "otherProject": self.other_project,
            "linksAdded": self.links_added,
            "linksUpdated": self.links_updated,
            "linksUnchanged": self.links_unchanged,
            "events": self.events,
            "problems": [p.render() for p in self.problems],
            "ids": {"added": self.added, "updated": self.updated},
        }


def _cut(text: str, name: str) -> tuple[str, bool]:
    high = int(LIMITS[name].high)
    return (text, False) if len(text) <= high else (text[: high - 1] + "…", True)


@dataclass
class _Checked:
    memory_id: str
    item: Item
    kind: str
    title: str
    content: str
    body: str
    tags: tuple[str, ...]
    metadata: dict[str, str]
    source: str
    summary: str = ""
    """The summary the other store kept (scrubbed, cut to its limit); ``""``: one is made."""


def _check(item: Item, format_name: str, max_bytes: int, refuse: bool, plan: Plan) -> _Checked | None:
    """The item fitted to eventmem's limits and scrubbed, or ``None`` (reported) if it cannot be."""
    where = item.where or item.source[:80]
    body = item.content.strip()
    if len(body.encode("utf-8", "surrogatepass")) > max_bytes:
        size = len(body.encode("utf-8", "surrogatepass"))
        plan.problems.append(
            Problem(where, f"content is {size:,} bytes; the limit is {max_bytes:,} (max_memory_bytes)")
        )
        return None
    if not has_visible(body):
        plan.problems.append(Problem(where, "no visible text"))
        return None
    metadata = dict(item.metadata)
    kind = item.kind
    if singleton_of_kind(kind) is not None:  # a project-context section has one memory: this is one more note
        metadata.setdefault("original_type", kind)
        kind = "general"
    original = metadata.pop("source", item.source)
    source, cut = _cut(f"{format_name}:{original if isinstance(original, str) else item.source}", "source")
    if cut:
        plan.problems.append(Problem(where, f"source cut to {int(LIMITS['source'].high)} characters", skipped=False))
    fields = metadata_fields(metadata, where, plan.problems)
    content = body
    title, cut = _cut(" ".join(item.title.split()), "title")
    if cut:
        plan.problems.append(Problem(where, f"title cut to {int(LIMITS['title'].high)} characters", skipped=False))
    try:
        content = scrub(content, refuse=refuse, field="content").strip()
        title = scrub(title, refuse=refuse, field="title")
        tags = tuple(dict.fromkeys(t for t in (scrub(t, refuse=refuse, field="tag") for t in item.tags) if t))
        fields = {key: scrub(value, refuse=refuse, field=f"metadata.{key}") for key, value in fields.items()}
        source = scrub(source, refuse=refuse, field="source")
        summary = _cut(scrub(" ".join(item.summary.split()), refuse=refuse, field="summary"), "summary")[0]
    except SecretRefused as exc:
        plan.problems.append(Problem(where, str(exc)))
        return None
    memory_id = memory_id_for(format_name, item.source)
    return _Checked(memory_id, item, kind, title, content, body, tags, fields, source, summary)


BATCH: Final = 2_000
"""Items planned (and, by :func:`~eventmem.interchange.batch.import_bundle`, appended and indexed) at
a time: an import's peak memory grows with this, not with the store it reads."""


def plan_batches(
    state_of: Callable[[], State],
    bundle: Bundle,
    plan: Plan,
    *,
    summarizer: Summarizer,
    max_bytes: int,
    refuse_secrets: bool = False,
    project: str | None = None,
    size: int = BATCH,
) -> Iterator[list[AnyEvent]]:
    """The events that bring ``bundle`` into a journal, ``size`` items (or relations) at a time, their
    account kept in ``plan``; ``state_of`` gives the fold to compare with, asked again for each batch.
    The bundle's items and relations are taken out of it as they are planned (it ends empty).

    The events are those of one plan of the whole bundle and in its order (every memory's event,
    then every link's): a batch is planned against the fold before this import or with the earlier
    batches' events folded in, which is the same, as each item is its own memory (items with the
    same original id are refused as seconds) and links are planned once every memory is (the
    memories this import keeps live are remembered for them, so a dry run plans the same links)."""
    ts = now_iso()
    seen: set[str] = set()
    live: set[str] = set()
    while bundle.items:
        items = bundle.items[:size]
        del bundle.items[:size]  # (let go once planned: the fold grows as the bundle shrinks)
        events = _plan_items(
            state_of(),
            bundle.format,
            items,
            seen,
            live,
            plan,
            ts,
            summarizer,
            max_bytes,
            refuse_secrets,
            project,
        )
        plan.events += len(events)
        if events:
            yield events
    done: set[str] = set()
    while bundle.relations:
        relations = bundle.relations[:size]
        del bundle.relations[:size]
        events = _plan_links(state_of(), bundle.format, relations, live, done, plan, ts)
        plan.events += len(events)
        if events:
            yield events


def _plan_items(
    state: State,
    format_name: str,
    items: list[Item],
    seen: set[str],
    live: set[str],
    plan: Plan,
    ts: str,
    summarizer: Summarizer,
    max_bytes: int,
    refuse_secrets: bool,
    project: str | None,
) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    by = plan.by
    checked: list[_Checked] = []
    for item in items:
        wanted = item.metadata.get("project")
        if project is not None and isinstance(wanted, str) and wanted and wanted != project:
            plan.other_project += 1
            continue
        if item.source in seen:
            plan.problems.append(Problem(item.where or item.source[:80], f"a second item with id {item.source[:80]!r}"))
            continue
        seen.add(item.source)
        if (fitted := _check(item, format_name, max_bytes, refuse_secrets, plan)) is not None:
            checked.append(fitted)
    fresh = [c for c in checked if (r := state.memories.get(c.memory_id)) is None or not r.exists]
    made = [c for c in fresh if not c.summary]  # a summary the store kept is kept
    summaries = dict(zip((c.memory_id for c in made), summarizer.summarize([c.body for c in made]), strict=True))
    summaries |= {c.memory_id: c.summary for c in fresh if c.summary}
    for c in checked:
        record = state.memories.get(c.memory_id)
        if record is None or not record.exists:
            summary, _ = _cut(summaries[c.memory_id], "summary")
            events.append(
                MemorySaved(
                    id=new_id(),
                    ts=ts,
                    by=by,
                    memory=c.memory_id,
                    kind=c.kind,
                    title=c.title,
                    content=c.content,
                    summary=summary,
                    tags=c.tags,
                    importance=c.item.importance,
                    metadata=c.metadata,
                    source=c.source,
                    created_at=c.item.created_at,
                    updated_at=c.item.updated_at if c.item.updated_at != c.item.created_at else "",
                )
            )
            plan.added.append(c.memory_id)
            live.add(c.memory_id)
            continue
        if record.status != "live":
            plan.kept.append(c.memory_id)
            continue
        live.add(c.memory_id)
        changes: dict[str, Any] = {}
        if record.kind != c.kind:
            changes["kind"] = c.kind
        if record.title != c.title:
            changes["title"] = c.title
        if record.content != c.content:
            changes["content"] = c.content
            changes["summary"] = _cut(summarizer.summarize([c.body])[0], "summary")[0]
        if tuple(record.tags) != c.tags:
            changes["tags"] = c.tags
        if record.importance != c.item.importance:
            changes["importance"] = c.item.importance
        if record.metadata != c.metadata:  # (also moves an earlier import's metadata comment into the field)
            changes["metadata"] = c.metadata
        if not changes:
            plan.unchanged.append(c.memory_id)
            continue
        events.append(MemoryUpdated(id=new_id(), ts=ts, by=by, prev=record.head, memory=c.memory_id, **changes))
        plan.updated.append(c.memory_id)
    return events


def _plan_links(
    state: State, format_name: str, relations: list[Relation], live: set[str], done: set[str], plan: Plan, ts: str
) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    for relation in relations:
        where = relation.where or f"relation {relation.source[:40]} -> {relation.target[:40]}"
        ends = []
        for ref in (relation.source, relation.target):
            memory_id = memory_id_for(format_name, ref)  # (an item's own id: see _check)
            record = state.memories.get(memory_id)
            if memory_id in live or (record is not None and record.exists and record.status == "live"):
                ends.append(memory_id)
        if len(ends) < 2:
            plan.problems.append(Problem(where, f"a {relation.relation} link to a memory that is not imported"))
            continue
        source, target = ends
        if source == target:
            plan.problems.append(Problem(where, "a link from a memory to itself"))
            continue
        link_id = link_id_for(source, target, relation.relation)
        if link_id in done:
            continue
        done.add(link_id)
        context, _ = _cut(relation.context, "context")
        existing = state.links.get(link_id)
        if (
            existing is not None
            and existing.alive
            and (existing.strength, existing.context) == (relation.strength, context)
        ):
            plan.links_unchanged += 1
            continue
        event = LinkAdded(
            id=new_id(),
            ts=ts,
            by=plan.by,
            prev=existing.head if existing is not None else "",
            link=link_id,
            source=source,
            target=target,
            relation=relation.relation,
            strength=relation.strength,
            context=context,
        )
        events.append(event)
        if existing is not None and existing.alive:
            plan.links_updated += 1
        else:
            plan.links_added += 1
    return events
