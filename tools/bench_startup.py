#!/usr/bin/env python
"""eventmem start-up benchmark: what a user waits for before the first answer.

Prints one JSON object on stdout (progress on stderr). Every figure is the median of several runs,
measured next to a baseline in the same run and given as a ratio to it (the machine's load average
is recorded before and after):

1. ``serve``: from spawning the process to the ``initialize`` answer, and to the answer of the first
   tool call (``retrieve_context``, right after ``initialized``), for ``eventmem serve`` on a project
   of ``--size`` memories and for the no-op MCP server on the same SDK (``tools/noop_server.py``).
   Raw JSON-RPC lines over the pipes: no client library is timed.
2. ``cli``: ``eventmem --version`` and ``eventmem stats`` on that project (its cache warm), against
   ``python -c pass`` (the interpreter's own start-up).
3. ``imports``: with ``python -X importtime``, how many modules each of those imports (for serve:
   before its ``initialize`` answer) and which heavy ones among them (numpy, faiss, the HTTP stack,
   PostgreSQL, ONNX), with their cumulative import time.

Usage::

    python tools/bench_startup.py                 # 1,000 memories, 7 runs of each (about a minute idle)
    python tools/bench_startup.py --quick         # 100 memories, 2 runs of each
    python tools/bench_startup.py --out startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_json import emit

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parent.parent
NOOP_SERVER = SCRIPT.parent / "noop_server.py"
STARTED = time.perf_counter()
HEAVY = ("numpy", "faiss", "starlette", "uvicorn", "httpx", "httpx2", "psycopg", "onnxruntime", "tokenizers")
"""Top-level modules whose import is worth naming (what eventmem should load only when needed)."""
WAIT = 120.0

sys.path.insert(0, str(REPO))


def log(message: str) -> None:
    sys.stderr.write(f"[bench_startup {time.perf_counter() - STARTED:6.1f}s] {message}\n")
    sys.stderr.flush()


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def build_project(root: Path, size: int) -> None:
    """A git repository whose journal holds ``size`` varied memories, its cache warmed by one ``stats``."""
    from eventmem.core.events import MemorySaved
    from eventmem.core.ids import new_id, now_iso
    from eventmem.journal.journal import Journal
    from eventmem.journal.project import ProjectPaths

    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    topics = ("deploy", "database", "cache", "auth", "build", "tests", "logging", "queue", "search", "billing")
    events = [
        MemorySaved(
            id=new_id(),
            ts=now_iso(),
            memory=new_id(),
            content=f"Note {i} about the {topics[i % len(topics)]} service: step {i * 7 % 101} of the runbook "
            f"changed after incident {i % 37}.",
            tags=[topics[i % len(topics)]],
        )
        for i in range(size)
    ]
    Journal(ProjectPaths(root)).append(events)
    warm = subprocess.run(command("stats"), cwd=root, env=environment(root), capture_output=True, text=True)
    if warm.returncode != 0:
        raise SystemExit(f"bench_startup: eventmem stats failed on the seeded project: {warm.stderr}")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "eventmem", *args]


def environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
    env["EVENTMEM_GLOBAL_DIR"] = str(root.parent / "global-memory")
    env["PYTHONPATH"] = str(REPO)
    return env


def message(payload: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **payload}) + "\n").encode()


INITIALIZE = message(
    {
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench-startup", "version": "1"},
        },
    }
)
INITIALIZED = message({"method": "notifications/initialized"})
FIRST_CALL = message(
    {"id": 2, "method": "tools/call", "params": {"name": "retrieve_context", "arguments": {"query": "deploy runbook"}}}
)


def answer(proc: subprocess.Popen[bytes], wanted: int) -> dict[str, Any]:
    """The next JSON-RPC answer with id ``wanted`` on the server's stdout (notifications skipped)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench_startup: the server closed its output before answering request {wanted}")
        data: dict[str, Any] = json.loads(line)
        if data.get("id") == wanted:
            if "error" in data:
                raise SystemExit(f"bench_startup: request {wanted} failed: {data['error']}")
            return data


