"""The service's commands on memories: save, update, delete, restore, promote and supersede.

Each validates its arguments first, turns them into events and appends them; a plan run under the
journal lock re-checks what another process may have changed meanwhile."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict, Unpack

import msgspec

from eventmem.core.errors import InvalidInput, StaleVersion
from eventmem.core.events import (
    SCOPES,
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryDeleted,
    MemoryPromoted,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.ids import canonical_id, new_id, now_iso
from eventmem.core.sections import Section, singleton_of_kind
from eventmem.core.validation import check_length, check_metadata, refusal
from eventmem.runner.readview import ReadView
from eventmem.runner.runner import Store
from eventmem.service import tombstones
from eventmem.service.access import Accesses
from eventmem.service.inputs import (
    check_by,
    check_importance,
    check_kind,
    check_ttl,
    normalize_tags,
    refuse_second_singleton,
)
from eventmem.service.lookups import has_links, head_of, known_record, link_of, record_of
from eventmem.service.models import Link, Memory, Saved, link_view
from eventmem.service.part import Part, Shared

__all__ = ["Commands", "SaveOptions"]


def _after(head: str, events: list[AnyEvent]) -> list[AnyEvent]:
    """``events`` with the first one written after ``head`` (its ``prev``), unless it names one."""
    first, *rest = events
    return [first if first.prev else msgspec.structs.replace(first, prev=head), *rest]


class SaveOptions(TypedDict, total=False):
    """The options of :meth:`Commands.save_result` (defaults there), for the methods that pass them on."""

    title: str
    summary: str | None
    tags: Sequence[str] | None
    kind: str
    importance: float
    ttl_seconds: int | None
    scope: str
    by: str
    memory_id: str | None
    content_field: str
    metadata: dict[str, str] | None
    source: str


class Commands(Part):
    """Writes to memories. ``write_section`` writes a project-context section (key, text, by)."""

    def __init__(self, shared: Shared, accesses: Accesses, write_section: Callable[[str, str, str], None]) -> None:
        super().__init__(shared)
        self.accesses = accesses
        self.write_section = write_section

    def _summary_for(self, content: str, summary: str | None) -> str:
        if summary is not None and summary.strip():
            return self._clean_text(summary, "summary", required=False)
        return self.shared.summarizer.summarize([content])[0]

    def save(self, content: str, **options: Unpack[SaveOptions]) -> Memory:
        """Save a memory; a duplicate of a live one returns that one instead (see :meth:`save_result`)."""
        return self.save_result(content, **options).memory

    def save_result(
        self,
        content: str,
        *,
        title: str = "",
        summary: str | None = None,
        tags: Sequence[str] | None = None,
        kind: str = "general",
        importance: float = 0.5,
        ttl_seconds: int | None = None,
        scope: str = "project",
        by: str = "",
        memory_id: str | None = None,
        content_field: str = "content",
        metadata: dict[str, str] | None = None,
        source: str = "",
    ) -> Saved:
        """Save a memory. Content that normalises to a live memory's content (case, spacing, end
        punctuation) returns that memory and counts an access, unless ``memory_id`` is given. A
        memory with a TTL saved at least ``promote_importance`` important is promoted at once.
        ``content_field`` names the text in error messages (``context_text`` for ``save_context``).
        A singleton type (project, architecture, current_task, coding_style) in project scope writes
        that project-context section instead (see :meth:`_save_section`)."""
        section = singleton_of_kind(kind) if memory_id is None and scope == "project" else None
        if section is not None:
            return self._save_section(section, content, ttl_seconds=ttl_seconds, by=by, content_field=content_field)
        content = self._clean_text(content, content_field, required=True)
        title = self._clean_text(title or "", "title", required=False)
        tag_list = normalize_tags(tags)  # before the summary is made: every argument is checked first
        checked_importance, checked_ttl = check_importance(importance), check_ttl(ttl_seconds)
        if summary is not None:
            check_length(summary, "summary")
        check_by(by)
        if memory_id is not None:
            check_length(memory_id, "memory_id")
        checked_metadata = {} if metadata is None else check_metadata(metadata)
        check_length(source, "source")
        if scope not in SCOPES:
            raise InvalidInput(f"scope must be 'project' or 'global', not {scope!r}")
        event = MemorySaved(
            id=new_id(),
            ts=now_iso(),
            by=by,
            memory=memory_id or new_id(),
            kind=check_kind(kind),
            scope="global" if scope == "global" else "project",
            title=title,
            content=content,
            summary=self._summary_for(content, summary),
            tags=tag_list,
            importance=checked_importance,
            ttl_seconds=checked_ttl,
            project=self.root.root.name if scope == "global" else "",
            metadata=checked_metadata,
            source=source,
        )
        store = self.store_for(scope)
        events: list[AnyEvent] = [event, *self._promotion_at_save(event)]
        duplicates: list[str] = []

        def plan() -> list[AnyEvent]:
            if memory_id is None:
                now = time.time()
                with store.read() as view:
                    duplicates.extend(m for m in view.duplicates(content) if view.returnable(m, now))
                if duplicates:
                    return []
            elif head := head_of(store, event.memory):  # a well-known id written anew: after its head
                events[:] = _after(head, events)
            return events

        store.append_planned(plan)
        if duplicates:
            memory = self.view(store, record_of(store, duplicates[0]))
            self.accesses.record_access(store, duplicates[:1])
            return Saved(memory=memory, deduplicated=True)
        return Saved(memory=self.view(store, record_of(store, event.memory)))

    def _save_section(
        self, section: Section, content: str, *, ttl_seconds: int | None, by: str, content_field: str
    ) -> Saved:
        """Replace a singleton section's text (the same memory, ``section:…``, that the project-context
        tools write) and render the ``.ai`` view, so a save of that type never makes a second one."""
        if ttl_seconds is not None:
            raise InvalidInput(
                f"a {section.kind} memory is the project's {section.key} section, which is long-term: leave "
                "ttl_seconds out"
            )
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(f"{content_field} must not be empty")
        self.write_section(section.key, content, by)
        record = record_of(self.project, section.memory_id)
        return Saved(memory=self.view(self.project, record), section=section.key)

    def _promotion_at_save(self, event: MemorySaved) -> list[AnyEvent]:
        if event.ttl_seconds is None or event.importance < self.config.promote_importance:
            return []
        reason = f"saved with importance {event.importance:g} (promote_importance {self.config.promote_importance:g})"
        return [
            MemoryPromoted(id=new_id(), ts=event.ts, by=event.by, prev=event.id, memory=event.memory, reason=reason)
        ]

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        tags: Sequence[str] | None = None,
        kind: str | None = None,
        importance: float | None = None,
        ttl_seconds: int | Literal["unchanged"] | None = "unchanged",
        by: str = "",
        if_version: Sequence[str] | None = None,
        metadata: dict[str, str] | None = None,
    ) -> Memory:
        """Change a memory's fields; ``if_version`` (its versions a caller accepts, the ids of its head
        events, as ``ETag``/``If-Match`` carry them): change it only if it is still at one of them,
        checked under the journal lock, else :class:`StaleVersion` and nothing is written."""
        store, record = self._find(memory_id)
        check_by(by)
        if summary is not None:
            check_length(summary, "summary")
        changes: dict[str, Any] = {}
        if title is not None:  # the cheap checks first: a refused title must not cost a summary
            changes["title"] = self._clean_text(title, "title", required=False)
        if tags is not None:
            changes["tags"] = normalize_tags(tags)
        if importance is not None:
            changes["importance"] = check_importance(importance)
        if ttl_seconds != "unchanged":
            changes["ttl_seconds"] = check_ttl(ttl_seconds)
            section = singleton_of_kind(record.kind)
            if changes["ttl_seconds"] is not None and (record.id.startswith("section:") or section is not None):
                name = section.key if section is not None else record.id.removeprefix("section:")
                raise InvalidInput(
                    f"{record.id} is the project's {name} section, which is long-term: it cannot be given a TTL"
                )
        if content is not None:
            new_content = self._clean_text(content, "content", required=True)
            if new_content != record.content:
                changes["content"] = new_content
                if summary is None:
                    changes["summary"] = self._summary_for(new_content, None)
        if summary is not None:
            changes["summary"] = self._summary_for(changes.get("content", record.content), summary)
        if kind is not None:
            changes["kind"] = check_kind(kind)
            refuse_second_singleton(record.id, changes["kind"])
        if metadata is not None:
            changes["metadata"] = check_metadata(metadata)
        changes = {k: v for k, v in changes.items() if getattr(record, k) != v}
        if if_version is not None:
            stated = changes

            def plan() -> list[AnyEvent]:
                with store.read() as view:
                    _check_version(view, record.id, if_version)
                    prev = view.head_of(record.id)
                if not stated:
                    return []
                return [MemoryUpdated(id=new_id(), ts=now_iso(), by=by, prev=prev, memory=record.id, **stated)]

            store.append_planned(plan)
            return self.view(*self._find(record.id))
        if not changes:
            return self.view(store, record)
        prev = head_of(store, record.id)
        store.append([MemoryUpdated(id=new_id(), ts=now_iso(), by=by, prev=prev, memory=record.id, **changes)])
        return self.view(*self._find(record.id))

    def delete(
        self, memory_id: str, *, reason: str = "", by: str = "", if_version: Sequence[str] | None = None
    ) -> Memory:
        """Delete a memory and its links; ``if_version`` as for :meth:`update`."""
        reason = self._clean_text(reason or "", "reason", required=False)
        check_by(by)
        store, record = self._find(memory_id)
        view = self.view(store, record)
        ts = now_iso()

        def unlinks(where: Store) -> list[AnyEvent]:
            with where.read() as view:
                return [
                    LinkRemoved(
                        id=new_id(),
                        ts=ts,
                        by=by,
                        prev=view.link_head_of(link.id),
                        link=link.id,
                        reason=f"memory {record.id} deleted",
                    )
                    for link in view.links_of(record.id)
                ]

        def plan() -> list[AnyEvent]:
            with store.read() as view:
                if if_version is not None:
                    _check_version(view, record.id, if_version)
                if view.visible(record.id) is None:
                    return []  # deleted by another process meanwhile
                prev = view.head_of(record.id)
            deleted = MemoryDeleted(id=new_id(), ts=ts, by=by, prev=prev, memory=record.id, reason=reason)
            return [deleted, *unlinks(store)]

        store.append_planned(plan)
        for other in self.stores():  # a link between a project and a global memory lives in the project journal
            if other is not store and has_links(other, record.id):
                other.append_planned(functools.partial(unlinks, other))
        view.status = "deleted"
        return view

    def restore(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Bring back a deleted or expired memory: a ``restored`` event, a fresh TTL if its TTL ran
        out, and the links its delete removed (see :func:`eventmem.service.tombstones.restore_events`), in
        one append per store. Returns (memory, whether it changed); a live memory is left as it is."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise refusal("memory_id", "a memory's id", memory_id)
        memory_id = canonical_id(check_length(memory_id.strip(), "memory_id"))
        reason = self._clean_text(reason or "", "reason", required=False)
        check_by(by)
        store = self._owner(memory_id)
        ts = now_iso()
        planned: list[tuple[Store, AnyEvent]] = []

        def plan() -> list[AnyEvent]:
            planned.clear()
            now = time.time()
            with store.read() as view:
                record = known_record(view, memory_id)
                if record.status == "live" and view.expires_at(record) > now:
                    return []
            found = tombstones.restore_events(store, record, ts=ts, by=by, reason=reason, now=now, stores=self.stores())
            planned.extend(found)
            return [event for where, event in planned if where is store]

        written = store.append_planned(plan)
        for other in self.stores():  # a link between a project and a global memory lives in the project journal
            if other is not store and (links := [event for where, event in planned if where is other]):
                other.append(links)
        return self.view(store, record_of(store, memory_id)), bool(written)

    def promote(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Make a memory long-term with a ``promoted`` event. Returns (memory, whether it changed)."""
        reason = self._clean_text(reason or "", "reason", required=False)
        check_by(by)
        store, record = self._find(memory_id)

        def plan() -> list[AnyEvent]:
            with store.read() as view:
                current = view.visible(record.id)
            if current is None or current.ttl_seconds is None:
                return []
            return [
                MemoryPromoted(
                    id=new_id(), ts=now_iso(), by=by, prev=current.head, memory=record.id, reason=reason or "by hand"
                )
            ]

        written = store.append_planned(plan)
        return self.view(store, record_of(store, record.id)), bool(written)

    def supersede(
        self,
        old_id: str,
        content: str,
        *,
        title: str | None = None,
        summary: str | None = None,
        tags: Sequence[str] | None = None,
        kind: str | None = None,
        importance: float | None = None,
        ttl_seconds: int | None = None,
        reason: str = "",
        by: str = "",
    ) -> tuple[Memory, Link]:
        """Replace a wrong memory by a corrected one: a new memory (type, title, tags, importance and
        scope from the old one unless given) and a ``supersedes`` link from it to the old one, in one
        append. The old memory stays in the history and is no longer returned by default."""
        store, old = self._find(old_id)
        refuse_second_singleton("", old.kind if kind is None else check_kind(kind))
        content = self._clean_text(content, "content", required=True)
        new_title = old.title if title is None else self._clean_text(title, "title", required=False)
        new_tags = old.tags if tags is None else normalize_tags(tags)
        new_importance = old.importance if importance is None else check_importance(importance)
        new_ttl = check_ttl(ttl_seconds)
        link_context = self._clean_text(reason or "", "reason", required=False)
        if summary is not None:
            check_length(summary, "summary")
        check_by(by)
        ts = now_iso()
        event = MemorySaved(
            id=new_id(),
            ts=ts,
            by=by,
            memory=new_id(),
            kind=old.kind if kind is None else check_kind(kind),
            scope="global" if old.scope == "global" else "project",
            title=new_title,
            content=content,
            summary=self._summary_for(content, summary),
            tags=new_tags,
            importance=new_importance,
            ttl_seconds=new_ttl,
            project=old.project,
        )
        link = LinkAdded(
            id=new_id(),
            ts=ts,
            by=by,
            link=new_id(),
            source=event.memory,
            target=old.id,
            relation="supersedes",
            context=link_context,
        )
        store.append([event, *self._promotion_at_save(event), link])
        return self.view(store, record_of(store, event.memory)), link_view(link_of(store, link.link))


def _check_version(view: ReadView, memory_id: str, accepted: Sequence[str]) -> None:
    """Refuse a conditional change when the memory is no longer at a version the caller accepts."""
    current = view.head_of(memory_id)
    if current not in accepted:
        raise StaleVersion(
            f"memory {memory_id} changed since that version (now {current}); read it again, then retry the change"
        )
