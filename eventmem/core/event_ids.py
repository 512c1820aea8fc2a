"""The ids of the events a fold has seen, packed: 26 bytes an id instead of a string and a set's slot.

A fold keeps the id of every event it folded: an id seen again is a no-op, or another version of
an event to settle (:class:`~eventmem.core.state.State`). Held as a ``set[str]`` that cost about 117
bytes an event (the 26-character id, a 75-byte string in an 80-byte block, and the set's slot):
11.7 MB at 100,000 events, the largest Python structure a serving process kept, and kept as many
small blocks scattered among a build's freed ones. Here the ids of the journal's own form (26 ASCII
characters: a ULID) are kept sorted in one buffer of 26-byte records and found by bisection; the ids
added since in a set beside it, merged into the buffer once it holds a sixteenth as many (and at
least :data:`MERGE_FROM`); ids of any other form (a forged or foreign line's) in a set of their own,
which no merge reads again (so that a journal of many such ids does not make every fold merge).

A fold's batch is checked against the buffer at once (:meth:`EventIds.isdisjoint`, one vectorized
search), so folding costs what it did; a single id (a ``prev`` the batch does not hold) costs one
bisection, a few microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # (numpy is imported where used: a server answers ``initialize`` before loading it)
    import numpy as np
    import numpy.typing as npt

__all__ = ["MERGE_FROM", "WIDTH", "EventIds"]

WIDTH = 26
"""The length of an id of the packed form, in ASCII characters (a ULID's)."""
MERGE_FROM = 4096
"""The fewest loose ids merged into the buffer at once."""
_KIND = f"S{WIDTH}"


def _packable(event_id: str) -> bool:
    """Whether ``event_id`` is of the packed form: exactly :data:`WIDTH` ASCII characters and no NUL
    (a fixed-width byte string drops trailing NULs, so such an id would not come back the same)."""
    return len(event_id) == WIDTH and event_id.isascii() and "\x00" not in event_id


class EventIds(msgspec.Struct):
    """A set of event ids (see the module's text). Equal to another holding the same ids, whatever
    part of each holds them."""

    packed: bytes = b""
    """The ids of the packed form, sorted, :data:`WIDTH` bytes each, none twice."""
    loose: set[str] = msgspec.field(default_factory=set)
    """The ids added since the last merge (of any form, until it sorts them)."""
    other: set[str] = msgspec.field(default_factory=set)
    """The ids not of the packed form that a merge met."""

    def __len__(self) -> int:
        return len(self.packed) // WIDTH + len(self.loose) + len(self.other)

    def __bool__(self) -> bool:
        return bool(self.packed) or bool(self.loose) or bool(self.other)

    def __contains__(self, event_id: object) -> bool:
        if event_id in self.loose or event_id in self.other:
            return True
        if not self.packed or not isinstance(event_id, str) or not _packable(event_id):
            return False
        import numpy as np

        ids = self._ids()
        key = event_id.encode("ascii")
        at = int(np.searchsorted(ids, key))
        return at < len(ids) and bytes(ids[at]) == key

    def __iter__(self) -> Iterator[str]:
        packed = self.packed
        for start in range(0, len(packed), WIDTH):
            yield packed[start : start + WIDTH].decode("ascii")
        yield from self.loose
        yield from self.other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventIds):
            return NotImplemented
        return len(self) == len(other) and set(self) == set(other)

    def __repr__(self) -> str:
        return f"EventIds({len(self)} ids)"

    def check(self) -> None:
        """``ValueError`` unless the buffer holds whole ids of the packed form, sorted, none twice (a
        snapshot's, read back: a damaged one is not used)."""
        if len(self.packed) % WIDTH:
            raise ValueError(f"event ids of {len(self.packed)} bytes: not a whole number of {WIDTH}")
        if not self.packed:
            return
        import numpy as np

        characters = np.frombuffer(self.packed, dtype=np.uint8)
        if int(characters.min()) == 0 or int(characters.max()) > 127:
            raise ValueError("packed event ids that are not ASCII, or hold a NUL")
        ids = self._ids()
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            raise ValueError("packed event ids out of order, or one twice")

    def isdisjoint(self, event_ids: Iterable[str]) -> bool:
        """Whether none of ``event_ids`` is held."""
        asked = list(event_ids)
        if not self.loose.isdisjoint(asked) or not self.other.isdisjoint(asked):
            return False
        if not self.packed:
            return True
        keys = [event_id for event_id in asked if _packable(event_id)]
        if not keys:
            return True
        import numpy as np

        return not bool(np.any(self._held(np.array(keys, dtype=_KIND))))

    def add(self, event_id: str) -> None:
        """Hold ``event_id`` (held already: nothing changes)."""
        if event_id not in self:
            self.add_new((event_id,))

    def add_new(self, event_ids: Iterable[str]) -> None:
        """Hold ``event_ids``, none of which is held yet (a fold's batch, checked by the fold: an id
        held already would count twice in :func:`len` until the next merge)."""
        loose = self.loose
        loose.update(event_ids)
        if len(loose) >= max(MERGE_FROM, len(self.packed) // WIDTH // 16):
            self.merge()

    def merge(self) -> None:
        """Move the loose ids into the buffer (those of the packed form) or beside it (the others)."""
        packable = [event_id for event_id in self.loose if _packable(event_id)]
        if len(packable) < len(self.loose):
            self.other.update(event_id for event_id in self.loose if not _packable(event_id))
        self.loose = set()
        if not packable:
            return
        import numpy as np

        new = np.sort(np.array(packable, dtype=_KIND))
        if len(new) > 1:  # (not np.unique: it imports numpy.ma, a module loaded in the middle of a build)
            new = new[np.concatenate(([True], new[1:] != new[:-1]))]
        ids = self._ids()
        at = np.searchsorted(ids, new)
        fresh = ~self._held(new, at)
        self.packed = np.insert(ids, at[fresh], new[fresh]).tobytes()

    def _ids(self) -> npt.NDArray[np.bytes_]:
        import numpy as np

        return np.frombuffer(self.packed, dtype=_KIND)

    def _held(self, keys: npt.NDArray[np.bytes_], at: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.bool_]:
        """Which of ``keys`` (packed) the buffer holds; ``at``: where they would go, if found already."""
        import numpy as np

        ids = self._ids()
        if not len(ids):
            return np.zeros(len(keys), dtype=bool)
        if at is None:
            at = np.searchsorted(ids, keys)
        return np.asarray(ids[np.minimum(at, len(ids) - 1)] == keys)