def serve_once(
    args: list[str], cwd: Path, env: dict[str, str], stderr: Any = subprocess.DEVNULL
) -> tuple[float, float]:
    """Seconds from spawning ``args`` to the ``initialize`` answer, and to the first tool call's answer."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert proc.stdin is not None
    try:
        proc.stdin.write(INITIALIZE)
        proc.stdin.flush()
        answer(proc, 1)
        initialized = time.perf_counter() - started
        proc.stdin.write(INITIALIZED + FIRST_CALL)
        proc.stdin.flush()
        result = answer(proc, 2)["result"]
        first_tool = time.perf_counter() - started
        if result.get("isError"):
            raise SystemExit(f"bench_startup: the first tool call failed: {result}")
        proc.stdin.close()
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return initialized, first_tool


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, check=False, timeout=WAIT)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
    return elapsed


def median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def imported(report: str) -> dict[str, Any]:
    """Modules imported (from ``-X importtime`` lines) and the heavy ones with their cumulative seconds."""
    names: list[str] = []
    heavy: dict[str, float] = {}
    for line in report.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.split("|")
        module = name.strip()
        names.append(module)
        if module in HEAVY:
            heavy[module] = round(int(cumulative) / 1e6, 4)
    return {"modules": len(names), "heavy": heavy}


def serve_imports(cwd: Path, env: dict[str, str], scratch: Path) -> dict[str, Any]:  # (before initialize)
    """What ``eventmem serve`` imported before its ``initialize`` answer (the ``-X importtime`` report
    written to stderr until then)."""
    report = scratch / "serve-importtime.txt"
    with report.open("w", encoding="utf-8") as stderr:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "eventmem", "serve"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(INITIALIZE)
            proc.stdin.flush()
            answer(proc, 1)
            before = report.stat().st_size
            log(f"serve under -X importtime answered initialize in {time.perf_counter() - started:.2f} s")
            proc.stdin.close()
            proc.wait(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = report.read_text(encoding="utf-8")
    return imported(text[:before])


def cli_imports(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT
    )
    return imported(result.stderr)


def run(size: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-startup-") as folder:
        scratch = Path(folder)
        project = scratch / "project"
        log(f"seeding a project of {size} memories")
        build_project(project, size)
        env = environment(project)
        load_before = load()
        runs: dict[str, list[float]] = {k: [] for k in ("init", "tool", "noop_init", "noop_tool", "py", "ver", "stats")}
        for i in range(repeats):  # interleaved, so that a burst of load hits both sides alike
            init, tool = serve_once(command("serve"), project, env)
            noop_init, noop_tool = serve_once([sys.executable, str(NOOP_SERVER)], project, env)
            runs["init"].append(init)
            runs["tool"].append(tool)
            runs["noop_init"].append(noop_init)
            runs["noop_tool"].append(noop_tool)
            runs["py"].append(timed([sys.executable, "-c", "pass"], project, env))
            runs["ver"].append(timed(command("--version"), project, env))
            runs["stats"].append(timed(command("stats"), project, env))
            log(f"run {i + 1}/{repeats}: initialize {init:.2f} s (no-op {noop_init:.2f}), first tool {tool:.2f} s")
        m = {k: median(v) for k, v in runs.items()}
        imports = {
            "serve": serve_imports(project, env, scratch),
            "version": cli_imports(["-m", "eventmem", "--version"], project, env),
            "stats": cli_imports(["-m", "eventmem", "stats"], project, env),
        }
        return {
            "machine": {
                "python": platform.python_version(),
                "cores": os.cpu_count(),
                "load_before": load_before,
                "load_after": load(),
            },
            "size": size,
            "repeats": repeats,
            "serve": {
                "initialize_s": m["init"],
                "first_tool_s": m["tool"],
                "noop_initialize_s": m["noop_init"],
                "noop_first_tool_s": m["noop_tool"],
                "initialize_ratio": round(m["init"] / m["noop_init"], 3),
                "first_tool_ratio": round(m["tool"] / m["noop_tool"], 3),
            },
            "cli": {
                "python_pass_s": m["py"],
                "version_s": m["ver"],
                "stats_s": m["stats"],
                "version_ratio": round(m["ver"] / m["py"], 3),
                "stats_ratio": round(m["stats"] / m["py"], 3),
            },
            "imports": imports,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, help="memories in the project (default 1000; --quick: 100)")
    parser.add_argument("--repeats", type=int, help="runs of each measurement (default 7; --quick: 2)")
    parser.add_argument("--quick", action="store_true", help="a small, short run (the tests' smoke run)")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    options = parser.parse_args()
    size = options.size or (100 if options.quick else 1000)
    repeats = options.repeats or (2 if options.quick else 7)
    result = run(size, repeats)
    emit(result, options.out)


if __name__ == "__main__":
    main()
