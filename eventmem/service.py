"""The one service every adapter (MCP tools, CLI, replay tool) goes through.

Commands validate their input, turn it into events, append them and fold them in; queries catch up
with the journal first, so what any process wrote before the call began is visible to it. Nothing
here knows about MCP or the terminal.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem import tombstones
from eventmem.codec import UnknownEvent
from eventmem.config import Config, load_settings
from eventmem.embedder import Embedder, HashingEmbedder
from eventmem.errors import EventmemError, InvalidInput, LimitExceeded, UnknownMemory
from eventmem.events import (
    KINDS,
    RELATIONS,
    SCOPES,
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryDeleted,
    MemoryPromoted,
    MemorySaved,
    MemoryUpdated,
    memory_ids,
)
from eventmem.ids import new_id, now_iso
from eventmem.lifecycle import (
    archive_candidates,
    archive_memories,
    archived_on,
    context_bundle,
    due_for_expiry,
    epoch_iso,
    latest_stamp,
    plan_expiry,
    walk,
)
from eventmem.limits import LIMITS
from eventmem.pmp import Section, singleton_of_kind
from eventmem.project import ProjectPaths, RootChoice, global_root
from eventmem.providers import ProviderError
from eventmem.query import Filters, build_mask, hybrid_search
from eventmem.redact import scrub
from eventmem.state import LinkRecord, MemoryRecord, State, ts_of
from eventmem.store import Store
from eventmem.summarizer import ExtractiveSummarizer, Summarizer
from eventmem.validation import (
    check_count,
    check_length,
    check_number,
    check_whole,
    has_visible,
    refusal,
)

__all__ = ["Hit", "Link", "Memory", "MemoryService", "Saved", "open_service"]

log = logging.getLogger("eventmem.service")


class Memory(msgspec.Struct, kw_only=True):
    """A memory as tools and the CLI show it."""

    id: str
    kind: str
    scope: str
    title: str
    content: str
    summary: str
    tags: list[str]
    importance: float
    ttl_seconds: int | None
    created_at: str
    updated_at: str
    expires_at: str | None
    created_by: str
    updated_by: str
    status: str
    superseded: bool = False
    access_count: int = 0
    """Accesses counted in this clone's local usage stream (reads, recalls, duplicate saves)."""
    promoted: bool = False
    """Made long-term by a ``promoted`` event (important at save, often used, or by hand)."""
    project: str = ""
    """The project it belongs to: this one for project memories; for global ones, where they were saved."""


class Saved(msgspec.Struct, kw_only=True):
    """What a save did: the memory, and whether it already existed (a duplicate save)."""

    memory: Memory
    deduplicated: bool = False
    section: str = ""
    """For a singleton type (project, architecture, current_task, coding_style): the project-context
    section the save wrote (``currentTask``); its memory is the section's, with its well-known id."""


class Link(msgspec.Struct, kw_only=True):
    """A relationship as tools show it."""

    id: str
    source: str
    target: str
    relation: str
    strength: float
    context: str
    created_at: str
    created_by: str


class Hit(msgspec.Struct, kw_only=True):
    """One search result."""

    id: str
    score: float
    kind: str
    scope: str
    title: str
    summary: str
    tags: list[str]
    importance: float
    created_at: str
    updated_at: str
    vector_score: float
    keyword_score: float
    content: str | None = None


