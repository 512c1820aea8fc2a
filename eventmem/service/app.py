"""The service's face and its composition root: :class:`MemoryService` declares every method an adapter
calls, each done by one of its parts, and :func:`open_service` builds the stores, the embedder, the
settings and, with ``--store``, the PostgreSQL reads, once."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, Unpack

from eventmem.core.errors import InvalidInput
from eventmem.core.extras import require
from eventmem.core.query_rules import Filters
from eventmem.core.summarizer import ExtractiveSummarizer, Summarizer
from eventmem.embedders.embedder import Embedder, HashingEmbedder
from eventmem.journal.config import Config, load_settings
from eventmem.journal.project import ProjectPaths, RootChoice, global_root
from eventmem.runner.embedding import Progress
from eventmem.runner.runner import Store
from eventmem.runner.tuning import Tuning
from eventmem.service.access import Accesses
from eventmem.service.batches import Batches, BatchItem
from eventmem.service.commands import Commands, SaveOptions
from eventmem.service.links import Links
from eventmem.service.maintenance import Maintenance
from eventmem.service.models import Hit, Link, Memory, Saved
from eventmem.service.part import Part, Shared
from eventmem.service.queries import Queries
from eventmem.service.reads import Mode, Order, Reads

if TYPE_CHECKING:  # PostgreSQL is an extra: imported only where a store is asked for
    from eventmem.service.database import Database

__all__ = ["MemoryService", "SectionWriter", "make_embedder", "open_service"]

log = logging.getLogger("eventmem.service")


class SectionWriter(Protocol):
    """The port through which the service writes a project-context section: a save of a singleton type
    (project, architecture, current_task, coding_style) in project scope is that section's text (see
    :mod:`eventmem.core.sections`), written by the project-memory protocol, which sits beside the
    service (:func:`eventmem.context.project_context.write_section`) and renders the ``.ai`` view.
    Whoever opens a service for its callers (the adapters) plugs the protocol in; a service opened
    without it refuses such a save.

    A writer replaces the text of the section named ``key`` of ``service``'s project, as ``by``."""

    def __call__(self, service: MemoryService, key: str, content: str, by: str) -> None: ...


