"""The projector contract: what every read model derived from the journal takes and keeps.

A runner folds the journal (:class:`eventmem.state.State`) and hands each projector a :class:`Batch`
of what changed: the visible memories whose projection changed, the ids no longer visible, the links
whose state changed and the events folded, with the position reached in each segment. A projector
applied the same batch twice holds what it held after the first time; one loaded in bulk from empty
holds what incremental applies of the same events would.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from eventmem.codec import UnknownEvent
from eventmem.events import AnyEvent
from eventmem.state import LinkRecord, MemoryRecord

__all__ = ["Batch", "Projected", "Projector", "SegmentPosition"]


class Projected(msgspec.Struct, frozen=True):
    """One visible memory as projectors see it."""

    record: MemoryRecord
    """The folded record, every field (its ``id`` is the memory id)."""
    superseded: bool
    """A live memory supersedes it."""
    expires_at: float
    """Epoch seconds; ``math.inf`` without a TTL."""


class SegmentPosition(msgspec.Struct, frozen=True):
    offset: int
    """Bytes of the segment applied."""
    digest: bytes
    """Prefix digest of those bytes."""


class Batch(msgspec.Struct, frozen=True):
    upserts: tuple[Projected, ...]
    """Visible memories whose projection changed, in fold order."""
    removals: tuple[str, ...]
    """Memory ids no longer visible."""
    links: tuple[LinkRecord, ...] = ()
    """Links whose state changed."""
    events: tuple[AnyEvent | UnknownEvent, ...] = ()
    """The events folded in this batch."""
    position: dict[str, SegmentPosition] = {}
    """Segment name -> position after the batch."""


class Projector(Protocol):
    name: str
    version: int

    def apply(self, batch: Batch) -> None:
        """Take a batch incrementally; re-delivery changes nothing."""

    def load(self, batch: Batch) -> None:
        """Take everything in bulk, from empty; holds what :meth:`apply` of the same events would."""

    def position(self) -> dict[str, SegmentPosition] | None:
        """The position of the last batch taken (``None``: nothing taken)."""

    def snapshot(self) -> bytes | None:
        """The projection as bytes; a projector that persists itself returns ``None``."""

    def restore(self, data: bytes | None) -> bool:
        """Take a snapshot back; ``False`` when it cannot be used (the runner loads from scratch)."""

    def reset(self) -> None:
        """Forget everything taken."""

    def close(self) -> None:
        """Release what the projector holds."""
