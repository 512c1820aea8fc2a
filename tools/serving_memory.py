#!/usr/bin/env python
"""What a serving process's memory holds, per memory: RSS and its parts, measured in a fresh process.

A child process opens the project as ``eventmem serve`` does (vectors in the background), answers
``--queries`` recalls, waits until the keyword postings and the vector worker are done, then reports:
its RSS and peak RSS, the Python heap traced by ``tracemalloc`` grouped by file (and the top lines),
the numpy arrays the derived state holds, the vector index's bytes (FAISS, not traced), SQLite's own
heap (the keyword index, not traced), and what is left (interpreter, libraries, allocator slack).

``--mode build`` opens a project without a cache (the first start builds it); ``--mode snapshot``
opens it again from the snapshot the first wrote. ``--baseline REF`` measures the code of a git ref
(``git archive``, first on the child's ``PYTHONPATH``) on the same project first; ``--trace`` adds a
run of each side under ``tracemalloc`` for the breakdown (its RSS includes tracemalloc's own).

``--stdio`` measures the serving process as a user's client meets it instead: a real ``eventmem
serve`` (``python -m eventmem serve`` with the side's code first on its ``PYTHONPATH``) driven over
stdio by a real MCP client, ``--queries`` ``retrieve_context`` calls, then its RSS read each second for
``--seconds``: the settled RSS (the last reading), the peak, and, for scale, the RSS of the same server
on an empty project (what the interpreter, the MCP SDK and the embedder's table hold whatever the
project). ``allocator`` in the output says which allocator each side's server ran on (Python's own
unless ``PYTHONMALLOC`` in the environment chooses another).

Usage::

    python tools/serving_memory.py --memories 20000 --baseline main --trace --out memory.json
    python tools/serving_memory.py --memories 100000 --baseline main --stdio --project P --out stdio.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_json import emit

ROOT = Path(__file__).resolve().parent.parent


def rss(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of process ``pid`` (this one by default), in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def sqlite_heap() -> int:
    """SQLite's own heap (all connections of the process): ``sqlite3_memory_used``."""
    import ctypes
    import sqlite3  # noqa: F401  (loads the library)

    for name in ("_sqlite3",):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            lib = ctypes.CDLL(module.__file__)
            try:
                lib.sqlite3_memory_used.restype = ctypes.c_int64
                return int(lib.sqlite3_memory_used())
            except AttributeError:
                pass
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        return int(lib.sqlite3_memory_used())
    except OSError:
        return -1


def arrays_of(obj: object, seen: set[int], path: str, out: dict[str, int], depth: int = 0) -> None:
    """Bytes of numpy arrays reachable from ``obj`` through attributes, dicts, lists and tuples (a
    few levels), by the attribute path that reaches them (each array counted once)."""
    import numpy as np

    if depth > 6 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        base = obj
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in seen or base is obj:
            seen.add(id(base))
            out[path] = out.get(path, 0) + base.nbytes
        return
    if isinstance(obj, dict):  # (dict.values: the fold's encoded records are not decoded)
        for value in list(dict.values(obj))[:100000]:
            arrays_of(value, seen, path + "[]", out, depth + 1)
        return
    if isinstance(obj, (list, tuple)):
        for value in obj[:100000]:
            arrays_of(value, seen, path + "[]", out, depth + 1)
        return
    names = getattr(obj, "__dict__", None)
    slots = getattr(type(obj), "__slots__", ())
    if names is None and not slots:
        return
    items = dict(names or {})
    for slot in slots if isinstance(slots, tuple) else ():
        if hasattr(obj, slot):
            items[slot] = getattr(obj, slot)
    if type(obj).__module__.startswith(("eventmem", "collections")):
        for key, value in items.items():
            arrays_of(value, seen, f"{path}.{key}", out, depth + 1)


def where(filename: str) -> str:
    """A traced file's name without the machine's paths: ``eventmem/...``, a package's path, or its name."""
    name = str(filename)
    if "/eventmem/" in name:
        return "eventmem/" + name.rsplit("/eventmem/", 1)[1]
    if "site-packages/" in name:
        return name.split("site-packages/")[-1]
    return name.rsplit("/", 1)[-1] if name.startswith("/") else name


