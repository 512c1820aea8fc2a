"""A progress bar on stderr for long commands (``eventmem rebuild``, ``eventmem replay rebuild``)."""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """A progress bar on stderr, drawn only for work that takes a while and only on a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.shown = False
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0 or time.monotonic() - self.started < 0.5:
            return
        width = 30
        filled = int(width * done / total)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {100 * done // total:3d}%")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
