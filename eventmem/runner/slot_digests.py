"""Per slot, the digest of the texts its memory was indexed from, held in one array.

:func:`~eventmem.runner.projection.sync` compares a memory's digest (of its embedded text and its
keyword texts, :func:`~eventmem.runner.projection.text_hashes`) with its slot's: unchanged means no
re-index. Held as a list of ``bytes`` that cost 57 bytes a slot (a 16-byte ``bytes`` object in a
64-byte block, and the list's pointer) and one more small block per memory among a build's freed
ones; here 16 bytes a slot, in an array grown by doubling, stored in a snapshot as they lie.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from eventmem.embedders.embedcache import HASH_BYTES

__all__ = ["SlotDigests"]

_NONE = bytes(HASH_BYTES)
"""A slot without a digest (its memory removed, or not indexed yet) holds zeros, read as ``b""``."""


class SlotDigests:
    """A digest of :data:`~eventmem.embedders.embedcache.HASH_BYTES` bytes per slot, or ``b""``
    (none). A digest of all zero bytes reads as none: its memory is indexed again, nothing worse."""

    __slots__ = ("_rows", "_size")

    def __init__(self, stored: bytes | memoryview = b"") -> None:
        """From :meth:`stored`'s bytes (copied); ``ValueError`` if they are not whole digests."""
        if len(stored) % HASH_BYTES:
            raise ValueError(f"slot digests of {len(stored)} bytes: not a whole number of {HASH_BYTES}")
        self._rows: npt.NDArray[np.uint8] = np.frombuffer(stored, dtype=np.uint8).reshape(-1, HASH_BYTES).copy()
        self._size = len(self._rows)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, slot: int) -> bytes:
        digest = self._rows[self._slot(slot)].tobytes()
        return b"" if digest == _NONE else digest

    def __setitem__(self, slot: int, digest: bytes) -> None:
        self._rows[self._slot(slot)] = np.frombuffer(self._checked(digest), dtype=np.uint8)

    def append(self, digest: bytes) -> None:
        checked = self._checked(digest)
        if self._size == len(self._rows):
            grown = np.zeros((max(16, 2 * len(self._rows)), HASH_BYTES), dtype=np.uint8)
            grown[: self._size] = self._rows[: self._size]
            self._rows = grown
        self._rows[self._size] = np.frombuffer(checked, dtype=np.uint8)
        self._size += 1

    def stored(self) -> bytes:
        """Every slot's digest, in slot order (none: zeros), as :class:`SlotDigests` reads them back."""
        return self._rows[: self._size].tobytes()

    def _slot(self, slot: int) -> int:
        if not 0 <= slot < self._size:
            raise IndexError(f"slot {slot} of {self._size}")
        return slot

    @staticmethod
    def _checked(digest: bytes) -> bytes:
        if not digest:
            return _NONE
        if len(digest) != HASH_BYTES:
            raise ValueError(f"a slot digest of {len(digest)} bytes, not {HASH_BYTES}")
        return digest
