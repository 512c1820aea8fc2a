"""Giving memory the process freed back to the system, and keeping the allocator from spreading it.

glibc's allocator keeps freed small blocks in its arenas: after a rebuild, a snapshot or a large
catch-up (millions of short-lived objects) a process holds hundreds of MB it no longer uses until
``malloc_trim`` returns them. A no-op where the C library has no ``malloc_trim`` (musl, macOS).

It also gives each thread that allocates an arena of its own, up to eight a core: a server's threads
(the calls' workers, the vectors, the keyword postings, the snapshot) each leave their arena holding
pages that a few live blocks keep. :func:`limit_allocator_arenas` keeps them to two (measured in
``docs/serving-memory.md``, "The allocator's arenas, the word pieces' table, the postings read back").
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import Any

__all__ = ["ARENAS", "give_back_freed_memory", "limit_allocator_arenas"]

log = logging.getLogger("eventmem.runner")

ARENAS = 2
"""The allocator's arenas a process uses (glibc's ``M_ARENA_MAX``; its default is eight a core)."""
_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most arenas (``malloc.h``)."""

_TRIM: Any = None
_LOADED = threading.Lock()


def _c_function(name: str, argtypes: list[Any]) -> Any:
    """The C library's function ``name`` (taking ``argtypes``, returning an int), or ``None`` where it
    has none. Looked up among the program's own symbols, which hold the C library's: no search."""
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


def _trim() -> Any:
    global _TRIM
    with _LOADED:
        if _TRIM is None:
            _TRIM = _c_function("malloc_trim", [ctypes.c_size_t]) or False
            if not _TRIM:
                log.debug("no malloc_trim in this C library: freed memory stays with the allocator")
        return _TRIM


def give_back_freed_memory() -> None:
    """Return the allocator's free pages to the system (glibc ``malloc_trim(0)``; a few ms per 100 MB)."""
    trim = _trim()
    if trim:
        trim(0)


def limit_allocator_arenas(environ: dict[str, str] | None = None) -> bool:
    """Keep glibc's allocator to :data:`ARENAS` arenas, as ``MALLOC_ARENA_MAX`` would; called before
    the process starts its threads (an arena made before stays). Left to the environment when it
    sets ``MALLOC_ARENA_MAX`` itself; a no-op where the C library has no such setting. Whether the
    limit was set here."""
    if "MALLOC_ARENA_MAX" in (os.environ if environ is None else environ):
        return False
    mallopt = _c_function("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, ARENAS))
