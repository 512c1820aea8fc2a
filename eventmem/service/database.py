"""The service's PostgreSQL store (``eventmem serve --store postgresql://…``): one connection, the
project's journal (and the global one) projected into it before every read and after every write.

The journal stays the truth: a write appends to it first, and the database only ever catches up.
When the database cannot be reached (at start, or lost mid-session) the service answers from its
in-process indexes with a one-line warning, and tries again, in the background, at most once every
:data:`RETRY_EVERY_S` seconds; once back, the sync goes on from the position the database committed, so everything the
journal gained meanwhile arrives. Errors and warnings name the database without its password.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventmem.core.errors import EventmemError
from eventmem.embedders.embedder import Embedder
from eventmem.projectors.base import Batch, SegmentPosition
from eventmem.projectors.postgres.connection import check_uri, describe, shown_uri
from eventmem.projectors.postgres.runner import SyncRunner
from eventmem.projectors.postgres.sync import Decoded, batch_of, touched_by
from eventmem.projectors.postgres.targets import Target, global_target, parse_projects
from eventmem.runner.heap import give_back_freed_memory

if TYPE_CHECKING:
    from eventmem.runner.runner import Store

__all__ = ["RETRY_EVERY_S", "Database", "DatabaseDown", "StoreFold", "project_target", "sync"]

log = logging.getLogger("eventmem.database")

RETRY_EVERY_S = 3.0
"""After a failure, the database is tried again on a call at least this many seconds later."""
OPEN_WAIT_S = 10.0
"""How long a server's start waits for the database to take the journals in: a database in step with
them takes about 1.5 s at 100,000 memories (the journal folded again to go on from its position), up
to 4 s beside the in-process store's own start (a first call in 2.1-3.8 s). A longer take (a first
projection of a large project: 88 s at 100,000 memories; a sync of another process holding the
project) goes on in the background while the calls are answered from the journals, as when the
database cannot be reached, with a note that says so."""
APPLICATION_NAME = "eventmem serve"
"""How the server's connection is named in ``pg_stat_activity``."""

R = TypeVar("R")


class DatabaseDown(Exception):
    """A read could not use the database (the reason is in :attr:`Database.problem`)."""


def project_target(root: Path, name: str | None) -> Target:
    """The project as the database names it: ``name`` checked as ``sync --project`` checks one, else
    the project folder's name, or the name the database already holds the folder under (see
    :attr:`Target.named`)."""
    values = [f"{name}={root}"] if name is not None else []
    return parse_projects(values, default_root=lambda: root)[0]


