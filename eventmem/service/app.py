"""The composition root: :func:`open_service` builds the stores, the embedder and the settings, and
:class:`MemoryService` composes the service's parts into the one object every adapter calls."""

from __future__ import annotations

import logging
import threading
import time

from eventmem.core.summarizer import ExtractiveSummarizer, Summarizer
from eventmem.embedders.embedder import Embedder, HashingEmbedder
from eventmem.journal.config import Config, load_settings
from eventmem.journal.project import ProjectPaths, RootChoice, global_root
from eventmem.runner.runner import Store
from eventmem.runner.tuning import Tuning
from eventmem.service.access import Accesses
from eventmem.service.commands import Commands
from eventmem.service.links import Links
from eventmem.service.maintenance import Maintenance
from eventmem.service.part import Part, Shared
from eventmem.service.queries import Queries

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
    project = Store(paths, config, embedder, tuning=tuning)
    global_store = None
    global_dir = global_root(environ)
    if global_dir.resolve() != root.root.resolve():
        global_paths = ProjectPaths(global_dir)
        global_paths.check_layout()
        global_store = Store(global_paths, config, embedder, tuning=tuning)
    service = MemoryService(project, root=root, global_store=global_store)
    service.ignored_settings, service.allowed_settings = settings.ignored, settings.approved
    if load:
        for store in service.stores():
            store.open(background_vectors=background_vectors)
    log.info("opened %s (%s) in %.3fs", root.root, root.source, time.perf_counter() - started)
    return service
