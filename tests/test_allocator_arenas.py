"""An eventmem process keeps glibc's allocator to two arenas (``eventmem.runner.heap``): a server's
threads each held pages of an arena of their own after a build (measured in ``docs/serving-memory.md``,
"The allocator's arenas, the word pieces' table, the postings read back"). Counted by glibc's own
report (``malloc_info``) in a fresh process whose threads allocate at once."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's allocator and its report"
)

PROGRAM = """
import ctypes, sys, threading
if sys.argv[1] == "eventmem":
    from eventmem.main import main
    main(["--version"])
libc = ctypes.CDLL(None)
ready = threading.Barrier(8)
kept = []
def allocate():
    ready.wait()  # (all at once: each new thread takes an arena of its own while the limit allows)
    kept.append([bytes(2000) for _ in range(200)])
    ready.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.fflush(None)
libc.malloc_info(0, ctypes.c_void_p.in_dll(libc, "stdout"))
libc.fflush(None)
"""


def arenas(how: str, environ: dict[str, str] | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (environ or {})
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, how], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    return done.stdout.count("<heap nr=")


def test_an_eventmem_process_keeps_the_allocator_to_two_arenas_however_many_threads_allocate() -> None:
    assert arenas("plain") > 2  # (the allocator's own default: eight a core, one a thread here)
    assert arenas("eventmem") == 2


def test_an_arena_limit_set_in_the_environment_is_left_as_it_is() -> None:
    assert arenas("eventmem", {"MALLOC_ARENA_MAX": "4"}) == 4