class MemoryService(Part, Reads):
    """One project's memory (and the user-wide global memory, when present): every method an adapter
    calls. Each is the work of one part, on the same :class:`~eventmem.service.part.Shared`:
    :class:`~eventmem.service.commands.Commands` and :class:`~eventmem.service.links.Links` write,
    :class:`~eventmem.service.maintenance.Maintenance` keeps the memory directories, and the reads
    (:class:`~eventmem.service.reads.Reads`) are those of :class:`~eventmem.service.queries.Queries`,
    or, serving from PostgreSQL, of :class:`~eventmem.service.database_queries.DatabaseQueries`, whose
    writes are then projected into the database before they return. Finding and showing a memory are
    the service's own (:class:`~eventmem.service.part.Part`)."""

    def __init__(
        self,
        project: Store,
        *,
        root: RootChoice,
        summarizer: Summarizer | None = None,
        global_store: Store | None = None,
        database: Database | None = None,
        sections: SectionWriter | None = None,
    ) -> None:
        shared = Shared(
            project=project,
            root=root,
            config=project.config,
            summarizer=summarizer or ExtractiveSummarizer(),
            global_store=global_store,
        )
        super().__init__(shared)
        accesses = Accesses(shared)
        self._commands = Commands(shared, accesses, self._write_section)
        self._links = Links(shared)
        self._queries = Queries(shared, accesses)
        self._maintenance = Maintenance(shared)
        self._batches = Batches(shared)
        self.database = database
        self._sections = sections
        self._reads: Reads = self._queries
        self._writing: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
        if database is not None:
            from eventmem.service.database_queries import DatabaseQueries  # (the PostgreSQL extra)

            self._reads = DatabaseQueries(shared, accesses, database, self._queries)
            self._writing = database.projecting

    # -- reads ----------------------------------------------------------------------------------

    def get(self, memory_id: str, *, access: bool = False) -> Memory:
        """One memory; ``access`` (the MCP tools) counts it as used, after the view is taken."""
        return self._queries.get(memory_id, access=access)

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        filters: Filters | None = None,
        include_content: bool = False,
        mode: Mode = "hybrid",
        access: bool = False,
        now: float | None = None,
        project: str | None = None,
    ) -> list[Hit]:
        """The memories that best answer ``query``: the keyword and vector rankings fused, with the
        importance, recency and times the query names. ``now``: the moment the question is asked
        (seconds since the epoch; the clock's by default), for expiry, recency and the times the query
        names (an evaluation replays questions asked in the past). ``project``: as :meth:`search`'s.
        ``access`` counts the hits as used."""
        return self._reads.recall(
            query,
            limit=limit,
            filters=filters,
            include_content=include_content,
            mode=mode,
            access=access,
            now=now,
            project=project,
        )

    def search(
        self,
        query: str | None = None,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        project: str | None = None,
        mode: Mode = "hybrid",
        sort: Order | None = None,
        include_content: bool = False,
        access: bool = False,
    ) -> list[Hit]:
        """Structured search: filters, plus optional query text. Without a query, a listing of what
        the filters match, most important (or most recent) first. ``project``: memories of that
        project (this project's own, and global ones saved from it); ``*``: of every project."""
        return self._reads.search(
            query,
            limit=limit,
            filters=filters,
            project=project,
            mode=mode,
            sort=sort,
            include_content=include_content,
            access=access,
        )

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
        return self._reads.related(
            memory_id,
            depth=depth,
            relations=relations,
            direction=direction,
            limit=limit,
            include_superseded=include_superseded,
        )

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
        return self._reads.context(max_chars=max_chars, types=types, include_global=include_global, per_type=per_type)

    def stats(self) -> dict[str, Any]:
        """The project journal's figures (and, serving from PostgreSQL, the database's)."""
        return self._reads.stats()

    def history(self, memory_id: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        """Events (newest last) about one memory, or all, with where each line is in the journal."""
        return self._maintenance.history(memory_id, limit=limit)

    def warnings(self) -> list[str]:
        """Problems the caller should know about (corrupt journal lines, quarantined torn tails, refused
        segments, ignored settings), in words; after a recall in this thread, also whether it had to do
        without vectors (see :meth:`search_notes`)."""
        return self._maintenance.warnings()

    def vector_status(self) -> str:
        """The project store's vectors: ``ready``, ``loading``, ``embedding`` or ``unavailable``."""
        return self._maintenance.vector_status()

    def health(self) -> dict[str, Any]:
        """The project journal read whole, for the doctor (see :meth:`Maintenance.health
        <eventmem.service.maintenance.Maintenance.health>`)."""
        return self._maintenance.health()

    # -- upkeep ---------------------------------------------------------------------------------

    def rebuild(
        self, progress: Progress | None = None, *, embedding: Progress | None = None, wait: bool = True
    ) -> dict[str, Any]:
        """Drop the project's derived state and fold its journal again; the figures of what was folded
        (see :meth:`Maintenance.rebuild <eventmem.service.maintenance.Maintenance.rebuild>`)."""
        return self._maintenance.rebuild(progress, embedding=embedding, wait=wait)

    def wait_snapshot(self) -> None:
        """Wait until the snapshot a :meth:`rebuild` with ``wait=False`` writes is on disk."""
        self._maintenance.wait_snapshot()

    def is_current(self, paths: Iterable[str]) -> bool:
        """Whether every project segment at ``paths`` is, by a stat, exactly as this service last read
        it (a server's watcher then needs no catch-up)."""
        return self.project.is_current(paths)

    def drain_changes(self) -> tuple[bool, set[str]]:
        """What changed in the project memory since the last call: (everything?, memory ids)."""
        return self.project.drain_changes()

    def hold_writes(self) -> None:
        """Wait for the writes in progress, and let no other start (for an exit between writes)."""
        for store in self.stores():
            store.hold_writes()

    # -- writes ---------------------------------------------------------------------------------

    def save(self, content: str, **options: Unpack[SaveOptions]) -> Memory:
        """Save a memory; a duplicate of a live one returns that one instead (see :meth:`save_result`)."""
        with self._writing():
            return self._commands.save(content, **options)

    def save_result(self, content: str, **options: Unpack[SaveOptions]) -> Saved:
        """Save a memory (see :meth:`Commands.save_result <eventmem.service.commands.Commands.save_result>`
        for the options). Content that normalises to a live memory's content returns that memory and
        counts an access, unless ``memory_id`` is given; a singleton type (project, architecture,
        current_task, coding_style) in project scope writes that project-context section instead."""
        with self._writing():
            return self._commands.save_result(content, **options)

    def save_batch(self, items: Sequence[BatchItem], *, by: str) -> list[Saved]:
        """Save ``items`` as project memories in one append by the writer ``by`` (see :meth:`Batches.save_batch
        <eventmem.service.batches.Batches.save_batch>`): all checked first, duplicates not written."""
        with self._writing():
            return self._batches.save_batch(items, by=by)

    def memory_rows(self, *, content_chars: int = 2000) -> list[dict[str, Any]]:
        """The project's returnable memories as plain rows (what the hooks' fast index holds)."""
        return self._batches.memory_rows(content_chars=content_chars)

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
        checked under the journal lock, else :class:`~eventmem.core.errors.StaleVersion` and nothing is
        written."""
        with self._writing():
            return self._commands.update(
                memory_id,
                content=content,
                title=title,
                summary=summary,
                tags=tags,
                kind=kind,
                importance=importance,
                ttl_seconds=ttl_seconds,
                by=by,
                if_version=if_version,
                metadata=metadata,
            )

    def delete(
        self, memory_id: str, *, reason: str = "", by: str = "", if_version: Sequence[str] | None = None
    ) -> Memory:
        """Delete a memory and its links; ``if_version`` as for :meth:`update`."""
        with self._writing():
            return self._commands.delete(memory_id, reason=reason, by=by, if_version=if_version)

    def restore(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Bring back a deleted or expired memory, with a fresh TTL if its TTL ran out and the links its
        delete removed. Returns (memory, whether it changed); a live memory is left as it is."""
        with self._writing():
            return self._commands.restore(memory_id, reason=reason, by=by)

    def promote(self, memory_id: str, *, reason: str = "", by: str = "") -> tuple[Memory, bool]:
        """Make a memory long-term with a ``promoted`` event. Returns (memory, whether it changed)."""
        with self._writing():
            return self._commands.promote(memory_id, reason=reason, by=by)

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
        with self._writing():
            return self._commands.supersede(
                old_id,
                content,
                title=title,
                summary=summary,
                tags=tags,
                kind=kind,
                importance=importance,
                ttl_seconds=ttl_seconds,
                reason=reason,
                by=by,
            )

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
        with self._writing():
            return self._links.link(source_id, target_id, relation, strength=strength, context=context, by=by)

    def compact(
        self,
        *,
        now: float | None = None,
        by: str = "eventmem",
        archive: bool | Literal["daily"] = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """One compaction pass over every memory directory: expiry, the history of long-dead memories
        archived, the usage stream shrunk (see :meth:`Maintenance.compact
        <eventmem.service.maintenance.Maintenance.compact>`); ``dry_run`` only says what it would do."""
        with self._writing():
            return self._maintenance.compact(now=now, by=by, archive=archive, dry_run=dry_run)

    def close(self) -> None:
        if self.database is not None:
            self.database.close()
        super().close()

    @property
    def model_id(self) -> str:
        """The embedder's model: whose vectors the indexes, the caches and the snapshot hold."""
        return self.project.embedder.model_id

    @property
    def summarizer(self) -> Summarizer:
        return self.shared.summarizer

    @property
    def ignored_settings(self) -> list[str]:
        """Settings of a tracked config file left out because they reach the network (see
        :func:`eventmem.journal.config.load_settings`)."""
        return self.shared.ignored_settings

    @ignored_settings.setter
    def ignored_settings(self, lines: list[str]) -> None:
        self.shared.ignored_settings = lines

    @property
    def allowed_settings(self) -> list[str]:
        """Settings of the tracked config file that reach the network, in effect by ``eventmem allow``."""
        return self.shared.allowed_settings

    @allowed_settings.setter
    def allowed_settings(self, lines: list[str]) -> None:
        self.shared.allowed_settings = lines

    def _write_section(self, key: str, content: str, by: str) -> None:
        """Write a project-context section through the protocol plugged in (see :class:`SectionWriter`)."""
        if self._sections is None:
            raise InvalidInput(
                f"this is the project's {key} section, written by the project-context protocol, which this service "
                "was opened without (open_service's sections)"
            )
        self._sections(self, key, content, by)


def make_embedder(config: Config, root: Path | None = None) -> Embedder:
    """The embedder the config names (see :mod:`eventmem.embedders.providers` for the spec strings); a
    relative model path is the project's, at ``root``, wherever the process was started."""
    from eventmem.embedders.providers import make_embedder_from_spec

    return make_embedder_from_spec(config.embedder, root)


def open_service(
    root: RootChoice,
    *,
    environ: dict[str, str] | None = None,
    load: bool = True,
    background_vectors: bool = False,
    tuning: Tuning | None = None,
    store: str | None = None,
    store_name: str | None = None,
    sections: SectionWriter | None = None,
) -> MemoryService:
    """Open the project at ``root`` (and the user-wide global memory, when it exists).

    ``background_vectors`` (the MCP server): a model-backed embedder loads and embeds in the
    background while recall answers from the keyword index; otherwise (CLI, tools) opening waits
    for the model and embeds what it must before returning. ``store``: a PostgreSQL database to
    answer from (else the untracked settings' ``store``, or ``EVENTMEM_STORE``), this project named
    ``store_name`` in it (default: the name it already holds the project's folder under, else the
    folder's name). ``sections``: the project-context protocol, which
    a save of a singleton type writes (see :class:`SectionWriter`)."""
    started = time.perf_counter()
    paths = ProjectPaths(root.root)
    paths.check_layout()
    settings = load_settings(paths.config_file, environ)
    for line in [*settings.invalid, *settings.ignored]:
        log.warning("%s", line)
    config = settings.config
    embedder = make_embedder(config, paths.root)
    # its table loads beside the snapshot; a server with none (a fresh clone: its first call answers
    # by keywords, its memories are embedded after) loads it once the journal is folded and indexed
    warm = embedder.warm if load and isinstance(embedder, HashingEmbedder) else None
    warm_after = background_vectors and not (paths.cache_dir / "snapshot.bin").is_file()
    if warm is not None and not warm_after:
        threading.Thread(target=warm, name="eventmem-embedder-warm", daemon=True).start()
    project = Store(paths, config, embedder, tuning=tuning)
    global_store = None
    global_dir = global_root(environ)
    if global_dir.resolve() != root.root.resolve():
        global_paths = ProjectPaths(global_dir)
        global_paths.check_layout()
        global_store = Store(global_paths, config, embedder, tuning=tuning)
    database = None
    if store or settings.store:
        require("postgres", "answering from PostgreSQL (--store, EVENTMEM_STORE)")
        from eventmem.service.database import Database, StoreFold, project_target

        target = project_target(root.root, store_name)
        folds = {target.root: StoreFold(project)}
        if global_store is not None:
            folds[global_dir] = StoreFold(global_store)
        database = Database(
            store or settings.store,
            target,
            global_dir if global_store is not None else None,
            embedder,
            option="--store" if store else "store (EVENTMEM_STORE or an untracked settings file)",
            folds=folds,
        )
    service = MemoryService(project, root=root, global_store=global_store, database=database, sections=sections)
    service.ignored_settings, service.allowed_settings = settings.ignored, settings.approved
    if load:
        for opened in service.stores():
            opened.open(background_vectors=background_vectors)
        if warm is not None and warm_after:
            threading.Thread(target=warm, name="eventmem-embedder-warm", daemon=True).start()
        # (a server's start waits a few seconds for it, then answers from the journals meanwhile)
        if database is not None and database.open(background=background_vectors):
            log.info("answering from PostgreSQL at %s as project %s", database.shown, database.name)
    log.info("opened %s (%s) in %.3fs", root.root, root.source, time.perf_counter() - started)
    return service
