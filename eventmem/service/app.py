"""The composition root: :func:`open_service` builds the stores, the embedder and the settings, and
:class:`MemoryService` composes the service's parts into the one object every adapter calls."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from eventmem.core.extras import require
from eventmem.core.summarizer import ExtractiveSummarizer, Summarizer
from eventmem.embedders.embedder import Embedder, HashingEmbedder
from eventmem.journal.config import Config, load_settings
from eventmem.journal.project import ProjectPaths, RootChoice, global_root
from eventmem.runner.runner import Store
from eventmem.runner.tuning import Tuning
from eventmem.service.access import Accesses
from eventmem.service.batches import Batches
from eventmem.service.commands import Commands
from eventmem.service.links import Links
from eventmem.service.maintenance import Maintenance
from eventmem.service.part import Part, Shared
from eventmem.service.queries import Queries

if TYPE_CHECKING:  # PostgreSQL is an extra: imported only where a store is asked for
    from eventmem.service.database import Database

__all__ = ["MemoryService", "make_embedder", "open_service"]

log = logging.getLogger("eventmem.service")


class MemoryService(Part):
    """One project's memory (and the user-wide global memory, when present). Finding and showing a memory
    are its own (:class:`~eventmem.service.part.Part`); its other methods are those of its parts:
    :class:`~eventmem.service.commands.Commands`, :class:`~eventmem.service.links.Links`,
    :class:`~eventmem.service.queries.Queries`, :class:`~eventmem.service.access.Accesses` and
    :class:`~eventmem.service.maintenance.Maintenance`, all on the same :class:`~eventmem.service.part.Shared`."""

    def __init__(
        self,
        project: Store,
        *,
        root: RootChoice,
        summarizer: Summarizer | None = None,
        global_store: Store | None = None,
        database: Database | None = None,
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
        self.record_access = accesses.record_access
        commands = Commands(shared, accesses, self._write_section)
        self.save = commands.save
        self.save_result = commands.save_result
        self.update = commands.update
        self.delete = commands.delete
        self.restore = commands.restore
        self.promote = commands.promote
        self.supersede = commands.supersede
        self.link = Links(shared).link
        batches = Batches(shared)
        self.save_batch = batches.save_batch
        self.memory_rows = batches.memory_rows
        queries = Queries(shared, accesses)
        self.get = queries.get
        self.recall = queries.recall
        self.search = queries.search
        self.related = queries.related
        self.context = queries.context
        maintenance = Maintenance(shared)
        self.compact = maintenance.compact
        self.history = maintenance.history
        self.stats = maintenance.stats
        self.warnings = maintenance.warnings
        self.vector_status = maintenance.vector_status
        self.database = database
        if database is not None:
            self._serve_from(database, accesses, queries, maintenance)

    def _serve_from(self, database: Database, accesses: Accesses, queries: Queries, maintenance: Maintenance) -> None:
        """Answer the reads from ``database``, and project every write into it before it returns."""
        from eventmem.service.database_queries import DatabaseQueries

        reads = DatabaseQueries(self.shared, accesses, database, queries, maintenance)
        self.recall = reads.recall
        self.search = reads.search
        self.related = reads.related
        self.context = reads.context
        self.stats = reads.stats
        self.save = database.after(self.save)
        self.save_result = database.after(self.save_result)
        self.save_batch = database.after(self.save_batch)
        self.update = database.after(self.update)
        self.delete = database.after(self.delete)
        self.restore = database.after(self.restore)
        self.promote = database.after(self.promote)
        self.supersede = database.after(self.supersede)
        self.link = database.after(self.link)
        self.compact = database.after(self.compact)

    def close(self) -> None:
        if self.database is not None:
            self.database.close()
        super().close()

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
        """Write a project-context section through :class:`~eventmem.context.project_context.ProjectContext`,
        which is built on this service (a save of a singleton type does)."""
        from eventmem.context.project_context import ProjectContext  # built on this service

        ProjectContext(self, by=by).write_section(key, content)


def make_embedder(config: Config) -> Embedder:
    """The embedder the config names (see :mod:`eventmem.embedders.providers` for the spec strings)."""
    from eventmem.embedders.providers import make_embedder_from_spec

    return make_embedder_from_spec(config.embedder)


def open_service(
    root: RootChoice,
    *,
    environ: dict[str, str] | None = None,
    load: bool = True,
    background_vectors: bool = False,
    tuning: Tuning | None = None,
    store: str | None = None,
    store_name: str | None = None,
) -> MemoryService:
    """Open the project at ``root`` (and the user-wide global memory, when it exists).

    ``background_vectors`` (the MCP server): a model-backed embedder loads and embeds in the
    background while recall answers from the keyword index; otherwise (CLI, tools) opening waits
    for the model and embeds what it must before returning. ``store``: a PostgreSQL database to
    answer from (else the untracked settings' ``store``, or ``EVENTMEM_STORE``), this project named
    ``store_name`` in it (default: its folder's name)."""
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
        from eventmem.service.database import Database, project_name

        database = Database(
            store or settings.store,
            project_name(root.root, store_name),
            root.root,
            global_dir if global_store is not None else None,
            embedder,
            option="--store" if store else "store (EVENTMEM_STORE or an untracked settings file)",
        )
    service = MemoryService(project, root=root, global_store=global_store, database=database)
    service.ignored_settings, service.allowed_settings = settings.ignored, settings.approved
    if load:
        for opened in service.stores():
            opened.open(background_vectors=background_vectors)
        if database is not None and database.open():
            log.info("answering from PostgreSQL at %s as project %s", database.shown, database.name)
    log.info("opened %s (%s) in %.3fs", root.root, root.source, time.perf_counter() - started)
    return service