def _normalize_tags(tags: Sequence[str] | None) -> tuple[str, ...]:
    """Lower-cased, spaces to ``-``, duplicates dropped; the count is checked before any tag is read."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        check_length(tags, "tags", high=LIMITS["tags"].high * (LIMITS["tag"].high + 1))
        tags = tags.split(",")
    check_count(tags, "tags")
    out: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise refusal("tags", "a list of strings", tag, got=f"a {type(tag).__name__} among them")
        check_length(tag, "tag")
        # scrubbed before lower-casing, which would hide a token's shape from the store's scrub
        clean = " ".join(scrub(tag, field="tag").strip().lower().split()).replace(" ", "-")
        if clean:
            out[clean] = None
    return tuple(out)


def _check_kind(kind: str) -> str:
    if not isinstance(kind, str) or len(kind) > 64:
        raise refusal("type", "one of: " + ", ".join(KINDS), kind)
    kind = kind.strip().lower().replace("-", "_").replace(" ", "_")
    if kind not in KINDS:
        raise InvalidInput(f"unknown type {kind!r}; choose one of: {', '.join(KINDS)}")
    return kind


def _check_importance(value: float) -> float:
    return check_number(value, "importance")


def _check_unit(value: float, name: str) -> float:
    return check_number(value, name)


_RELATION = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _check_relation(value: str) -> str:
    """A well-known relation (any case) or a free-form lower_snake_case one."""
    check_length(value, "relation")
    relation = value.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(value, str) else ""
    if not _RELATION.fullmatch(relation):
        raise InvalidInput(
            f"relation {value!r} is not valid: use one of {', '.join(r.upper() for r in RELATIONS)}, or a "
            "free-form lower_snake_case name (letters, digits and _, starting with a letter, up to 64)"
        )
    return relation


def _check_whole(value: int, name: str, field: str | None = None) -> int:
    """A whole number within the limit ``name`` of :data:`eventmem.limits.LIMITS`."""
    return check_whole(value, name, field)


def _after(head: str, events: list[AnyEvent]) -> list[AnyEvent]:
    """``events`` with the first one written after ``head`` (its ``prev``), unless it names one."""
    first, *rest = events
    return [first if first.prev else msgspec.structs.replace(first, prev=head), *rest]


def _link_view(link: LinkRecord) -> Link:
    return Link(
        id=link.id,
        source=link.source,
        target=link.target,
        relation=link.relation,
        strength=link.strength,
        context=link.context,
        created_at=ts_of(link.added_stamp),
        created_by=link.added_by,
    )


def _check_ttl(value: int | None) -> int | None:
    """Seconds, or ``None`` for long-term; at most :data:`eventmem.limits.MAX_TTL_SECONDS`."""
    if value is None:
        return None
    return check_whole(value, "ttl_seconds")


def _check_by(value: str) -> str:
    return check_length(value, "by")


class MemoryService:
    def __init__(
        self,
        project: Store,
        *,
        root: RootChoice,
        summarizer: Summarizer | None = None,
        global_store: Store | None = None,
    ) -> None:
        self.project = project
        self.root = root
        self.config: Config = project.config
        self.summarizer = summarizer or ExtractiveSummarizer()
        self._search_notes = threading.local()
        self._global = global_store
        self._archive_checked: dict[str, dict[str, str]] = {}
        """Per memory directory: memories compaction looked at without moving anything, by stamp."""
        self.ignored_settings: list[str] = []
        """Settings of a tracked config file left out because they reach the network (see
        :func:`eventmem.config.load_settings`)."""
        self.allowed_settings: list[str] = []
        """Settings of the tracked config file that reach the network, in effect by ``eventmem allow``."""

    # -- stores -------------------------------------------------------------------------------

    def stores(self) -> list[Store]:
        out = [self.project]
        if self._global is not None:
            out.append(self._global)
        return out

    def store_for(self, scope: str) -> Store:
        if scope == "global":
            if self._global is None:
                raise InvalidInput("global scope is not available in this server")
            return self._global
        return self.project

    def catch_up(self) -> None:
        for store in self.stores():
            store.catch_up()

    def _find(self, memory_id: str) -> tuple[Store, MemoryRecord]:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("memory id must be a non-empty string")
        check_length(memory_id, "memory_id")
        memory_id = memory_id.strip()
        for store in self.stores():
            store.catch_up()
            record = store.state.visible(memory_id)
            if record is not None:
                expires = store.expires_epoch(memory_id, record)
                if expires <= time.time():
                    raise tombstones.expired_error(record, epoch_iso(expires))
                return store, record
        raise self._gone_or_unknown(memory_id)

    def _gone_or_unknown(self, memory_id: str) -> UnknownMemory:
        """For an id no live memory has: what happened to it (deleted or expired), else unknown."""
        for store in self.stores():
            with store.lock:
                record = store.state.memories.get(memory_id)
            if record is not None and record.exists and record.status != "live":
                return tombstones.gone(store, record)
        return UnknownMemory(memory_id)

    # -- validation ---------------------------------------------------------------------------

    def _clean_text(self, text: str, field: str, *, required: bool) -> str:
        """Scrubbed and stripped text within its limit: its field's in :data:`~eventmem.limits.LIMITS`
        (``content``, ``context_text`` and unknown fields: the ``max_memory_bytes`` setting)."""
        if not isinstance(text, str):
            raise refusal(field, "a string", text)
        if field in LIMITS and field != "content":
            check_length(text, field)  # before the scrub reads it
        elif len(text) > self.config.max_memory_bytes:  # a character is at least a byte
            raise LimitExceeded(
                f"{field} is over {self.config.max_memory_bytes} bytes; the limit is {self.config.max_memory_bytes} "
                "bytes (max_memory_bytes). Save the essential part, split it into several memories, "
                "or give a summary and keep the details in the repository."
            )
        cleaned = scrub(text, refuse=self.config.secrets == "refuse", field=field).strip()
        if required and not has_visible(cleaned):
            raise refusal(field, "a text with a visible character", text)
        size = len(cleaned.encode("utf-8"))
        if size > self.config.max_memory_bytes:
            raise LimitExceeded(
                f"{field} is {size} bytes; the limit is {self.config.max_memory_bytes} bytes "
                "(max_memory_bytes). Save the essential part, split it into several memories, "
                "or give a summary and keep the details in the repository."
            )
        return cleaned

    def _summary_for(self, content: str, summary: str | None) -> str:
        if summary is not None and summary.strip():
            return self._clean_text(summary, "summary", required=False)
        return self.summarizer.summarize([content])[0]

    # -- commands -----------------------------------------------------------------------------

    def save(
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
    ) -> Memory:
        """Save a memory; a duplicate of a live one returns that one instead (see :meth:`save_result`)."""
        return self.save_result(
            content,
            title=title,
            summary=summary,
            tags=tags,
            kind=kind,
            importance=importance,
            ttl_seconds=ttl_seconds,
            scope=scope,
            by=by,
            memory_id=memory_id,
            content_field=content_field,
        ).memory

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
        tag_list = _normalize_tags(tags)  # before the summary is made: every argument is checked first
        checked_importance, checked_ttl = _check_importance(importance), _check_ttl(ttl_seconds)
        if summary is not None:
            check_length(summary, "summary")
        _check_by(by)
        if memory_id is not None:
            check_length(memory_id, "memory_id")
        if scope not in SCOPES:
            raise InvalidInput(f"scope must be 'project' or 'global', not {scope!r}")
        event = MemorySaved(
            id=new_id(),
            ts=now_iso(),
            by=by,
            memory=memory_id or new_id(),
            kind=_check_kind(kind),
            scope="global" if scope == "global" else "project",
            title=title,
            content=content,
            summary=self._summary_for(content, summary),
            tags=tag_list,
            importance=checked_importance,
            ttl_seconds=checked_ttl,
            project=self.root.root.name if scope == "global" else "",
        )
        store = self.store_for(scope)
        events: list[AnyEvent] = [event, *self._promotion_at_save(event)]
        duplicates: list[str] = []

        def plan() -> list[AnyEvent]:
            if memory_id is None:
                now = time.time()
                duplicates.extend(m for m in store.find_duplicate(content) if self._returnable(store, m, now))
                if duplicates:
                    return []
            elif head := store.state.head_of(event.memory):  # a well-known id written anew: after its head
                events[:] = _after(head, events)
            return events

        store.append_planned(plan)
        if duplicates:
            memory = self.view(store, store.state.memories[duplicates[0]])
            self.record_access(store, duplicates[:1])
            return Saved(memory=memory, deduplicated=True)
        return Saved(memory=self.view(store, store.state.memories[event.memory]))

    def _save_section(
        self, section: Section, content: str, *, ttl_seconds: int | None, by: str, content_field: str
    ) -> Saved:
        """Replace a singleton section's text (the same memory, ``section:…``, that the project-context
        tools write) and render the ``.ai`` view, so a save of that type never makes a second one."""
        from eventmem.project_context import ProjectContext  # built on this service

        if ttl_seconds is not None:
            raise InvalidInput(
                f"a {section.kind} memory is the project's {section.key} section, which is long-term: leave "
                "ttl_seconds out"
            )
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(f"{content_field} must not be empty")
        ProjectContext(self, by=by).write_section(section.key, content)
        record = self.project.state.memories[section.memory_id]
        return Saved(memory=self.view(self.project, record), section=section.key)

    def _promotion_at_save(self, event: MemorySaved) -> list[AnyEvent]:
        if event.ttl_seconds is None or event.importance < self.config.promote_importance:
            return []
        reason = f"saved with importance {event.importance:g} (promote_importance {self.config.promote_importance:g})"
        return [
            MemoryPromoted(id=new_id(), ts=event.ts, by=event.by, prev=event.id, memory=event.memory, reason=reason)
        ]

    @staticmethod
    def _returnable(store: Store, memory_id: str, now: float, *, superseded: bool = False) -> bool:
        """Live, not past its expiry, and (unless asked) not superseded."""
        slot = store.slots.get(memory_id)
        if slot is None:
            return False
        cols = store.columns
        return bool(cols.live[slot] and cols.expires[slot] > now and (superseded or not cols.superseded[slot]))

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
    ) -> Memory:
        store, record = self._find(memory_id)
        _check_by(by)
        if summary is not None:
            check_length(summary, "summary")
        changes: dict[str, Any] = {}
        if title is not None:  # the cheap checks first: a refused title must not cost a summary
            changes["title"] = self._clean_text(title, "title", required=False)
        if tags is not None:
            changes["tags"] = _normalize_tags(tags)
        if importance is not None:
            changes["importance"] = _check_importance(importance)
        if ttl_seconds != "unchanged":
            changes["ttl_seconds"] = _check_ttl(ttl_seconds)
        if content is not None:
            new_content = self._clean_text(content, "content", required=True)
            if new_content != record.content:
                changes["content"] = new_content
                if summary is None:
                    changes["summary"] = self._summary_for(new_content, None)
        if summary is not None:
            changes["summary"] = self._summary_for(changes.get("content", record.content), summary)
        if kind is not None:
            changes["kind"] = _check_kind(kind)
            _refuse_second_singleton(record.id, changes["kind"])
        changes = {k: v for k, v in changes.items() if getattr(record, k) != v}
        if not changes:
            return self.view(store, record)
        prev = store.state.head_of(record.id)
        store.append([MemoryUpdated(id=new_id(), ts=now_iso(), by=by, prev=prev, memory=record.id, **changes)])
        return self.get(record.id)

    def delete(self, memory_id: str, *, reason: str = "", by: str = "") -> Memory:
        reason = self._clean_text(reason or "", "reason", required=False)
        _check_by(by)
        store, record = self._find(memory_id)
        view = self.view(store, record)
        ts = now_iso()

        def unlinks(where: Store) -> list[AnyEvent]:
            return [
                LinkRemoved(
                    id=new_id(),
                    ts=ts,
                    by=by,
                    prev=where.state.link_head_of(link.id),
                    link=link.id,
                    reason=f"memory {record.id} deleted",
                )
                for link in where.state.links_of(record.id)
            ]

        def plan() -> list[AnyEvent]:
            if store.state.visible(record.id) is None:
                return []  # deleted by another process meanwhile
            prev = store.state.head_of(record.id)
            deleted = MemoryDeleted(id=new_id(), ts=ts, by=by, prev=prev, memory=record.id, reason=reason)
            return [deleted, *unlinks(store)]

        store.append_planned(plan)
        for other in self.stores():  # a link between a project and a global memory lives in the project journal
            if other is not store and other.state.adjacency.get(record.id):
                other.append_planned(functools.partial(unlinks, other))
        view.status = "deleted"
        return view

    def restore(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Bring back a deleted or expired memory: a ``restored`` event, a fresh TTL if its TTL ran
        out, and the links its delete removed (see :func:`eventmem.tombstones.restore_events`), in
        one append per store. Returns (memory, whether it changed); a live memory is left as it is."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise refusal("memory_id", "a memory's id", memory_id)
        memory_id = check_length(memory_id.strip(), "memory_id")
        reason = self._clean_text(reason or "", "reason", required=False)
        _check_by(by)
        store = self._owner(memory_id)
        ts = now_iso()
        planned: list[tuple[Store, AnyEvent]] = []

        def plan() -> list[AnyEvent]:
            planned.clear()
            now = time.time()
            record = store.state.memories[memory_id]
            if record.status == "live" and store.expires_epoch(record.id, record) > now:
                return []
            found = tombstones.restore_events(store, record, ts=ts, by=by, reason=reason, now=now, stores=self.stores())
            planned.extend(found)
            return [event for where, event in planned if where is store]

        written = store.append_planned(plan)
        for other in self.stores():  # a link between a project and a global memory lives in the project journal
            if other is not store and (links := [event for where, event in planned if where is other]):
                other.append(links)
        return self.view(store, store.state.memories[memory_id]), bool(written)

    def _owner(self, memory_id: str) -> Store:
        """The store holding a memory, live or not; :class:`UnknownMemory` if none was ever saved."""
        for store in self.stores():
            store.catch_up()
            with store.lock:
                record = store.state.memories.get(memory_id)
            if record is not None and record.exists:
                return store
        raise UnknownMemory(memory_id)

    # -- queries ------------------------------------------------------------------------------

    def get(self, memory_id: str, *, access: bool = False) -> Memory:
        """One memory; ``access`` (the MCP tools) counts it as used, after the view is taken."""
        store, record = self._find(memory_id)
        memory = self.view(store, record)
        if access:
            self.record_access(store, [record.id])
        return memory

    def view(self, store: Store, record: MemoryRecord) -> Memory:
        expires = store.expires_epoch(record.id, record)
        slot = store.slots.get(record.id)
        superseded = bool(slot is not None and store.columns.superseded[slot])
        status = record.status
        if status == "live" and expires <= time.time():
            status = "expired"
        return Memory(
            id=record.id,
            kind=record.kind,
            scope=record.scope,
            title=record.title,
            content=record.content,
            summary=record.summary,
            tags=list(record.tags),
            importance=record.importance,
            ttl_seconds=record.ttl_seconds,
            created_at=record.created_at,
            updated_at=record.updated_at or record.created_at,
            expires_at=None if math.isinf(expires) else epoch_iso(expires),
            created_by=record.created_by,
            updated_by=record.updated_by,
            status=status,
            superseded=superseded,
            access_count=store.usage.count(record.id),
            promoted=bool(record.promoted_stamp),
            project=record.project or (self.root.root.name if store is self.project else ""),
        )

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        filters: Filters | None = None,
        include_content: bool = False,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        access: bool = False,
        now: float | None = None,
    ) -> list[Hit]:
        """``now``: the moment the question is asked (seconds since the epoch; the clock's by default),
        for expiry, recency and the times the query names (an evaluation replays questions asked in the past)."""
        check_length(query, "query")
        if not has_visible(query):
            raise refusal("query", "a text with a visible character", query)
        limit = _check_whole(limit, "limit")
        filters = filters or Filters()
        filters.validate()
        hits: list[Hit] = []
        owners: dict[str, Store] = {}
        now = time.time() if now is None else now
        self._search_notes.notes = []
        for store in self.stores():
            if filters.scope not in (None, "all") and store is not self.store_for(filters.scope):
                continue
            store.catch_up()
            with store.lock:
                mask = build_mask(store, filters, now)
                # until a slow embedding model is ready, answer from the keyword index and say so
                vectors = mode != "keyword" and store.vector_status() == "ready"
                try:
                    scored = hybrid_search(
                        store,
                        query,
                        limit,
                        mask,
                        self.config,
                        use_vectors=vectors,
                        use_keywords=mode != "vector" or not vectors,
                        now=now,
                    )
                except ProviderError:
                    vectors = False
                    scored = hybrid_search(store, query, limit, mask, self.config, use_vectors=False, now=now)
                if mode != "keyword" and not vectors:
                    self._search_notes.notes = [*self.search_notes(), store.vector_note()]
                for item in scored:
                    record = store.state.memories[store.slot_ids[item.slot]]
                    hits.append(
                        Hit(
                            id=record.id,
                            score=round(item.score, 4),
                            kind=record.kind,
                            scope=record.scope,
                            title=record.title,
                            summary=record.summary,
                            tags=list(record.tags),
                            importance=record.importance,
                            created_at=record.created_at,
                            updated_at=record.updated_at or record.created_at,
                            vector_score=round(item.vector_score, 4),
                            keyword_score=round(item.keyword_score, 4),
                            content=record.content if include_content else None,
                        )
                    )
                    owners[record.id] = store
        hits.sort(key=lambda h: (-h.score, h.id))
        hits = hits[:limit]
        if access:
            self._record_hits(owners, hits)
        return hits

    # -- lifecycle: usage, promotion, relationships, search, context, compaction --------------

    def record_access(self, store: Store, memory_ids: Sequence[str]) -> None:
        """Count accesses in the local usage stream (one write), extend TTLs, promote the often used;
        in a server, just after the reply (see :meth:`Store.defer`): the next call sees them.

        Never fails the read it comes from: a promotion that cannot be written is logged."""
        if memory_ids:
            store.defer(functools.partial(self._record_access_now, store, list(memory_ids), now_iso()))

    def _record_access_now(self, store: Store, memory_ids: Sequence[str], ts: str) -> None:
        store.usage.record(memory_ids, ts)
        with store.lock:
            for memory_id in store.usage.refresh():
                store.refresh_expiry(memory_id)
        threshold = self.config.promote_accesses
        if threshold <= 0:
            return

        def plan() -> list[AnyEvent]:
            events: list[AnyEvent] = []
            for memory_id in dict.fromkeys(memory_ids):
                record = store.state.visible(memory_id)
                count = store.usage.count(memory_id)
                if record is not None and record.ttl_seconds is not None and count >= threshold:
                    reason = f"accessed {count} times (promote_accesses {threshold})"
                    promoted = MemoryPromoted(
                        id=new_id(), ts=now_iso(), by="eventmem", prev=record.head, memory=memory_id, reason=reason
                    )
                    events.append(promoted)
            return events

        with store.lock:
            if not plan():
                return
        try:
            store.append_planned(plan)  # re-checked under the journal lock: written once
        except EventmemError as exc:
            log.warning("could not write a promotion: %s", exc)

    def _record_hits(self, owners: dict[str, Store], hits: Sequence[Hit]) -> None:
        for store in self.stores():
            self.record_access(store, [hit.id for hit in hits if owners.get(hit.id) is store])

    def promote(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Make a memory long-term with a ``promoted`` event. Returns (memory, whether it changed)."""
        reason = self._clean_text(reason or "", "reason", required=False)
        _check_by(by)
        store, record = self._find(memory_id)

        def plan() -> list[AnyEvent]:
            current = store.state.visible(record.id)
            if current is None or current.ttl_seconds is None:
                return []
            return [
                MemoryPromoted(
                    id=new_id(), ts=now_iso(), by=by, prev=current.head, memory=record.id, reason=reason or "by hand"
                )
            ]

        written = store.append_planned(plan)
        return self.view(store, store.state.memories[record.id]), bool(written)

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
        _refuse_second_singleton("", old.kind if kind is None else _check_kind(kind))
        content = self._clean_text(content, "content", required=True)
        new_title = old.title if title is None else self._clean_text(title, "title", required=False)
        new_tags = old.tags if tags is None else _normalize_tags(tags)
        new_importance = old.importance if importance is None else _check_importance(importance)
        new_ttl = _check_ttl(ttl_seconds)
        link_context = self._clean_text(reason or "", "reason", required=False)
        if summary is not None:
            check_length(summary, "summary")
        _check_by(by)
        ts = now_iso()
        event = MemorySaved(
            id=new_id(),
            ts=ts,
            by=by,
            memory=new_id(),
            kind=old.kind if kind is None else _check_kind(kind),
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
        return self.view(store, store.state.memories[event.memory]), _link_view(store.state.links[link.link])

    def link(
        self,
        source_id: str,
        target_id: str,
        relation: str = "related_to",
        *,
        strength: float = 1.0,
        context: str = "",
        by: str = "",
    ) -> tuple[Link, bool]:
        """A typed link between two live memories. The same (source, target, relation) again
        returns the existing link, updated if strength or context differ. Returns (link, created)."""
        relation = _check_relation(relation)
        strength = _check_unit(strength, "strength")
        context = self._clean_text(context or "", "context", required=False)
        _check_by(by)
        source_store, source = self._find(source_id)
        target_store, target = self._find(target_id)
        if source.id == target.id:
            raise InvalidInput("a memory cannot be linked to itself")
        # a link between a project and a global memory is kept in the project journal
        store = source_store if source_store is target_store else self.project
        event = LinkAdded(
            id=new_id(),
            ts=now_iso(),
            by=by,
            link=new_id(),
            source=source.id,
            target=target.id,
            relation=relation,
            strength=strength,
            context=context,
        )
        found: list[LinkRecord] = []

        def plan() -> list[AnyEvent]:
            for existing in store.state.links_of(source.id):
                if (existing.source, existing.target, existing.relation) == (source.id, target.id, relation):
                    found.append(existing)
                    if (existing.strength, existing.context) == (strength, context):
                        return []
                    return [msgspec.structs.replace(event, link=existing.id, prev=existing.head)]
            return [event]

        store.append_planned(plan)
        link_id = found[0].id if found else event.link
        return _link_view(store.state.links[link_id]), not found

    def related(
        self,
        memory_id: str,
        *,
        depth: int = 1,
        relations: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: int = 50,
        include_superseded: bool = False,
    ) -> list[dict[str, Any]]:
        """Memories reachable from one along live links, breadth first (nearest, then strongest)."""
        depth = _check_whole(depth, "depth")
        limit = _check_whole(limit, "related_limit", "limit")
        if direction not in ("out", "in", "both"):
            raise InvalidInput("direction must be 'out' (links from the memory), 'in' (links to it) or 'both'")
        wanted = [_check_relation(r) for r in check_count(relations or (), "relations")]
        _, root = self._find(memory_id)
        stores = self.stores()
        now = time.time()
        owners: dict[str, Store | None] = {}

        def links_of(memory: str) -> list[LinkRecord]:
            return [s.state.links[i] for s in stores for i in s.state.adjacency.get(memory, ())]

        def owner(memory: str) -> Store | None:
            if memory not in owners:
                found = None
                for s, ok in returnable:
                    slot = s.slots.get(memory)
                    if slot is not None and slot < len(ok) and ok[slot]:
                        found = s
                        break
                owners[memory] = found
            return owners[memory]

        with contextlib.ExitStack() as locks:
            returnable: list[tuple[Store, npt.NDArray[np.bool_]]] = []
            for s in stores:
                locks.enter_context(s.lock)
                n = len(s.slot_ids)
                ok = s.columns.live[:n] & (s.columns.expires[:n] > now)
                if not include_superseded:
                    ok &= ~s.columns.superseded[:n]
                returnable.append((s, ok))
            steps = walk(
                root.id,
                links_of,
                depth=depth,
                relations=wanted,
                direction=direction,
                keep=lambda m: owner(m) is not None,
                limit=limit,
            )
            out: list[dict[str, Any]] = []
            for step in steps:
                where = owner(step.memory)
                assert where is not None
                record = where.state.memories[step.memory]
                out.append(
                    {
                        "id": step.memory,
                        "depth": step.depth,
                        "relation": step.relation,
                        "direction": step.direction,
                        "strength": step.strength,
                        "context": step.context,
                        "link": step.via,
                        "from": step.parent,
                        "kind": record.kind,
                        "scope": record.scope,
                        "title": record.title,
                        "summary": record.summary,
                        "importance": record.importance,
                    }
                )
        return out

    def search(
        self,
        query: str | None = None,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        project: str | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        sort: Literal["relevance", "importance", "recent"] | None = None,
        include_content: bool = False,
        access: bool = False,
    ) -> list[Hit]:
        """Structured search: filters, plus optional query text. Without a query, a listing of what
        the filters match, most important (or most recent) first. ``project``: memories of that
        project (this project's own, and global ones saved from it)."""
        text = check_length(query, "query").strip() if query is not None else ""
        limit = _check_whole(limit, "limit")
        if project is not None:
            check_length(project, "project")
        if mode not in ("hybrid", "vector", "keyword"):
            raise InvalidInput("mode must be 'hybrid', 'vector' or 'keyword'")
        order = sort or ("relevance" if text else "importance")
        if order not in ("relevance", "importance", "recent"):
            raise InvalidInput("sort must be 'relevance', 'importance' or 'recent'")
        if order == "relevance" and not text:
            raise InvalidInput("sort 'relevance' needs a query; without one, sort by 'importance' or 'recent'")
        filters = filters or Filters()
        filters.validate()
        now = time.time()
        hits: list[tuple[Hit, float]] = []
        owners: dict[str, Store] = {}
        for store in self.stores():
            if filters.scope not in (None, "all") and store is not self.store_for(filters.scope):
                continue
            store.catch_up()
            with store.lock:
                mask = build_mask(store, filters, now)
                if project is not None:
                    mask &= self._project_mask(store, project)
                cols = store.columns
                if text:
                    vectors = mode != "keyword" and store.vector_status() == "ready"
                    scored = [
                        (s.slot, s.score, s.vector_score, s.keyword_score)
                        for s in hybrid_search(
                            store,
                            text,
                            limit,
                            mask,
                            self.config,
                            use_vectors=vectors,
                            use_keywords=mode != "vector" or not vectors,
                            now=now,
                        )
                    ]
                else:
                    slots = mask.nonzero()[0]
                    updated = cols.updated[slots]
                    importance = cols.importance[slots].astype(np.float64)
                    keys = np.stack([updated] if order == "recent" else [updated, importance])
                    picked = slots[np.lexsort(keys)[::-1][:limit]]
                    scored = [(int(slot), float(cols.importance[slot]), 0.0, 0.0) for slot in picked]
                for slot, score, vector_score, keyword_score in scored:
                    record = store.state.memories[store.slot_ids[slot]]
                    hit = Hit(
                        id=record.id,
                        score=round(score, 4),
                        kind=record.kind,
                        scope=record.scope,
                        title=record.title,
                        summary=record.summary,
                        tags=list(record.tags),
                        importance=record.importance,
                        created_at=record.created_at,
                        updated_at=record.updated_at or record.created_at,
                        vector_score=round(vector_score, 4),
                        keyword_score=round(keyword_score, 4),
                        content=record.content if include_content else None,
                    )
                    hits.append((hit, float(cols.updated[slot])))
                    owners[record.id] = store
        if order == "relevance":
            hits.sort(key=lambda h: (-h[0].score, h[0].id))
        elif order == "importance":
            hits.sort(key=lambda h: (-h[0].importance, -h[1], h[0].id))
        else:
            hits.sort(key=lambda h: (-h[1], h[0].id))
        found = [hit for hit, _ in hits[:limit]]
        if access and text:  # a listing is browsing, not use: only search hits count as accesses
            self._record_hits(owners, found)
        return found

    def _project_mask(self, store: Store, project: str) -> npt.NDArray[np.bool_]:
        n = len(store.slot_ids)
        wanted = project.strip().casefold()
        if store is self.project:
            return np.full(n, wanted == self.root.root.name.casefold(), bool)
        memories = store.state.memories
        return np.fromiter((memories[m].project.casefold() == wanted for m in store.slot_ids), bool, n)

    def context(
        self,
        *,
        max_chars: int = 4000,
        types: Sequence[str] | None = None,
        include_global: bool = True,
        per_type: int = 0,
    ) -> dict[str, Any]:
        """The session-start bundle: per type, the most important and the most recent memories, in
        turns, as markdown within ``max_chars`` (global memories marked as such)."""
        max_chars = _check_whole(max_chars, "max_chars")
        per_type = _check_whole(per_type, "per_type")
        filters = Filters(kinds=tuple(_check_kind(t) for t in check_count(types or (), "types")))
        now = time.time()
        records: list[tuple[MemoryRecord, str]] = []
        counts: dict[str, int] = {}
        for store in self.stores():
            if store is not self.project and not include_global:
                continue
            store.catch_up()
            with store.lock:
                for slot in build_mask(store, filters, now).nonzero()[0].tolist():
                    record = store.state.memories[store.slot_ids[slot]]
                    records.append((record, record.scope))
                    counts[record.kind] = counts.get(record.kind, 0) + 1
        text, lines, omitted = context_bundle(
            records, max_chars=max_chars, title=f"Project memory: {self.root.root.name}", per_kind=per_type
        )
        return {
            "text": text,
            "chars": len(text),
            "memories": [
                {
                    "id": line.record.id,
                    "kind": line.record.kind,
                    "scope": line.scope,
                    "title": line.record.title,
                    "summary": line.record.summary,
                    "importance": line.record.importance,
                    "updated_at": line.record.updated_at or line.record.created_at,
                }
                for line in lines
            ],
            "counts": {k: counts[k] for k in sorted(counts, key=lambda k: (KINDS.index(k) if k in KINDS else 99, k))},
            "omitted": omitted,
        }

    def compact(
        self,
        *,
        now: float | None = None,
        by: str = "eventmem",
        archive: bool | Literal["daily"] = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """One compaction pass over every memory directory: ``expired`` events for memories whose
        TTL ran out, then (``archive``) the history of memories deleted or expired more than
        ``archive_after_days`` ago moved into an archive segment, then the usage stream shrunk.
        ``archive="daily"`` (the server's scheduler) archives at most once a day per memory
        directory: a rewrite makes every other process of the clone rebuild, so it is batched.
        Safe to run in several processes at once: decisions are re-checked under the journal lock.

        ``now`` later than the clock is refused (its events would be stamped in the future, in a
        tracked journal) unless ``dry_run``, which only says what would be expired and archived."""
        clock = time.time()
        now = clock if now is None else now
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise InvalidInput(f"now must be a time, not {now!r}")
        try:
            epoch_iso(now)
        except (OverflowError, ValueError, OSError):
            raise InvalidInput(f"now must be a time between the years 1 and 9999, not {now!r}") from None
        if dry_run:
            return self._compact_preview(now, archive=archive is not False)
        if now > clock:
            raise InvalidInput(
                f"cannot compact at {epoch_iso(now)}, later than the clock ({epoch_iso(clock)}): its events would "
                "be stamped in the future; only a dry run may look ahead (eventmem compact --now … --dry-run)"
            )
        report: dict[str, Any] = {"expired": [], "archived": [], "usage_compacted": []}
        for store in self.stores():
            store.catch_up()
            with store.lock:
                due = due_for_expiry(store, now)
            if due:
                written = store.append_planned(functools.partial(self._plan_expiry, store, now, by))
                report["expired"] += [getattr(e, "memory", "") for e in written]
            if archive is True or (archive == "daily" and not archived_on(store, epoch_iso(now)[:10])):
                result = self._archive_dead(store, now, by)
                if result is not None:
                    report["archived"].append(result)
            if store.usage.compact(store.state.memories, ts=epoch_iso(now)):
                report["usage_compacted"].append(str(store.usage.path))
        return report

    def _compact_preview(self, now: float, *, archive: bool) -> dict[str, Any]:
        """What a compaction at ``now`` would do, writing nothing: the memories it would expire and
        those whose history it would archive (already deleted or expired long enough before ``now``)."""
        cutoff = now - self.config.archive_after_days * 86400.0
        report: dict[str, Any] = {"dry_run": True, "now": epoch_iso(now), "would_expire": [], "would_archive": []}
        for store in self.stores():
            store.catch_up()
            with store.lock:
                report["would_expire"] += [event.memory for event in plan_expiry(store, now)]
                if archive:
                    report["would_archive"] += archive_candidates(store.state, cutoff, store.hidden_memories())
        return report

    @staticmethod
    def _plan_expiry(store: Store, now: float, by: str) -> list[AnyEvent]:
        return list(plan_expiry(store, now, by=by))

    def _archive_dead(self, store: Store, now: float, by: str) -> dict[str, Any] | None:
        cutoff = now - self.config.archive_after_days * 86400.0
        checked = self._archive_checked.setdefault(str(store.paths.base), {})

        def select(state: State) -> list[str]:
            among = store.hidden_memories() if state is store.state else None  # the live are no candidates
            found = archive_candidates(state, cutoff, among)
            return [m for m in found if checked.get(m) != latest_stamp(state.memories[m])]

        with store.lock:
            candidates = select(store.state)
        if not candidates:
            return None
        result = archive_memories(store, select, now=now, by=by)
        with store.lock:  # looked at: not again until something new happens to them
            for memory_id in candidates:
                checked[memory_id] = latest_stamp(store.state.memories[memory_id])
        if not result.segment:
            return None
        return {
            "segment": result.segment,
            "rewritten": result.rewritten,
            "memories": len(result.memories),
            "events": result.events,
            "bytes_before": result.bytes_before,
            "bytes_after": result.bytes_after,
        }

    def history(self, memory_id: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        """Events (newest last) about one memory, or all, with where each line is in the journal."""
        if memory_id is not None:
            check_length(memory_id, "memory_id")
        if limit:  # 0: every event
            _check_whole(limit, "log_limit", "limit")
        rows: list[tuple[str, dict[str, Any]]] = []
        for store in self.stores():
            for segment, result in store.journal.iter_all(with_offsets=True):
                for event, offset in zip(result.events, result.offsets, strict=True):
                    if isinstance(event, UnknownEvent):
                        if memory_id is None:
                            data = {"type": event.type, "id": event.id, "ts": event.ts, "unknown": True}
                            rows.append((event.ts + event.id, data | {"segment": segment.name, "offset": offset}))
                        continue
                    if (
                        memory_id is not None
                        and memory_id not in memory_ids(event)
                        and not (getattr(event, "link", None) and _link_touches(store, event, memory_id))
                    ):
                        continue
                    data = msgspec.to_builtins(event)
                    data["segment"], data["offset"] = segment.name, offset
                    rows.append((event.ts + event.id, data))
        rows.sort(key=lambda r: r[0])
        out = [data for _, data in rows]
        return out[-limit:] if limit else out

    def stats(self) -> dict[str, Any]:
        self.catch_up()
        store = self.project
        with store.lock:
            records = [r for r in store.state.memories.values() if r.exists]
            by_status: dict[str, int] = {}
            by_kind: dict[str, int] = {}
            tags: dict[str, int] = {}
            for record in records:
                by_status[record.status] = by_status.get(record.status, 0) + 1
                if record.status == "live":
                    by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
                    for tag in record.tags:
                        tags[tag] = tags.get(tag, 0) + 1
            segments = store.journal.segments()
            return {
                "root": str(self.root.root),
                "root_source": self.root.source,
                "memories": by_status.get("live", 0),
                "by_status": by_status,
                "by_kind": dict(sorted(by_kind.items())),
                "top_tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
                "links": sum(1 for link in store.state.links.values() if link.alive),
                "events": len(store.state.seen),
                "unknown_events": dict(store.state.unknown),
                "segments": len(segments),
                "journal_bytes": sum(s.size for s in segments),
                "embedder": store.embedder.model_id,
                "corrupt_lines": [
                    {"segment": p.path, "offset": p.offset, "reason": p.reason} for p in store.problems.values()
                ],
            }

    def warnings(self) -> list[str]:
        """Problems the caller should know about (corrupt journal lines, quarantined torn tails, refused
        segments, ignored settings), in words; after a recall in this thread, also whether it had to do
        without vectors (see :meth:`search_notes`)."""
        return (
            [
                f"{problem}. Run `eventmem replay audit` for details."
                for store in self.stores()
                for problem in store.problems.values()
            ]
            + [note for store in self.stores() for note in store.journal.quarantined()]
            + [reason for store in self.stores() for reason in store.journal.refused.values()]
            + self.ignored_settings
            + self.search_notes()
        )

    def search_notes(self) -> list[str]:
        """What limited the last :meth:`recall` made by this thread (a model still loading)."""
        notes: list[str] = getattr(self._search_notes, "notes", [])
        return [note for note in dict.fromkeys(notes) if note]

    def vector_status(self) -> str:
        """The project store's vectors: ``ready``, ``loading``, ``embedding`` or ``unavailable``."""
        return self.project.vector_status()

    def close(self) -> None:
        for store in self.stores():
            store.close()


def _refuse_second_singleton(memory_id: str, kind: str) -> None:
    """A singleton type belongs to one memory, its section's: no other memory may take it on."""
    section = singleton_of_kind(kind)
    if section is not None and memory_id != section.memory_id:
        raise InvalidInput(
            f"type {kind} is the project-context section {section.key}, one memory ({section.memory_id}): "
            f"change it with store_memory type {kind} or update_context_section, not by making another one"
        )


def _link_touches(store: Store, event: AnyEvent, memory_id: str) -> bool:
    link = store.state.links.get(getattr(event, "link", ""))
    return link is not None and memory_id in (link.source, link.target)


def make_embedder(config: Config) -> Embedder:
    """The embedder the config names (see :mod:`eventmem.providers` for the spec strings)."""
    if config.embedder in ("hashing", "hashing-384", ""):
        return HashingEmbedder()
    from eventmem.providers import make_embedder_from_spec

    return make_embedder_from_spec(config.embedder)


def open_service(
    root: RootChoice,
    *,
    environ: dict[str, str] | None = None,
    load: bool = True,
    background_vectors: bool = False,
) -> MemoryService:
    """Open the project at ``root`` (and the user-wide global memory, when it exists).

    ``background_vectors`` (the MCP server): a model-backed embedder loads and embeds in the
    background while recall answers from the keyword index; otherwise (CLI, tools) opening waits
    for the model and embeds what it must before returning."""
    started = time.perf_counter()
    paths = ProjectPaths(root.root)
    paths.check_layout()
    settings = load_settings(paths.config_file, environ)
    for line in settings.ignored:
        log.warning("%s", line)
    config = settings.config
    embedder = make_embedder(config)
    if load and isinstance(embedder, HashingEmbedder):  # its table loads beside the snapshot
        threading.Thread(target=embedder.warm, name="eventmem-embedder-warm", daemon=True).start()
    project = Store(paths, config, embedder)
    global_store = None
    global_dir = global_root(environ)
    if global_dir.resolve() != root.root.resolve():
        global_paths = ProjectPaths(global_dir)
        global_paths.check_layout()
        global_store = Store(global_paths, config, embedder)
    service = MemoryService(project, root=root, global_store=global_store)
    service.ignored_settings, service.allowed_settings = settings.ignored, settings.approved
    if load:
        for store in service.stores():
            store.open(background_vectors=background_vectors)
    log.info("opened %s (%s) in %.3fs", root.root, root.source, time.perf_counter() - started)
    return service