class StoreFold:
    """An in-process store's fold of its journal, which the database's feed reads instead of folding the
    journal again (:class:`~eventmem.projectors.postgres.sync.Fold`): a server holds its memories once."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def folded(self) -> tuple[object, dict[str, tuple[int, bytes]]]:
        # (the fold and its cursors only: the indexes' work deferred past a reply stays deferred)
        self.store.catch_up(flush=False)
        with self.store.lock:
            derived = self.store.derived
            return weakref.ref(derived), {name: (c.offset, c.digest) for name, c in derived.cursors.items()}

    def batch(
        self, token: object, events: Sequence[Decoded], position: dict[str, SegmentPosition], *, everything: bool
    ) -> Batch | None:
        with self.store.lock:
            derived = self.store.derived
            if not isinstance(token, weakref.ref) or token() is not derived:
                return None  # (folded again from scratch since its position was taken)
            touched = () if everything else touched_by(derived.state, events)
            return batch_of(derived.state, touched, events, position, everything=everything, copied=True)


class Database:
    """One database, this project's journal and the global one in it, reached over one connection.
    ``folds``: the in-process stores' folds of those journals, by root, read instead of folding them
    again."""

    def __init__(
        self,
        uri: str,
        project: Target,
        global_root: Path | None,
        embedder: Embedder,
        *,
        option: str = "--store",
        folds: dict[Path, StoreFold] | None = None,
    ) -> None:
        self.uri = check_uri(uri, option)
        targets = [project]
        if global_root is not None:
            targets.append(global_target(global_root))
        self.runner = SyncRunner(self.uri, targets, embedder, folds)
        self.runner.application_name = APPLICATION_NAME
        self.embedder = embedder
        self.lock = threading.RLock()
        self.connected = False
        self.problem = ""
        """Why the database is not used now (one line, no password); empty while it is."""
        self._next_try = 0.0
        self._trying = False
        """A background try to connect is running."""
        self._closed = False
        self._taking_in = False
        """The start goes on in the background, beyond :data:`OPEN_WAIT_S` (:meth:`open`)."""

    @property
    def shown(self) -> str:
        """The address as it may be shown (the password as ``***``)."""
        return shown_uri(self.uri)

    @property
    def name(self) -> str:
        """This project's name in the database (once reached, the one it already held the folder
        under, if the name was not given)."""
        return self.runner.targets[0].name

    @property
    def names(self) -> list[str]:
        """This project's name and, with a global memory, the global one's."""
        return [t.name for t in self.runner.targets]

    @property
    def global_name(self) -> str | None:
        """This user's global memory's name in the database (:func:`global_target`), if it has one."""
        return self.runner.targets[1].name if len(self.runner.targets) > 1 else None

    def note(self) -> str:
        """The warning a read answered without the database carries."""
        if self._taking_in:
            return f"PostgreSQL is {self.problem}; answered from this project's journal meanwhile"
        return f"PostgreSQL is not used ({self.problem}); answered from this project's journal instead"

    def open(self, *, background: bool = False) -> bool:
        """Connect and project the journals; ``False`` (and the reason logged) when that fails.
        ``background`` (a server): wait at most :data:`OPEN_WAIT_S`, the rest in the background while
        reads answer from the journals; else until it is done."""
        if not background:
            with self.lock:
                return self._reach(force=True)
        with self.lock:
            started = time.monotonic()
            thread = self._connect_in_background()
        thread.join(OPEN_WAIT_S)
        with self.lock:
            if self._trying:  # (still taking the journals in: a later call finds it done)
                self._taking_in = True
                self.problem = "still taking the journals in"
                log.warning(
                    "PostgreSQL at %s is still taking the journals in after %.1f s: reads answer from the "
                    "journals until it is done (a project's first projection is done once for every server "
                    "by eventmem sync --to ADDRESS)",
                    self.shown,
                    time.monotonic() - started,
                )
            return self.connected

    def catch_up(self) -> bool:
        """Project what the journals gained into the database; whether it is in step now. While it
        cannot be reached, a new try starts in the background when the last one is long enough ago
        (a call never waits for a connection that may take seconds to time out)."""
        with self.lock:
            if not self.connected:
                self._try_again()
                return False
            try:
                for name in self.names:
                    self.runner.catch_up(name)
            except Exception as exc:
                self._lost(exc)
                return False
            return True

    def use(self, read: Callable[[Any], R]) -> R:
        """``read(connection)`` after a catch-up; :class:`DatabaseDown` when the database cannot answer."""
        with self.lock:
            if not self.catch_up():
                raise DatabaseDown(self.problem)
            try:
                return read(self.runner.conn)
            except Exception as exc:
                if not _is_database_error(exc):
                    raise
                self._lost(exc)
                raise DatabaseDown(self.problem) from None

    @contextmanager
    def projecting(self) -> Iterator[None]:
        """A write in the block, then the journal projected before its reply returns (a database that
        cannot be reached leaves the write on the journal, for a later catch-up; a write that fails
        projects nothing)."""
        yield
        self.catch_up()

    def status(self) -> dict[str, Any]:
        """What ``stats`` shows of the database: where (no password), under which name, and whether
        it is in use."""
        out: dict[str, Any] = {"store": self.shown, "project": self.name, "reachable": self.connected}
        if self.problem:
            out["problem"] = self.problem
        return out

    def close(self) -> None:
        with self.lock:
            self._closed = True
            try:
                self.runner.close()
            except Exception:  # a connection already gone
                pass
            self.connected = False

    def _reach(self, *, force: bool) -> bool:
        now = time.monotonic()
        if not force and now < self._next_try:
            return False
        self._next_try = now + RETRY_EVERY_S
        try:
            self.runner.start()
            give_back_freed_memory()  # (a first projection's batch: every record copied from the fold)
        except Exception as exc:
            self._lost(exc)
            return False
        self._reached()
        return True

    def _reached(self) -> None:
        if self._taking_in:
            log.warning("PostgreSQL at %s has taken the journals in: reads answer from it", self.shown)
        elif self.problem:
            log.warning("reached PostgreSQL at %s again; the journal is projected up to date", self.shown)
        self.connected, self.problem, self._taking_in = True, "", False

    def _try_again(self) -> None:
        """Start one background try to connect, unless one runs or the last began too recently."""
        if self._trying or self._closed or time.monotonic() < self._next_try:
            return
        self._connect_in_background()

    def _connect_in_background(self) -> threading.Thread:
        """Start a try to connect and project the journals in a thread (under :attr:`lock`)."""
        self._trying, self._next_try = True, time.monotonic() + RETRY_EVERY_S
        thread = threading.Thread(target=self._connect_anew, name="eventmem-database", daemon=True)
        thread.start()
        return thread

    def _connect_anew(self) -> None:
        """Connect and project the journals on a runner of its own, then put it in place."""
        runner = SyncRunner(self.uri, self.runner.targets, self.embedder, self.runner.folds)
        runner.application_name = APPLICATION_NAME
        try:
            runner.start()
            give_back_freed_memory()
        except Exception as exc:
            with self.lock:
                self._trying = False
                if not self._closed:
                    self._lost(exc)
            runner.close()
            return
        with self.lock:
            self._trying = False
            if self._closed:
                runner.close()
                return
            old, self.runner = self.runner, runner
            try:
                old.close()
            except Exception:  # (the connection that was lost)
                pass
            self._reached()

    def _lost(self, exc: Exception) -> None:
        """Note why the database cannot be used, once in the log; the next try waits a while."""
        problem = str(exc) if isinstance(exc, EventmemError) else describe(exc, self.uri)
        problem = " ".join(problem.replace(self.uri, self.shown).split())
        if problem != self.problem:
            log.warning("PostgreSQL is not used: %s (the journal keeps every write)", problem)
        self.problem, self._taking_in = problem or "unknown error", False
        self.connected = False
        self._next_try = time.monotonic() + RETRY_EVERY_S
        try:
            self.runner.close()
        except Exception:  # (closing a broken connection may raise again)
            pass


def sync(
    uri: str,
    targets: list[Target],
    embedder: Embedder,
    *,
    report: Callable[[dict[str, int], dict[str, int]], None],
    follow: Sequence[float] | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    prune: bool = False,
) -> None:
    """``eventmem sync``: project the journals of ``targets`` into the database at ``uri``, then
    ``report`` (events taken, memories held) by project. ``follow``: keep the database in step until
    interrupted, a lost connection tried again after each of these waits in turn (the last one
    repeats). ``progress``: told how far the start is, by project (:attr:`SyncRunner.progress`).
    ``prune``: the database's projects not among ``targets`` lose their rows (else they are left to
    whoever syncs them)."""
    runner = SyncRunner(uri, targets, embedder)
    runner.progress = progress
    runner.prune = prune
    try:
        counts = runner.start()
        report(counts, runner.memory_counts())
        if follow is not None:
            runner.follow(follow)
    finally:
        runner.close()


def _is_database_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the driver is there whenever a connection was made
        return False
    return isinstance(exc, psycopg.Error)
