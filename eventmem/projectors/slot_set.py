"""A set of slots held as one flag a slot: the keyword index's rows present.

As a ``set[int]`` the keyword index's present rows cost about 74 bytes a memory (an ``int`` object
above 256 and the set's slot); here one byte a slot, in an array grown by doubling, read without
numpy's call for one slot (an item of a memoryview). Iterated in increasing order.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

__all__ = ["SlotSet"]


class SlotSet:
    """Slots (non-negative ints) held, as a ``set[int]`` holds them, in increasing order."""

    __slots__ = ("_count", "_flags", "_held")

    def __init__(self, slots: Iterable[int] = ()) -> None:
        self._flags: npt.NDArray[np.bool_] = np.zeros(0, np.bool_)
        self._held: Sequence[bool] = cast("Sequence[bool]", self._flags.data)
        self._count = 0
        self.update(slots)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __contains__(self, slot: object) -> bool:
        try:  # (any integer, numpy's too, as a set of ints finds it)
            at = operator.index(slot)  # type: ignore[arg-type]
        except TypeError:
            return False
        return 0 <= at < len(self._held) and self._held[at]

    def __iter__(self) -> Iterator[int]:
        return iter(np.flatnonzero(self._flags).tolist())

    def sorted_array(self) -> npt.NDArray[np.int64]:
        """The slots held, in increasing order."""
        return np.flatnonzero(self._flags).astype(np.int64)

    def max(self) -> int:
        """The largest slot held (``ValueError`` when none is)."""
        held = np.flatnonzero(self._flags)
        if not len(held):
            raise ValueError("max() of an empty set of slots")
        return int(held[-1])

    def update(self, slots: Iterable[int] | npt.NDArray[np.int64]) -> None:
        wanted = slots.astype(np.int64) if isinstance(slots, np.ndarray) else np.fromiter(slots, dtype=np.int64)
        if not len(wanted):
            return
        if int(wanted.min()) < 0:
            raise ValueError("a slot is not negative")
        top = int(wanted.max())
        if top >= len(self._flags):
            grown = np.zeros(max(top + 1, 2 * len(self._flags), 1024), np.bool_)
            grown[: len(self._flags)] = self._flags
            self._flags = grown
            self._held = cast("Sequence[bool]", grown.data)
        self._flags[wanted] = True
        self._count = int(np.count_nonzero(self._flags))  # (a few microseconds a 100,000 slots)

    def difference_update(self, slots: Iterable[int]) -> None:
        gone = np.fromiter(slots, dtype=np.int64)
        self._flags[gone[(gone >= 0) & (gone < len(self._flags))]] = False
        self._count = int(np.count_nonzero(self._flags))