def child(root: Path, queries: int, trace: bool) -> dict[str, Any]:
    import tracemalloc

    if trace:
        tracemalloc.start(1)
    from eventmem.journal.project import RootChoice
    from eventmem.service import open_service

    sys.path.insert(0, str(ROOT / "tools"))
    from bench import Corpus

    texts = Corpus(11).queries(queries)
    gc.collect()
    out: dict[str, Any] = {"rss_after_imports": rss()["VmRSS"]}
    started = time.perf_counter()
    service = open_service(RootChoice(root, "bench"), background_vectors=True)
    for text in texts:
        service.recall(text, limit=5)
    out["open_and_queries_s"] = round(time.perf_counter() - started, 2)
    store = service.project
    store.wait_vectors(600)
    store.derived.keywords.ranked_in_memory(600)
    store.wait_snapshot()
    if hasattr(store, "wait_settled"):  # (a server that folded a large journal starts again from its snapshot)
        store.wait_settled(600)
    for text in texts[:10]:
        service.recall(text, limit=5)
    time.sleep(2.0)  # (a snapshot timer)
    store.wait_snapshot()
    gc.collect()
    derived = store.derived
    memories = len(derived.table)
    out["memories"] = memories
    sizes = rss()
    out["rss"] = sizes["VmRSS"]
    out["rss_peak"] = sizes["VmHWM"]
    out["sqlite_heap"] = sqlite_heap()
    vectors = derived.vectors.index
    out["vector_codes_bytes"] = len(vectors) * vectors.dim * 2  # (FAISS's float16 codes: not traced)
    arrays: dict[str, int] = {}
    arrays_of(derived, set(), "derived", arrays)
    out["numpy_arrays"] = dict(sorted(arrays.items(), key=lambda kv: -kv[1])[:30])
    if trace:
        snapshot = tracemalloc.take_snapshot()
        out["traced_bytes"] = sum(stat.size for stat in snapshot.statistics("filename"))
        by_file = snapshot.statistics("filename")
        out["traced_by_file"] = {where(stat.traceback[0].filename): stat.size for stat in by_file[:25]}
        by_line = snapshot.statistics("lineno")
        out["traced_by_line"] = {
            f"{where(stat.traceback[0].filename)}:{stat.traceback[0].lineno}": stat.size for stat in by_line[:40]
        }
        tracemalloc.stop()
    service.close()
    return out


