"""Giving memory the process freed back to the system, and keeping the allocator from spreading it.

glibc's allocator keeps freed small blocks in its arenas: after a rebuild, a snapshot or a large
catch-up (millions of short-lived objects) a process holds hundreds of MB it no longer uses until
``malloc_trim`` returns them. A no-op where the C library has no ``malloc_trim`` (musl, macOS).

It also gives each thread that allocates an arena of its own, up to eight a core: a server's threads
(the calls' workers, the vectors, the keyword postings, the snapshot) each leave their arena holding
pages that a few live blocks keep. :func:`limit_allocator_arenas` keeps them to two (measured in
``docs/serving-memory.md``, "The allocator's arenas, the word pieces' table, the postings read back").

A server about to fold a large journal runs on the C library's allocator rather than Python's own
(:func:`serve_on_system_allocator`): Python's gives an arena of 1 MiB back only once every object in
it is freed, so the few objects a server makes while it folds (a module imported, a thread, a message
answered) each keep the arena they were made in among the fold's millions of short-lived ones;
glibc's gives back every free page between live blocks at ``malloc_trim``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eventmem.journal.project import ProjectPaths

__all__ = [
    "ARENAS",
    "SYSTEM_ALLOCATOR_FROM_BYTES",
    "folds_a_large_journal",
    "give_back_freed_memory",
    "limit_allocator_arenas",
    "serve_on_system_allocator",
]

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


SYSTEM_ALLOCATOR_FROM_BYTES = 16 << 20
"""A server that will fold a journal of this many bytes (about 20,000 memories of the generated
benchmark project) runs on the C library's allocator (:func:`serve_on_system_allocator`)."""


def folds_a_large_journal(paths: ProjectPaths, from_bytes: int = SYSTEM_ALLOCATOR_FROM_BYTES) -> bool:
    """Whether a server opening ``paths`` will fold a journal of at least ``from_bytes``: its cache has
    no snapshot (a fresh clone, a deleted cache) and its segments hold that much. A stat and a
    listing, before anything is imported for serving; ``False`` when the folders cannot be read."""
    try:
        if (paths.cache_dir / "snapshot.bin").exists():
            return False
        total = 0
        with os.scandir(paths.journal_dir) as entries:
            for entry in entries:
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        return False
    return total >= from_bytes


def serve_on_system_allocator(environ: dict[str, str] | None = None) -> None:
    """Start this very program again (the same process, arguments and standard streams) on the C
    library's allocator (``PYTHONMALLOC=malloc``); returns only when it does not. Called by a server
    that is about to fold a large journal (:func:`folds_a_large_journal`), before it reads a message.

    Measured with a real ``eventmem serve`` over stdio at 100k memories (``docs/serving-memory.md``,
    "A server that folds a large journal runs on the C library's allocator"): after a start that
    folds the journal, Python's allocator kept 40-60 MB of arenas that a few objects each held (a
    module imported meanwhile, a thread, a message answered), which a start from the snapshot does
    not have; on glibc's, whose every free page between live blocks :func:`give_back_freed_memory`
    gives back, the two starts hold within a few MB of each other. The fold takes about a fifth more
    CPU on it, so a server starting from its snapshot stays on Python's.

    Left alone: a process whose environment sets ``PYTHONMALLOC`` (the user's choice, and the
    restarted process's own), a C library without ``malloc_trim`` (musl, macOS: it would not give
    pages back), a system other than Linux (``exec`` elsewhere does not keep the process), and a
    process whose arguments are not its own command line's."""
    env = os.environ if environ is None else environ
    if "PYTHONMALLOC" in env or not sys.platform.startswith("linux") or not sys.executable:
        return
    command, arguments = list(sys.orig_argv), sys.argv[1:]
    if not arguments or command[len(command) - len(arguments) :] != arguments or not _trim():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    log.info("folding a large journal: starting again on the C library's allocator (PYTHONMALLOC=malloc)")
    try:
        os.execve(sys.executable, command, {**env, "PYTHONMALLOC": "malloc"})
    except OSError as error:  # (the program cannot be started again: this process serves as it is)
        log.warning("serving on Python's allocator: starting again failed: %s", error)
