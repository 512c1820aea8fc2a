"""Giving memory the process freed back to the system.

glibc's allocator keeps freed small blocks in its arenas: after a rebuild, a snapshot or a large
catch-up (millions of short-lived objects) a process holds hundreds of MB it no longer uses until
``malloc_trim`` returns them. A no-op where the C library has no ``malloc_trim`` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from typing import Any

__all__ = ["give_back_freed_memory"]

log = logging.getLogger("eventmem.runner")

_LIBC: Any = None
_LOADED = threading.Lock()


def _trim() -> Any:
    global _LIBC
    with _LOADED:
        if _LIBC is None:
            _LIBC = False
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                trim = libc.malloc_trim
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
                _LIBC = trim
            except (OSError, AttributeError):
                log.debug("no malloc_trim in this C library: freed memory stays with the allocator")
        return _LIBC


def give_back_freed_memory() -> None:
    """Return the allocator's free pages to the system (glibc ``malloc_trim(0)``; a few ms per 100 MB)."""
    trim = _trim()
    if trim:
        trim(0)
