"""The projector contract: what every derived view of the fold implements.

The runner folds the journal (see :mod:`eventmem.core.state`) and hands each projector the changes as a
:class:`Batch`: the visible memories whose projection changed, the memories no longer visible,
the links whose state changed, the events folded, and where the journal stands afterwards. A
projector turns batches into its own index and answers its own kind of query in memory ids.

Nothing here assumes the projector lives in this process or shares a lock with the runner: one
backed by a database persists itself (its :meth:`Projector.snapshot` returns ``None``) and reports
the journal position it last committed (:meth:`Projector.position`), from which the runner goes on.

Rules every implementation keeps (the contract suite, ``tests/contracts``, checks them):

- ``apply`` is idempotent: delivering a batch again changes nothing;
- ``load`` (from empty, one big batch) gives the same answers as ``apply`` of the same changes in
  any cut into batches; it may take a faster path, never other logic;
- ``restore(snapshot())`` then ``apply`` of the tail gives the same answers as a rebuild;
- a memory in ``removals``, or one upserted with ``superseded`` set, is in no default answer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent
from eventmem.core.records import LinkRecord, MemoryRecord

__all__ = ["AFTER_CALL_SECONDS", "Batch", "Projected", "ProjectionGone", "Projector", "SegmentPosition"]

AFTER_CALL_SECONDS = 0.3
"""The threads a large change (a merged branch) starts to finish it off the call's path (the keyword
postings, the dedup keys, the embedding of its texts) begin their work this long after, so that the
call that waited for the change is answered first: on two cores, each of them would take a share of
the interpreter (and of the cores) from it."""


class Projected(msgspec.Struct, frozen=True):
    """One visible memory as projectors see it."""

    record: MemoryRecord
    """The folded record, every field (the memory id is ``record.id``)."""
    superseded: bool
    """A live memory supersedes it."""
    expires_at: float
    """Epoch seconds when its TTL runs out (usage extension included); ``math.inf`` without TTL."""


class SegmentPosition(msgspec.Struct, frozen=True):
    """How much of one journal segment a projection covers."""

    offset: int
    """Bytes of the segment applied."""
    digest: bytes
    """Prefix digest of those bytes (BLAKE2b, 16 bytes, as the runner's cursors keep it)."""


class Batch(msgspec.Struct, frozen=True):
    """The changes of one catch-up (or one local append), in fold order."""

    upserts: tuple[Projected, ...]
    """Visible memories whose projection changed."""
    removals: tuple[str, ...]
    """Memory ids no longer visible (deleted, expired, or a save that never was)."""
    links: tuple[LinkRecord, ...] = ()
    """Links whose state changed."""
    events: tuple[AnyEvent | UnknownEvent, ...] = ()
    """The events folded in this batch."""
    position: dict[str, SegmentPosition] = {}
    """Where the journal stands after the batch (segment name -> position); empty for a local append
    whose position the next catch-up reports."""
    previous: dict[str, tuple[MemoryRecord, ...]] = {}
    """Of the memories upserted or removed, the records they may have been projected with: as they
    were before the events of this batch, and as they are (a batch's records are the fold's own,
    which later folds change in place: one applied late holds the later texts). A projector that
    keeps no copy of the texts it indexed, the keyword index, deletes its entries with the one it
    was given; may hold other memories. Empty for a batch of memories new to every projector."""


class ProjectionGone(Exception):
    """Raised by :meth:`Projector.apply` of a projection shared with other writers (a database) when
    what it held was dropped by one of them since it last looked: a batch made from where it stood
    would leave everything before it missing, so nothing is written and the caller loads it again."""


@runtime_checkable
class Projector(Protocol):
    """A derived view of the fold, kept current batch by batch."""

    name: str
    """Short, stable: names the projector in snapshots, logs and status."""
    version: int
    """Bumped when the projection changes shape: a saved one of another version is rebuilt."""

    def apply(self, batch: Batch) -> None:
        """Bring the projection in step with one batch (idempotent; :class:`ProjectionGone`: it must
        be loaded again)."""
        ...

    def load(self, batch: Batch) -> None:
        """Fill an empty projection from one batch holding every visible memory (a rebuild, a cold
        start without a snapshot); the result equals :meth:`apply` of the same batch."""
        ...

    def position(self) -> dict[str, SegmentPosition] | None:
        """The journal position the projection covers; ``None`` if it has none (empty, or the
        runner keeps positions for it)."""
        ...

    def snapshot(self) -> bytes | None:
        """The projection as bytes for :meth:`restore`; ``None`` if it persists itself."""
        ...

    def restore(self, data: bytes | None) -> bool:
        """Take back what :meth:`snapshot` gave (``None``: what it persisted); false if unusable,
        in which case the projection is empty and the runner loads it again."""
        ...

    def reset(self) -> None:
        """Drop everything: the projection is empty."""
        ...

    def close(self) -> None:
        """Release what the projection holds (threads, connections, files)."""
        ...
