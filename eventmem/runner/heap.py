"""Giving memory the process freed back to the system, and keeping the allocator from spreading it.

glibc's allocator keeps freed small blocks in its arenas: after a rebuild, a snapshot or a large
catch-up (millions of short-lived objects) a process holds hundreds of MB it no longer uses until
``malloc_trim`` returns them. A no-op where the C library has no ``malloc_trim`` (musl, macOS).

It also gives each thread that allocates an arena of its own, up to eight a core: a server's threads
(the calls' workers, the vectors, the keyword postings, the snapshot) each leave their arena holding
pages that a few live blocks keep. :func:`limit_allocator_arenas` keeps them to two (measured in
``docs/serving-memory.md``, "The allocator's arenas, the word pieces' table, the postings read back").

A serving process runs on the C library's allocator rather than Python's own (:func:`serve_on_system_allocator`):
Python's gives an arena of 1 MiB back only once every object in it is freed, so the few objects a
server makes while it folds a large journal (a module imported, a thread, a message answered) each
keep the arena they were made in among the fold's millions of short-lived ones; glibc's gives back
every free page between live blocks at ``malloc_trim``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import Any

__all__ = ["ARENAS", "give_back_freed_memory", "limit_allocator_arenas", "serve_on_system_allocator"]

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


def serve_on_system_allocator(arguments: list[str], environ: dict[str, str] | None = None) -> None:
    """Start this very program again (same process, same arguments, same standard streams) on the C
    library's allocator (``PYTHONMALLOC=malloc``) when it is an ``eventmem`` process started with
    ``arguments`` and running on Python's own; returns only when it does not.

    Measured with a real ``eventmem serve`` over stdio at 100k memories (``docs/serving-memory.md``,
    "A serving process on the C library's allocator"): after a start that folds the journal, Python's
    allocator kept 40-60 MB of arenas that a few objects each held, which a start from the snapshot
    does not have; on glibc's, given back by :func:`give_back_freed_memory`, the two starts hold
    within a few MB of each other, at the same speed. Left alone: a process whose environment sets
    ``PYTHONMALLOC`` (the user's choice, and the restarted process's own), a C library without
    ``malloc_trim`` (musl, macOS: it would not give pages back), a system other than Linux (``exec``
    elsewhere does not keep the process), and ``arguments`` that are not this process's own command
    line (a caller's ``main([...])``)."""
    env = os.environ if environ is None else environ
    if "PYTHONMALLOC" in env or not sys.platform.startswith("linux") or not sys.executable:
        return
    command = list(sys.orig_argv)
    if not arguments or command[len(command) - len(arguments) :] != arguments or arguments != sys.argv[1:]:
        return
    if not _trim():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, command, {**env, "PYTHONMALLOC": "malloc"})
    except OSError as error:  # (the program cannot be started again: this process serves as it is)
        log.debug("serving on Python's allocator: %s", error)