def run_child(root: Path, code: Path | None, mode: str, queries: int, trace: bool, env: dict[str, str]) -> Any:
    environment = dict(env)
    environment["PYTHONPATH"] = str(code if code is not None else ROOT)
    args = [sys.executable, str(Path(__file__).resolve()), "--child", str(root), "--queries", str(queries)]
    if not trace:
        args.append("--no-trace")
    done = subprocess.run(args, capture_output=True, text=True, env=environment, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["mode"] = mode
    per = result["memories"] or 1
    result["per_memory"] = {
        "rss": round(result["rss"] / per, 1),
        "rss_peak": round(result["rss_peak"] / per, 1),
        "rss_above_imports": round((result["rss"] - result["rss_after_imports"]) / per, 1),
        "sqlite_heap": round(result["sqlite_heap"] / per, 1),
        "vector_codes": round(result["vector_codes_bytes"] / per, 1),
        "traced_python_heap": round(result.get("traced_bytes", 0) / per, 1),
        "numpy_arrays": {k: round(v / per, 1) for k, v in result["numpy_arrays"].items() if v / per >= 1},
        "traced_by_file": {k: round(v / per, 1) for k, v in result.get("traced_by_file", {}).items() if v / per >= 5},
        "traced_by_line": {k: round(v / per, 1) for k, v in result.get("traced_by_line", {}).items() if v / per >= 5},
    }
    if trace:  # (the rest: interpreter and libraries, allocator slack, FAISS's maps, tracemalloc's own)
        rest = result["rss"] - result.get("traced_bytes", 0) - result["sqlite_heap"] - result["vector_codes_bytes"]
        result["per_memory"]["untraced_rest"] = round(rest / per, 1)
    return result


def _server_pid(parent: int) -> int:
    """The ``eventmem serve`` process the MCP client of this process started."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent and b"eventmem" in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except (OSError, IndexError, ValueError):
                continue
    raise RuntimeError("no eventmem serve process found")


def _allocator(pid: int) -> str:
    """The allocator process ``pid`` runs on: the ``PYTHONMALLOC`` its environment sets, else Python's own."""
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if item.startswith(b"PYTHONMALLOC="):
            return item.split(b"=", 1)[1].decode()
    return "pymalloc (Python's own)"


def stdio_side(root: Path, code: Path | None, queries: int, seconds: int, env: dict[str, str]) -> dict[str, Any]:
    """A real ``eventmem serve`` over stdio on ``root`` (see the module's text): its first call, and
    its RSS each second for ``seconds`` after ``queries`` recalls."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    sys.path.insert(0, str(ROOT / "tools"))
    from bench import Corpus

    environment = dict(env)
    environment["PYTHONPATH"] = str(code if code is not None else ROOT)
    asked = Corpus(11).queries(max(queries, 1))
    params = StdioServerParameters(command=sys.executable, args=["-m", "eventmem", "serve"], cwd=root, env=environment)

    async def drive() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with open(os.devnull, "w", encoding="utf-8") as errors:
            async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as session:
                started = time.perf_counter()
                await session.initialize()
                await session.call_tool("retrieve_context", {"query": asked[0]})
                out["first_call_s"] = round(time.perf_counter() - started, 2)
                pid = _server_pid(os.getpid())
                out["allocator"] = _allocator(pid)
                for text in asked[1:]:
                    await session.call_tool("retrieve_context", {"query": text})
                readings = []
                for _ in range(seconds):
                    await anyio.sleep(1.0)
                    readings.append(rss(pid)["VmRSS"])
                out["rss_each_second"] = readings
                out["rss"] = readings[-1]
                out["rss_peak"] = rss(pid)["VmHWM"]
        return out

    return anyio.run(drive)


def stdio_runs(
    args: argparse.Namespace, root: Path, sides: list[tuple[str, Path | None]], env: dict[str, str], tmp: Path
) -> dict[str, Any]:
    """``--stdio``: each side's server on an empty project, after a start that builds, and from the snapshot."""
    empty = tmp / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    result: dict[str, Any] = {}
    for side, code in sides:
        into = result.setdefault(side, {})
        into["empty_project"] = stdio_side(empty, code, 2, 5, env)
        subprocess.run(["rm", "-rf", str(root / ".eventmem" / "cache")], check=True)
        for mode in ("build", "snapshot"):
            run = into[mode] = stdio_side(root, code, args.queries, args.seconds, env)
            run["per_memory"] = {
                "rss": round(run["rss"] / args.memories, 1),
                "rss_peak": round(run["rss_peak"] / args.memories, 1),
                "rss_above_empty_server": round((run["rss"] - into["empty_project"]["rss"]) / args.memories, 1),
            }
            print(side, "stdio", mode, json.dumps(run["per_memory"]), file=sys.stderr)
    return result


def archive(ref: str, into: Path) -> Path:
    """The tree of ``ref`` (its ``eventmem`` package) unpacked into ``into``."""
    into.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "eventmem"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def ratios(this: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    keys = ("rss", "rss_peak", "rss_above_imports", "sqlite_heap")
    return {key: round(this["per_memory"][key] / base["per_memory"][key], 3) for key in keys if base["per_memory"][key]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--baseline", metavar="REF", help="a git ref whose code is measured beside this one")
    parser.add_argument("--project", type=Path, help="reuse this project (its cache is deleted before each side)")
    parser.add_argument("--trace", action="store_true", help="also a run under tracemalloc per side: the breakdown")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--no-trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stdio", action="store_true", help="a real eventmem serve over stdio (see above)")
    parser.add_argument("--seconds", type=int, default=60, help="--stdio: how long RSS is read after the calls")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.stdio and args.seconds < 1:
        parser.error("--seconds: at least 1 (the settled RSS is the last reading)")
    if args.child is not None:
        print(json.dumps(child(args.child, args.queries, not args.no_trace)))
        return 0
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    from scale_journal import Project

    with tempfile.TemporaryDirectory(prefix="eventmem-serving-memory-") as name:
        tmp = Path(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
        env |= {"EVENTMEM_GLOBAL_DIR": str(tmp / "global"), "EVENTMEM_LOG_LEVEL": "WARNING"}
        root = args.project or tmp / "project"
        if not root.exists():
            Project(root).create(args.memories)
        result: dict[str, Any] = {
            "script": "tools/serving_memory.py",
            "memories": args.memories,
            "baseline": args.baseline,
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        }
        sides: list[tuple[str, Path | None]] = [("this", None)]
        if args.baseline:
            sides.insert(0, ("baseline_side", archive(args.baseline, tmp / "baseline-code")))
        if args.stdio:
            result |= stdio_runs(args, root, sides, env, tmp)
            if args.baseline:
                result["ratios_to_baseline"] = {
                    mode: {
                        key: round(
                            result["this"][mode]["per_memory"][key] / result["baseline_side"][mode]["per_memory"][key],
                            3,
                        )
                        for key in ("rss", "rss_peak")
                    }
                    for mode in ("build", "snapshot")
                }
            result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
            emit(result, args.out)
            return 0
        for traced in (False, True) if args.trace else (False,):
            for side, code in sides:
                subprocess.run(["rm", "-rf", str(root / ".eventmem" / "cache")], check=True)
                into = result.setdefault(side, {})
                if traced:
                    into = into.setdefault("traced", {})
                for mode in ("build", "snapshot"):
                    into[mode] = run_child(root, code, mode, args.queries, traced, env)
                    print(side, "traced" if traced else "", mode, json.dumps(into[mode]["per_memory"]), file=sys.stderr)
        if args.baseline:
            result["ratios_to_baseline"] = {
                mode: ratios(result["this"][mode], result["baseline_side"][mode]) for mode in ("build", "snapshot")
            }
        result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
