"""The sync runner: every journal named, one database, one connection, kept current on demand."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from eventmem.core.errors import EventmemError
from eventmem.embedders.embedcache import EmbeddingCache
from eventmem.embedders.embedder import Embedder
from eventmem.journal.project import ProjectPaths
from eventmem.journal.watcher import watch_journal
from eventmem.projectors.postgres.connection import (
    DatabaseFull,
    DatabaseUnavailable,
    connect,
    describe,
    is_connection_lost,
    is_disk_full,
)
from eventmem.projectors.postgres.projector import PostgresProjector, pg_name
from eventmem.projectors.postgres.sync import Fold, ProjectSync
from eventmem.projectors.postgres.targets import GLOBAL, Target, is_project_name

__all__ = ["SyncRunner"]

log = logging.getLogger("eventmem.sync")

PROJECT_LOCK_CLASS = 0x6576_6D70  # "evmp": the advisory locks of projects being projected
# the driver warns when a failed batch leaves its pipeline, beside the error the sync reports in one line
logging.getLogger("psycopg").setLevel(logging.ERROR)

APPLICATION_NAME = "eventmem sync"
"""How the sync's connection is named in ``pg_stat_activity``."""


class SyncRunner:
    def __init__(
        self, uri: str, targets: Sequence[Target], embedder: Embedder, folds: Mapping[Path, Fold] | None = None
    ) -> None:
        self.uri = uri
        self.targets = list(targets)
        self.embedder = embedder
        self.folds = dict(folds or {})
        """The process's own folds of journals, by root (a server's in-process stores): a journal with
        one is read up to where it stands and not folded again (:class:`FoldFeed`)."""
        self.conn: Any = None
        self.syncs: dict[str, ProjectSync] = {}
        self._stop: anyio.Event | None = None
        self.application_name = APPLICATION_NAME
        self.progress: Callable[[str, int, int, str], None] | None = None
        """Told, by project name, how far :meth:`start` is (``eventmem sync``'s bars on a terminal):
        the journal being read, then a load's memories copied and its indexes built
        (:data:`~eventmem.projectors.postgres.projector.LoadProgress`)."""
        self.prune = False
        """Whether :meth:`start` drops the rows of the database's projects not among :attr:`targets`
        (``eventmem sync --prune``). Off by default: a database is shared, and another person's or
        machine's sync, or a server, keeps its own projects in it."""

    def start(self) -> dict[str, int]:
        """Connect, drop the rows of projects not named (with :attr:`prune`), and bring every journal up
        to date; returns the events taken per project."""
        self.close()
        self.conn = connect(self.uri, application_name=self.application_name)
        try:
            self.targets = [self._as_held(target) for target in self.targets]
            counts: dict[str, int] = {}
            projectors: list[PostgresProjector] = []
            for target in self.targets:
                paths = ProjectPaths(target.root)
                cache = EmbeddingCache(paths.cache_dir / "embeddings", self.embedder.model_id, self.embedder.dim)
                projector = PostgresProjector(
                    self.conn, target.name, self.embedder, root=str(target.root), branch=paths.branch(), cache=cache
                )
                projectors.append(projector)
                self.syncs[target.name] = ProjectSync(projector, target.root, self.folds.get(target.root))
            with self.conn.transaction():
                if self.prune:
                    self.conn.execute(
                        "DELETE FROM eventmem_projects WHERE NOT (project = ANY(%s))", [[t.name for t in self.targets]]
                    )
                # one global journal named for everyone, before each user's got a name of its own: whoever
                # synced last's memories, served to every user's recall; each user's writer projects theirs
                self.conn.execute("DELETE FROM eventmem_projects WHERE project = %s", [GLOBAL])
            for (name, sync), projector in zip(self.syncs.items(), projectors, strict=True):
                told = self.progress
                if told is not None:
                    told(name, 0, 0, "reading the journal")
                    projector.progress = lambda done, total, stage, name=name, told=told: told(name, done, total, stage)
                try:
                    with self._alone(name):
                        counts[name] = sync.start()
                finally:
                    projector.progress = None
            if projectors:  # (one index for every project, sized for the memories the journals brought)
                projectors[0].vector_index.refresh()
            return counts
        except Exception as exc:
            raise self._failure(exc) from None

    def _as_held(self, target: Target) -> Target:
        """A project named after its folder takes the name the database already holds that folder
        under (``sync --project api=PATH``, then ``serve --store`` in PATH, whose folder is not
        ``api``): projected again under the folder's name, it would be a second copy of every row,
        its first call waiting for it. The folder's name when the database holds it there too; the
        first in name order when it holds the folder under several others (said in the log)."""
        if target.named:
            return target
        with self.conn.transaction():
            if self.conn.execute("SELECT to_regclass('eventmem_projects') IS NULL").fetchone()[0]:
                return target  # (a new database: nothing is held yet)
            roots = list(dict.fromkeys(pg_name(str(root)) for root in (target.root, target.root.resolve())))
            rows = self.conn.execute(
                "SELECT project FROM eventmem_projects WHERE root = ANY(%s) AND project <> %s "
                "AND NOT project ^@ %s ORDER BY project",
                [roots, GLOBAL, GLOBAL + "-"],
            ).fetchall()
        held = [name for name in (str(row[0]) for row in rows) if is_project_name(name)]  # (another writer's rows)
        if not held or target.name in held:
            return Target(target.name, target.root)
        if len(held) > 1:
            log.warning(
                "the database holds %s under %d names (%s): served as %s; --project-name NAME chooses",
                target.root,
                len(held),
                ", ".join(held),
                held[0],
            )
        log.info("%s is held in the database as %s: served under that name", target.root, held[0])
        return Target(held[0], target.root)

    def _failure(self, exc: Exception) -> Exception:
        """A driver error as one line without secrets; any other error as it is."""
        import psycopg

        if is_disk_full(exc):  # (before the connection: psycopg counts it an OperationalError)
            return DatabaseFull(
                f"PostgreSQL is out of disk space, nothing of this batch was kept: {describe(exc, self.uri)}"
            )
        if is_connection_lost(exc):
            return DatabaseUnavailable(f"lost the connection to PostgreSQL: {describe(exc, self.uri)}")
        if isinstance(exc, psycopg.Error):
            return EventmemError(f"PostgreSQL refused the sync: {describe(exc, self.uri)}")
        return exc

    def catch_up(self, name: str) -> int:
        if self.syncs[name].feed.unchanged():  # (a read after no write: no round trip to the database)
            return 0
        try:
            with self._alone(name):
                return self.syncs[name].catch_up()
        except Exception as exc:
            raise self._failure(exc) from None

    @contextmanager
    def _alone(self, name: str) -> Iterator[None]:
        """A transaction holding the project's advisory lock: two processes projecting one journal
        (two servers, a server and ``sync --follow``) read and commit it in turn, so a batch read
        earlier never lands after one read later (its rows and position would go back)."""
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [PROJECT_LOCK_CLASS, name])
            yield

    def memory_counts(self) -> dict[str, int]:
        with self.conn.transaction():
            rows = self.conn.execute("SELECT project, count(*) FROM eventmem_memories GROUP BY project").fetchall()
        return {str(p): int(n) for p, n in rows}

    def follow(self, retry: Sequence[float]) -> None:
        """Keep every journal current until SIGINT or SIGTERM."""
        anyio.run(self._follow, retry)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None
        self.syncs = {}

    async def _follow(self, retry: Sequence[float]) -> None:
        stop = self._stop = anyio.Event()
        broken = False

        async def recover() -> None:
            nonlocal broken
            attempt = 0
            while not stop.is_set():
                try:
                    self.start()
                    broken = False
                    log.warning("reached PostgreSQL again; the journals are projected up to date")
                    return
                except DatabaseUnavailable as exc:
                    log.warning("%s; trying again", exc)
                with anyio.move_on_after(retry[min(attempt, len(retry) - 1)]):
                    await stop.wait()
                attempt += 1

        def on_change_of(name: str) -> Any:
            async def on_change(_paths: set[str] | None) -> None:
                nonlocal broken
                if broken:
                    return
                try:
                    self.catch_up(name)
                except DatabaseUnavailable as exc:
                    log.warning("%s", exc)
                    broken = True
                    await recover()

            return on_change

        async def signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for _ in received:
                    stop.set()
                    return

        async def keep_trying() -> None:
            while not stop.is_set():  # a broken connection is noticed on the next change; retry idle too
                if broken:
                    await recover()
                with anyio.move_on_after(retry[-1]):
                    await stop.wait()

        async with anyio.create_task_group() as group:
            group.start_soon(signals)
            group.start_soon(keep_trying)
            for target in self.targets:
                base = Path(target.root) / ".eventmem"
                group.start_soon(watch_journal, base, on_change_of(target.name), stop)
            await stop.wait()
            group.cancel_scope.cancel()
