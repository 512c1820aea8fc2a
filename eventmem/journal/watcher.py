"""The journal watcher: signals that segments changed; readers re-scan from their own offsets.

``watchfiles`` merges changes over a debounce window and yields *sets*, so the watcher never counts
or parses anything: on any change under ``journal/`` or ``archive/`` it calls ``on_change``, which
catches the store up. Debounce is short (50 ms window, 10 ms quiet step) because the defaults
(1.6 s / 50 ms) make pushed updates feel slow; ``WATCHFILES_FORCE_POLLING`` is honoured for
file systems without inotify.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from watchfiles import Change, awatch

__all__ = ["watch_journal"]

ARMED_WITHIN_MS = 1000
"""The watch yields (changes or none) at least this often; its first yield means it is in place, and
what was written between the first catch-up and then is caught up once more."""

log = logging.getLogger("eventmem.journal.watcher")

DEBOUNCE_MS = 50
STEP_MS = 10
POLL_DELAY_MS = 50


def _is_segment(change: Change, path: str) -> bool:
    parts = Path(path).parts
    return len(parts) >= 2 and parts[-2] in ("journal", "archive") and path.endswith(".jsonl")


async def watch_journal(
    base: Path,
    on_change: Callable[[set[str] | None], Awaitable[None]],
    stop: anyio.Event,
    *,
    wait_for_creation: float = 1.0,
) -> None:
    """Call ``on_change`` with the changed segments' paths after segments under ``base``
    (``.eventmem/``) change, until ``stop`` (``None``: anything may have changed).

    ``base`` may not exist yet (memory is created on the first write): it is looked for every
    ``wait_for_creation`` seconds, a ``stat`` each time, until it appears.
    """
    while not stop.is_set():
        if not base.is_dir():
            with anyio.move_on_after(wait_for_creation):
                await stop.wait()
            continue
        await on_change(None)  # whatever was written before the watch began
        armed = False
        try:
            async for changes in awatch(
                base,
                watch_filter=_is_segment,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                stop_event=stop,
                poll_delay_ms=POLL_DELAY_MS,
                rust_timeout=ARMED_WITHIN_MS,
                yield_on_timeout=True,
            ):
                if not armed:  # the watch is in place: anything written while it was being set up
                    armed = True
                    await on_change(None)
                elif changes:
                    await on_change({path for _change, path in changes})
        except (FileNotFoundError, RuntimeError) as exc:  # the folder was removed under us
            log.info("watch on %s ended (%s); watching again", base, exc)
            with anyio.move_on_after(wait_for_creation):
                await stop.wait()
