"""The base of the service's parts: what they share, and finding and showing a memory in its stores.

Each part (commands, queries, access counting, maintenance) is a small class built on one :class:`Shared`:
this project's store, the user-wide global one when present, the project root and the settings."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import msgspec

from eventmem.core.errors import InvalidInput, UnknownMemory
from eventmem.core.ids import canonical_id, looks_like_prefix
from eventmem.core.records import MemoryRecord
from eventmem.core.summarizer import Summarizer
from eventmem.core.validation import check_length
from eventmem.journal.config import Config
from eventmem.journal.project import RootChoice
from eventmem.runner.runner import Store
from eventmem.service import tombstones
from eventmem.service.inputs import clean_text
from eventmem.service.lifecycle import epoch_iso
from eventmem.service.models import Memory

__all__ = ["Part", "Shared"]


@dataclass(eq=False)
class Shared:
    """One service's stores and settings, shared by its parts."""

    project: Store
    root: RootChoice
    config: Config
    summarizer: Summarizer
    global_store: Store | None = None
    ignored_settings: list[str] = field(default_factory=list)
    """Settings of a tracked config file left out because they reach the network (see
    :func:`eventmem.journal.config.load_settings`)."""
    allowed_settings: list[str] = field(default_factory=list)
    """Settings of the tracked config file that reach the network, in effect by ``eventmem allow``."""
    search_notes: threading.local = field(default_factory=threading.local)
    """Per thread: what limited its last recall (see :meth:`Part.search_notes`)."""


class Part:
    """A part of the service: the shared stores and settings, and the lookups every part needs."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    @property
    def project(self) -> Store:
        return self.shared.project

    @property
    def root(self) -> RootChoice:
        return self.shared.root

    @property
    def config(self) -> Config:
        """The settings; replacing them replaces them for every part (tools/eval.py tries settings so)."""
        return self.shared.config

    @config.setter
    def config(self, config: Config) -> None:
        self.shared.config = config

    @property
    def _global(self) -> Store | None:
        return self.shared.global_store

    @property
    def _search_notes(self) -> threading.local:
        return self.shared.search_notes

    def _clean_text(self, text: str, field: str, *, required: bool) -> str:
        """``text`` checked, scrubbed and stripped (see :func:`~eventmem.service.inputs.clean_text`)."""
        return clean_text(self.config, text, field, required=required)

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

    def resolve_id(self, memory_id: str, *, prefix: bool = False) -> str:
        """The id a caller means: a ULID in any case is the one in upper case; with ``prefix`` (the
        command line, the web UI), also the one id of a memory ever saved that starts with these 6 or
        more characters, as git takes a commit's. An ambiguous prefix is refused with the ids it
        could mean; an id nothing matches is returned as given (the caller says it is unknown)."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("memory id must be a non-empty string")
        check_length(memory_id, "memory_id")
        memory_id = canonical_id(memory_id.strip())
        if not prefix or not looks_like_prefix(memory_id):
            return memory_id
        start = memory_id.upper()
        found: list[str] = []
        for store in self.stores():
            store.catch_up()
            with store.read() as view:
                if view.record(memory_id) is not None:
                    return memory_id  # (an imported id that happens to look like a prefix)
                found += [m for m, record in view.memories().items() if m.startswith(start) and record.exists]
        if len(found) > 1:
            shown = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
            raise InvalidInput(f"id prefix {memory_id!r} is ambiguous: {len(found)} memories start with it ({shown})")
        return found[0] if found else memory_id

    def _find(self, memory_id: str) -> tuple[Store, MemoryRecord]:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("memory id must be a non-empty string")
        check_length(memory_id, "memory_id")
        memory_id = canonical_id(memory_id.strip())
        for store in self.stores():
            store.catch_up()
            with store.read() as view:
                record = view.visible(memory_id)
                expires = math.inf if record is None else view.expires_at(record)
            if record is not None:
                if expires <= time.time():
                    raise tombstones.expired_error(record, epoch_iso(expires))
                return store, record
        raise self._gone_or_unknown(memory_id)

    def _gone_or_unknown(self, memory_id: str) -> UnknownMemory:
        """For an id no live memory has: what happened to it (deleted or expired), else unknown."""
        for store in self.stores():
            with store.read() as view:
                record = view.record(memory_id)
            if record is not None and record.exists and record.status != "live":
                return tombstones.gone(store, record)
        return UnknownMemory(memory_id)

    def _owner(self, memory_id: str) -> Store:
        """The store holding a memory, live or not; :class:`UnknownMemory` if none was ever saved."""
        memory_id = canonical_id(memory_id.strip()) if isinstance(memory_id, str) else memory_id
        for store in self.stores():
            store.catch_up()
            with store.read() as view:
                record = view.record(memory_id)
            if record is not None and record.exists:
                return store
        raise UnknownMemory(memory_id)

    def view(self, store: Store, record: MemoryRecord) -> Memory:
        with store.read() as view:
            expires = view.expires_at(record)
            superseded = view.superseded(record.id)
            access_count = view.access_count(record.id)
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
            access_count=access_count,
            promoted=bool(record.promoted_stamp),
            project=record.project or (self.root.root.name if store is self.project else ""),
            metadata=dict(record.metadata) if record.metadata else msgspec.UNSET,
            source=record.source or msgspec.UNSET,
        )

    def search_notes(self) -> list[str]:
        """What limited the last :meth:`recall` made by this thread (a model still loading)."""
        notes: list[str] = getattr(self._search_notes, "notes", [])
        return [note for note in dict.fromkeys(notes) if note]

    def close(self) -> None:
        for store in self.stores():
            store.close()
