"""Where the runner switches from the paths meant for a few events to those meant for many."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from eventmem.projectors.ann import DEFAULT_ANN_FROM
from eventmem.projectors.postings import DEFAULT_POSTINGS_FROM

__all__ = [
    "ANN_FROM_VARIABLE",
    "BULK_PATHS",
    "POSTINGS_FROM_VARIABLE",
    "Tuning",
    "ann_from_environment",
    "postings_from_environment",
]

log = logging.getLogger("eventmem.runner")

ANN_FROM_VARIABLE = "EVENTMEM_ANN_FROM"
POSTINGS_FROM_VARIABLE = "EVENTMEM_POSTINGS_FROM"
_REPORTED: set[tuple[str, str]] = set()


def _count_from_environment(variable: str, default: int) -> int:
    """``variable`` (a count of memories, at least 1) if set and valid, else ``default``; an invalid
    value is reported on the log and ignored."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    if raw.isascii() and raw.isdigit() and len(raw) <= 12 and int(raw) >= 1:
        return int(raw)
    if (variable, raw) not in _REPORTED:  # (each store of the process reads it: said once)
        _REPORTED.add((variable, raw))
        log.warning("ignoring %s=%.40r: expected a whole number of memories, at least 1", variable, raw)
    return default


def ann_from_environment() -> int:
    """``EVENTMEM_ANN_FROM``, else :data:`~eventmem.projectors.ann.DEFAULT_ANN_FROM`."""
    return _count_from_environment(ANN_FROM_VARIABLE, DEFAULT_ANN_FROM)


def postings_from_environment() -> int:
    """``EVENTMEM_POSTINGS_FROM``, else :data:`~eventmem.projectors.postings.DEFAULT_POSTINGS_FROM`."""
    return _count_from_environment(POSTINGS_FROM_VARIABLE, DEFAULT_POSTINGS_FROM)


@dataclass(frozen=True, slots=True)
class Tuning:
    """The sizes from which a catch-up takes its bulk paths. Each path gives the same answers as the
    one for small journals (the tests and ``tools/`` check it with :data:`BULK_PATHS`)."""

    bulk_keywords_min: int = 2000
    """From this many rows on, a load fills the keyword index from a thread (SQLite works without the GIL)."""
    hash_ahead_bytes: int = 1 << 20
    """A catch-up that reads more than this digests the segments in a second thread."""
    gc_pause_bytes: int = 1 << 20
    """A catch-up that reads more than this runs with the cyclic GC paused."""
    ann_from: int = field(default_factory=ann_from_environment)
    """From this many vectors on, a vector search takes its candidates from an approximate index and
    re-ranks them exactly (see :mod:`eventmem.projectors.ann`); ``EVENTMEM_ANN_FROM`` sets it."""
    postings_from: int = field(default_factory=postings_from_environment)
    """From this many memories on, keyword searches are ranked from in-memory postings, with the
    same scores and order as FTS5's (see :mod:`eventmem.projectors.postings`); ``EVENTMEM_POSTINGS_FROM``."""
    start_again_from: int = 20_000
    """A server that folded a journal of this many memories itself (a fresh clone, a deleted cache, a
    rebuild) starts again from the snapshot it wrote once its threads are done, so that it holds about
    what a start from that snapshot holds (``Store._start_again``, docs/serving-memory.md)."""
    snapshot_every: int | None = None
    """Events folded between snapshots; ``None``: the configured count, and at least a tenth of the
    journal, so that snapshot writes stay a small share of the work as memory grows."""


BULK_PATHS = Tuning(bulk_keywords_min=0, hash_ahead_bytes=0, gc_pause_bytes=0, postings_from=1)
"""Every bulk path on any journal, however small."""
