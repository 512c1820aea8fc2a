"""Work a reply need not wait for, run just after it.

In a server, the texts of this process's own changes reach the keyword and vector indexes, and
access counts reach the usage stream, a moment after the call that made them (:data:`AFTER_REPLY_SECONDS`),
from a thread, or at the start of the next call, whichever comes first: a save is answered once its
event is durable and folded. Outside a server (one command, a library user) work runs at once.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from collections.abc import Callable

__all__ = ["AFTER_REPLY_SECONDS", "Deferral"]

log = logging.getLogger("eventmem.runner")

AFTER_REPLY_SECONDS = 0.001
"""How long after the call the after-reply thread runs deferred work."""


class Deferral:
    """Deferred work, in order, run under the runner's ``lock``."""

    def __init__(self, lock: threading.RLock, *, delay: float = AFTER_REPLY_SECONDS) -> None:
        self.lock = lock
        self.enabled = False
        """Defer (a server); else :meth:`defer` runs the work at once."""
        self.delay = delay
        """Seconds between a deferral and the thread's run (read at each run)."""
        self.failed = False
        """Some work failed since :meth:`take_failure`: the indexes may lack a text."""
        self._work: list[Callable[[], None]] = []
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition(lock)

    def defer(self, work: Callable[[], None]) -> None:
        """Run ``work`` under the lock just after the reply (or now, when not enabled)."""
        with self.lock:
            if not self.enabled:
                work()
                return
            self._work.append(work)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run_later, name="eventmem-after-reply", daemon=True)
                self._thread.start()
            self._due.set()

    def run(self) -> None:
        """Run the deferred work now (the caller holds the lock). Work that fails is logged and
        marks :attr:`failed`; the rest still runs, in order."""
        while self._work:
            work, self._work = self._work, []
            for index, item in enumerate(work):
                try:
                    item()
                except Exception as exc:
                    if _disk_full(exc):  # (expected of a disk: said in a line, no traceback)
                        log.error("deferred work failed, the disk is full (%s): the indexes will be rebuilt", exc)
                    else:
                        log.exception("deferred work failed: the indexes will be rebuilt from the journal")
                    self.failed = True
                    self._work = work[index + 1 :] + self._work
                    break
        with self.lock:
            self._idle.notify_all()

    def take_failure(self) -> bool:
        """Whether some work failed since the last call (and forget it)."""
        failed, self.failed = self.failed, False
        return failed

    def drop(self) -> None:
        """Forget the work not run yet (a rebuild makes it again from the journal)."""
        with self.lock:
            self._work = []
            self._idle.notify_all()

    def pending(self) -> int:
        """Work items deferred and not run yet."""
        with self.lock:
            return len(self._work)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no work is deferred; false if some still is after ``timeout`` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._work, timeout)

    def stop(self) -> None:
        """Run what is deferred and let the thread go (at close)."""
        self._stop.set()
        self._due.set()
        with self.lock:
            self.run()

    def _run_later(self) -> None:
        while True:
            self._due.wait()
            if self._stop.is_set():
                return
            time.sleep(self.delay)
            self._due.clear()
            with self.lock:
                self.run()


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says a disk is full: a write of the cache's (a server's keyword database's file,
    see :mod:`eventmem.projectors.keywords_stored`; the embedding cache) that found no room."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
