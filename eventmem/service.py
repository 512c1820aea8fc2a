"""The one service every adapter (MCP tools, CLI, replay tool) goes through.

Commands validate their input, turn it into events, append them and fold them in; queries catch up
with the journal first, so what any process wrote before the call began is visible to it. Nothing
here knows about MCP or the terminal.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from eventmem.codec import UnknownEvent
from eventmem.config import Config, load_config
from eventmem.embedder import Embedder, HashingEmbedder
from eventmem.errors import InvalidInput, LimitExceeded, UnknownMemory
from eventmem.events import (
    KINDS,
    SCOPES,
    AnyEvent,
    MemoryDeleted,
    MemorySaved,
    MemoryUpdated,
    memory_ids,
)
from eventmem.ids import new_id, now_iso, to_iso
from eventmem.project import ProjectPaths, RootChoice, global_root
from eventmem.providers import ProviderError
from eventmem.query import Filters, build_mask, hybrid_search
from eventmem.redact import scrub
from eventmem.state import MemoryRecord
from eventmem.store import Store
from eventmem.summarizer import ExtractiveSummarizer, Summarizer

__all__ = ["Hit", "Memory", "MemoryService", "open_service"]

log = logging.getLogger("eventmem.service")

MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_TITLE_CHARS = 200
MAX_LIMIT = 100
MAX_QUERY_CHARS = 4000


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
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput("tags must be strings")
        clean = " ".join(tag.strip().lower().split()).replace(" ", "-")
        if not clean:
            continue
        if len(clean) > MAX_TAG_CHARS:
            raise InvalidInput(f"tag {clean[:20]!r}… is longer than {MAX_TAG_CHARS} characters")
        if clean not in out:
            out.append(clean)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"at most {MAX_TAGS} tags per memory ({len(out)} given)")
    return tuple(out)


def _check_kind(kind: str) -> str:
    kind = kind.strip().lower().replace("-", "_").replace(" ", "_")
    if kind not in KINDS:
        raise InvalidInput(f"unknown type {kind!r}; choose one of: {', '.join(KINDS)}")
    return kind


def _check_importance(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidInput("importance must be a number between 0 and 1")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1, not {value}")
    return float(value)


def _check_ttl(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput("ttl_seconds must be a positive whole number of seconds, or null for long-term")
    return value


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
        memory_id = memory_id.strip()
        for store in self.stores():
            store.catch_up()
            record = store.state.visible(memory_id)
            if record is not None:
                return store, record
        raise UnknownMemory(memory_id)

    # -- validation ---------------------------------------------------------------------------

    def _clean_text(self, text: str, field: str, *, required: bool) -> str:
        if not isinstance(text, str):
            raise InvalidInput(f"{field} must be a string")
        cleaned = scrub(text, refuse=self.config.secrets == "refuse", field=field).strip()
        if required and not cleaned:
            raise InvalidInput(f"{field} must not be empty")
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
            return self._clean_text(summary, "summary", required=False)[:1000]
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
    ) -> Memory:
        content = self._clean_text(content, "content", required=True)
        title = self._clean_text(title or "", "title", required=False)
        if len(title) > MAX_TITLE_CHARS:
            raise InvalidInput(f"title is longer than {MAX_TITLE_CHARS} characters")
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
            tags=_normalize_tags(tags),
            importance=_check_importance(importance),
            ttl_seconds=_check_ttl(ttl_seconds),
        )
        store = self.store_for(scope)
        store.append([event])
        return self.get(event.memory)

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
        changes: dict[str, Any] = {}
        if content is not None:
            new_content = self._clean_text(content, "content", required=True)
            if new_content != record.content:
                changes["content"] = new_content
                if summary is None:
                    changes["summary"] = self._summary_for(new_content, None)
        if summary is not None:
            changes["summary"] = self._summary_for(changes.get("content", record.content), summary)
        if title is not None:
            changes["title"] = self._clean_text(title, "title", required=False)
        if tags is not None:
            changes["tags"] = _normalize_tags(tags)
        if kind is not None:
            changes["kind"] = _check_kind(kind)
        if importance is not None:
            changes["importance"] = _check_importance(importance)
        if ttl_seconds != "unchanged":
            changes["ttl_seconds"] = _check_ttl(ttl_seconds)
        changes = {k: v for k, v in changes.items() if getattr(record, k) != v}
        if not changes:
            return self.view(store, record)
        store.append([MemoryUpdated(id=new_id(), ts=now_iso(), by=by, memory=record.id, **changes)])
        return self.get(record.id)

    def delete(self, memory_id: str, *, reason: str = "", by: str = "") -> Memory:
        store, record = self._find(memory_id)
        view = self.view(store, record)
        store.append([MemoryDeleted(id=new_id(), ts=now_iso(), by=by, memory=record.id, reason=reason)])
        view.status = "deleted"
        return view

    # -- queries ------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        store, record = self._find(memory_id)
        return self.view(store, record)

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
            expires_at=None if math.isinf(expires) else to_iso(datetime.fromtimestamp(expires, UTC)),
            created_by=record.created_by,
            updated_by=record.updated_by,
            status=status,
            superseded=superseded,
        )

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        filters: Filters | None = None,
        include_content: bool = False,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
    ) -> list[Hit]:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters; shorten it")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIMIT}")
        filters = filters or Filters()
        filters.validate()
        hits: list[Hit] = []
        now = time.time()
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
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[:limit]

    def history(self, memory_id: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        """Events (newest last) about one memory, or all, with where each line is in the journal."""
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
        """Problems the caller should know about (corrupt journal lines), in words; after a recall in
        this thread, also whether it had to do without vectors (see :meth:`search_notes`)."""
        return [
            f"{problem}. Run `python tools/replay.py audit` for details."
            for store in self.stores()
            for problem in store.problems.values()
        ] + self.search_notes()

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
    config = load_config(paths.config_file, environ)
    embedder = make_embedder(config)
    project = Store(paths, config, embedder)
    global_store = None
    global_dir = global_root(environ)
    if global_dir.resolve() != root.root.resolve():
        global_paths = ProjectPaths(global_dir)
        global_store = Store(global_paths, config, embedder)
    service = MemoryService(project, root=root, global_store=global_store)
    if load:
        for store in service.stores():
            store.open(background_vectors=background_vectors)
    log.info("opened %s (%s) in %.3fs", root.root, root.source, time.perf_counter() - started)
    return service
