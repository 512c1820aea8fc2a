"""A progress bar on stderr for long commands (``eventmem rebuild``, ``eventmem replay rebuild``, ``eventmem sync``)."""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["ProgressBar"]

SHOWN_AFTER_S = 0.5
"""Work done sooner draws nothing."""


class ProgressBar:
    """A progress bar on stderr, drawn only for work that takes a while and only on a terminal. What
    it was told before :data:`SHOWN_AFTER_S` is drawn then, if nothing newer came (a long first step,
    such as reading a journal, shows while it lasts)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.shown = False
        self.enabled = sys.stderr.isatty()
        self._drawn = 0
        self._last: tuple[int, int, str] | None = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def __call__(self, done: int, total: int, stage: str = "") -> None:
        """Draw ``done`` of ``total`` (none: ``total`` 0), and what the work does now (``stage``)."""
        if not self.enabled or (total <= 0 and not stage):
            return
        with self._lock:
            self._last = (done, total, stage)
            early = time.monotonic() - self.started < SHOWN_AFTER_S
            if early and self._timer is None and not self._closed:
                self._timer = threading.Timer(self.started + SHOWN_AFTER_S - time.monotonic(), self._draw_last)
                self._timer.daemon = True
                self._timer.start()
            if not early:
                self._draw(done, total, stage)

    def _draw_last(self) -> None:
        with self._lock:
            if self._last is not None and not self._closed:
                self._draw(*self._last)

    def _draw(self, done: int, total: int, stage: str) -> None:
        width = 30
        line = self.label
        if total > 0:
            filled = int(width * min(done, total) / total)
            line += f" [{'#' * filled}{'.' * (width - filled)}] {100 * min(done, total) // total:3d}%"
        if stage:
            line += f" {stage}"
        sys.stderr.write("\r" + line.ljust(self._drawn))  # (a shorter line clears the longer one's end)
        sys.stderr.flush()
        self._drawn = len(line)
        self.shown = True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self.shown:
                sys.stderr.write("\n")
                sys.stderr.flush()
                self.shown = False
