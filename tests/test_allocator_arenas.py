"""An eventmem process keeps glibc's allocator to two arenas (``eventmem.runner.heap``): a server's
threads each held pages of an arena of their own after a build (measured in ``docs/serving-memory.md``,
"The allocator's arenas, the word pieces' table, the postings read back"). Counted by glibc's own
report (``malloc_info``) in a fresh process whose threads allocate at once.

``eventmem serve`` about to fold a large journal (no snapshot in its cache) runs on that allocator
rather than Python's own (``PYTHONMALLOC=malloc``): the process its client started starts itself
again with it, keeping its pid and its standard streams, unless the environment chose an allocator
("A server that folds a large journal runs on the C library's allocator" in the same page)."""

from __future__ import annotations

import os
import platform
import random
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import write_events
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.project import ProjectPaths
from eventmem.runner.heap import SYSTEM_ALLOCATOR_FROM_BYTES

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


WORDS = "invoice webhook queue cache deploy schema token cursor backup migration retries expires rotates".split()


def a_large_journal(project: Path) -> None:
    """A journal past the size from which a server that folds it runs on the C library's allocator
    (:data:`~eventmem.runner.heap.SYSTEM_ALLOCATOR_FROM_BYTES`): a few hundred long memories."""
    rng = random.Random(5)
    count = 320
    size = SYSTEM_ALLOCATOR_FROM_BYTES // count + 1
    events = []
    for n in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(size // 6))[:size]
        events.append(MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), title=f"note {n}", content=text))
    write_events(project, events)


def allocator_of_the_served_process() -> str | None:
    """``PYTHONMALLOC`` in the environment of the ``eventmem serve`` this test process started (its
    direct child: a process started again in place keeps its pid), ``None`` when unset."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"serve" in command:
            found = [item.split(b"=", 1)[1].decode() for item in environ if item.startswith(b"PYTHONMALLOC=")]
            return found[0] if found else None
    raise AssertionError("no eventmem serve started by this test")


def without_allocator(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "PYTHONMALLOC"}


@pytest.mark.anyio
async def test_a_server_folding_a_large_journal_runs_on_the_c_librarys_allocator_in_the_process_its_client_started(
    project: Path, tmp_path: Path
) -> None:
    """A fresh clone (no snapshot in the cache) of a large journal; then a start from the snapshot the
    first server wrote, which stays on Python's allocator (the fold is what the other is for)."""
    program = Path(sys.executable).with_name("eventmem")
    if not program.is_file():
        pytest.skip("the eventmem program is not installed beside this interpreter")
    a_large_journal(project)
    env = without_allocator(server_env())
    errlog = tmp_path / "serve.log"
    params = StdioServerParameters(command=str(program), args=["--root", str(project), "serve"], cwd=tmp_path, env=env)
    with errlog.open("w", encoding="utf-8") as stderr:
        async with stdio_client(params, errlog=stderr) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            saved = await call(session, "save_context", context_text="The release checklist lives in docs/release.md.")
            answer = await call(session, "retrieve_context", query="release checklist")
            assert allocator_of_the_served_process() == "malloc"
            await vectors_ready(session)
    assert answer["results"][0]["id"] == saved["id"]
    assert_clean_stderr(errlog)
    for _ in range(600):
        if (ProjectPaths(project).cache_dir / "snapshot.bin").is_file():
            break
        await anyio.sleep(0.05)
    async with serve(project, env, tmp_path / "again.log") as session:
        await session.initialize()
        again = await call(session, "retrieve_context", query="release checklist")
        assert allocator_of_the_served_process() is None
    assert again["results"][0]["id"] == saved["id"]


@pytest.mark.anyio
async def test_an_allocator_the_environment_chooses_is_the_one_eventmem_serve_runs_on(
    project: Path, tmp_path: Path
) -> None:
    a_large_journal(project)
    async with serve(project, server_env(PYTHONMALLOC="pymalloc"), tmp_path / "serve.log") as session:
        await session.initialize()
        await call(session, "save_context", context_text="Deploys go out on Tuesdays.")
        assert allocator_of_the_served_process() == "pymalloc"


def test_a_caller_serving_from_its_own_process_is_not_started_again(project: Path) -> None:
    """``main([...])`` called by another program (its command line is not ``eventmem serve``'s), on a
    large journal with no snapshot: were it started again, the program would run a second time and
    print the allocator it then has."""
    a_large_journal(project)
    program = (
        "import os, sys\n"
        "from eventmem.main import main\n"
        "main(['--root', sys.argv[1], 'serve'])\n"
        "print('allocator', os.environ.get('PYTHONMALLOC'))\n"
    )
    env = without_allocator(dict(os.environ))
    done = subprocess.run(
        [sys.executable, "-c", program, str(project)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["allocator None"]
