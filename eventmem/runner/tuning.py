"""Where the runner switches from the paths meant for a few events to those meant for many."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BULK_PATHS", "Tuning"]


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
    snapshot_every: int | None = None
    """Events folded between snapshots; ``None``: the configured count, and at least a tenth of the
    journal, so that snapshot writes stay a small share of the work as memory grows."""


BULK_PATHS = Tuning(bulk_keywords_min=0, hash_ahead_bytes=0, gc_pause_bytes=0)
"""Every bulk path on any journal, however small."""
