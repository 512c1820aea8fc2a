#!/usr/bin/env python
"""A serving ``eventmem serve`` against the same server at a git ref (e.g. main), in one run.

For each side, on its own copy of the same generated git project (``tools/scale_journal.py``): the
first call, the retrieve p50, the server's memory (RSS and peak RSS) per memory, right after the
queries and settled a few seconds later, then a branch of ``--branch-events`` events merged under the
running server: the time until its next call answers with the merge (``tools/scale_inprocess.py``'s
``serving``); then a server started again from the snapshot the first left: its first call, p50 and
memory. The baseline's code is ``git archive``
of the ref, put first on the server's ``PYTHONPATH``. Prints one JSON object with both sides and
this side's ratios to the baseline.

With ``--fresh-only``: a fresh clone alone (one generated project whose cache is deleted before each
start), both sides alternated for ``--rounds``: the first call's time and the server's CPU seconds
by then, what it warned of, and when vectors were complete, with medians and ratios.

With ``--from-snapshot-only``: servers started from one snapshot (the one a server of this code wrote
once it built the cache of a generated project, in ``--prepare-seconds``; below 20,000 memories, where
a server does not write one then, ``eventmem rebuild``'s), both sides alternated
for ``--rounds`` (which goes first alternates too), each answering
``--queries`` ``retrieve_context`` calls of questions new to that round after its first call and a
few settled seconds: the p50 and mean of each, with medians and the ratio of each round.

With ``--after-rebuild``: a user's ``eventmem rebuild`` then a server, both of one side's code, on one
generated project (its cache deleted before each rebuild), the sides alternated for ``--rounds``: the
rebuild's time (answers ready, and in all: the snapshot written), then the server's first call, its
``--queries`` retrieves, and ``--settle-seconds`` later its CPU seconds and RSS: what a server started
from a command's snapshot still has to make. With ``--after-import``: the same after ``eventmem import
json`` of the generated project's memories (exported once) into an empty git project, made again
before each import.

Usage::

    python tools/bench_serving.py --memories 20000 --baseline main --out serving.json
    python tools/bench_serving.py --memories 100000 --fresh-only --rounds 3 --baseline main
    python tools/bench_serving.py --memories 100000 --from-snapshot-only --rounds 6 --queries 200
    python tools/bench_serving.py --memories 100000 --after-rebuild --rounds 3 --queries 100
    python tools/bench_serving.py --memories 100000 --after-import --rounds 3 --queries 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import scale_inprocess  # noqa: E402
from bench import Corpus  # noqa: E402
from bench_json import emit  # noqa: E402
from scale_journal import Project  # noqa: E402


def log(message: str) -> None:
    print(f"[bench_serving {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def archive(ref: str, into: Path) -> Path:
    """The tree of ``ref`` (its ``eventmem`` package and data) unpacked into ``into``."""
    into.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "eventmem"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def side(tmp: Path, name: str, code: Path | None, args: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    place = tmp / name
    place.mkdir()
    project = Project(place / "project")
    started = time.perf_counter()
    project.create(args.memories)
    log(f"{name}: project of {args.memories} memories in {time.perf_counter() - started:.0f}s")
    before = os.environ.get("PYTHONPATH")
    if code is not None:
        os.environ["PYTHONPATH"] = str(code) + (os.pathsep + before if before else "")
    try:
        return asyncio.run(scale_inprocess.serving(project, place, texts, args.branch_events, None, log, restart=True))
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def fresh_clones(tmp: Path, code: Path, args: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    """The first call of a server on a fresh clone (no cache), each side in turn, ``--rounds`` times."""
    project = Project(tmp / "fresh" / "project")
    project.create(args.memories)
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        figures: dict[str, Any] = {}
        for name, side_code in (("baseline", code), ("this", None)):
            shutil.rmtree(project.paths.cache_dir, ignore_errors=True)
            place = tmp / "fresh" / f"{name}-{number}"
            place.mkdir()
            before = os.environ.get("PYTHONPATH")
            if side_code is not None:
                os.environ["PYTHONPATH"] = str(side_code) + (os.pathsep + before if before else "")
            try:
                run = asyncio.run(scale_inprocess.serving(project, place, texts, 0, None, log, fresh_only=True))
            finally:
                if before is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = before
            run["load_average"] = [round(x, 2) for x in os.getloadavg()]
            log(
                f"fresh clone {number} {name}: first call {run['first_call_s']}s "
                f"(server CPU {run['server_cpu_s_at_first_call']}s), vectors {run['vectors_complete_s']}s"
            )
            figures[name] = run
        rounds.append(figures)
    return {"rounds": rounds, **_medians(rounds, ("first_call_s", "server_cpu_s_at_first_call", "vectors_complete_s"))}


async def _retrieves(
    project: Path,
    code: Path | None,
    questions: list[str],
    settle_s: float,
    after_s: float = 0.0,
    errlog: Path | None = None,
) -> dict[str, Any]:
    """One server on ``project`` (``code`` first on its ``PYTHONPATH``): its first call, then
    ``questions``; ``after_s`` seconds after them, its CPU seconds and RSS (when ``after_s`` is given)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    params = StdioServerParameters(command=sys.executable, args=["-m", "eventmem", "serve"], cwd=project, env=env)
    with open(errlog or os.devnull, "w", encoding="utf-8") as errors:
        async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as session:
            started = time.perf_counter()
            await session.initialize()
            await session.call_tool("retrieve_context", {"query": "where the server starts"})
            first = time.perf_counter() - started
            await asyncio.sleep(settle_s)
            taken = []
            for question in questions:
                started = time.perf_counter()
                await session.call_tool("retrieve_context", {"query": question})
                taken.append(time.perf_counter() - started)
            if after_s:
                await asyncio.sleep(after_s)
                pid = scale_inprocess.server_pid()
                usage = {
                    "server_cpu_s": round(scale_inprocess.cpu_seconds(pid), 3),
                    "rss_bytes": scale_inprocess.rss_bytes(pid)["VmRSS"],
                }
    return {
        **(usage if after_s else {}),
        "first_call_s": round(first, 3),
        "retrieve_p50_ms": round(statistics.median(taken) * 1000, 3) if taken else None,
        "retrieve_mean_ms": round(statistics.mean(taken) * 1000, 3) if taken else None,
    }


def _in_turn(number: int, code: Path) -> tuple[tuple[str, Path | None], ...]:
    """The two sides of round ``number``, in the order they run: which goes first alternates."""
    sides: tuple[tuple[str, Path | None], ...] = (("baseline", code), ("this", None))
    return sides if number % 2 == 0 else sides[::-1]


def _medians(rounds: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """``median_KEY``: each side's median of ``KEY`` over ``rounds``, and this side's ratio to the baseline's."""
    out: dict[str, Any] = {}
    for key in keys:
        base = statistics.median(r["baseline"][key] for r in rounds)
        this = statistics.median(r["this"][key] for r in rounds)
        out[f"median_{key}"] = {"baseline": base, "this": this, "ratio": round(this / base, 3)}
    return out


def from_snapshot(tmp: Path, code: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--from-snapshot-only`` (see the module's text)."""
    project = Project(tmp / "snapshot" / "project")
    project.create(args.memories)
    # a server that builds writes a snapshot with what servers make (the keyword postings, the
    # approximate vector index) once it is done, from 20,000 memories on (Tuning.start_again_from):
    # the servers measured start from it; below, from the snapshot a rebuild writes
    if args.memories < 20_000:
        rebuild = [sys.executable, "-m", "eventmem", "rebuild"]
        subprocess.run(rebuild, cwd=project.root, check=True, capture_output=True)
    prepared = asyncio.run(_retrieves(project.root, None, [], args.prepare_seconds))
    log(f"from the snapshot: a server ran {args.prepare_seconds:.0f}s on it (first call {prepared['first_call_s']}s)")
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        questions = Corpus(100 + number).queries(args.queries)
        figures: dict[str, Any] = {}
        for name, side_code in _in_turn(number, code):
            figures[name] = asyncio.run(_retrieves(project.root, side_code, questions, 4.0))
            figures[name]["load_average"] = [round(x, 2) for x in os.getloadavg()]
            log(f"from the snapshot {number} {name}: retrieve p50 {figures[name]['retrieve_p50_ms']} ms")
        figures["ratio_p50"] = round(figures["this"]["retrieve_p50_ms"] / figures["baseline"]["retrieve_p50_ms"], 3)
        rounds.append(figures)
    medians = _medians(rounds, ("first_call_s", "retrieve_p50_ms", "retrieve_mean_ms"))
    return {"rounds": rounds, "ratios_p50": [r["ratio_p50"] for r in rounds], **medians}


def after_command(tmp: Path, code: Path, args: argparse.Namespace, command: str) -> dict[str, Any]:
    """``--after-rebuild`` and ``--after-import`` (see the module's text): ``command`` is ``rebuild`` or ``import``."""
    source = Project(tmp / command / "project")
    source.create(args.memories)
    project, dump = source.root, tmp / command / "dump.json"
    if command == "import":  # (the generated project's memories, imported into an empty project each time)
        exporting = [sys.executable, "-m", "eventmem", "export", "json", str(dump)]
        subprocess.run(exporting, cwd=source.root, check=True, capture_output=True)
        project = tmp / command / "imported"
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        questions = Corpus(200 + number).queries(args.queries)
        figures: dict[str, Any] = {}
        for name, side_code in _in_turn(number, code):
            if command == "import":
                shutil.rmtree(project, ignore_errors=True)
                project.mkdir(parents=True)
                subprocess.run(["git", "init", "-q", str(project)], check=True)
                argv = [sys.executable, "-m", "eventmem", "import", "json", str(dump)]
            else:
                shutil.rmtree(source.paths.cache_dir, ignore_errors=True)
                argv = [sys.executable, "-m", "eventmem", "rebuild", "--json"]
            env = dict(os.environ)
            if side_code is not None:
                env["PYTHONPATH"] = str(side_code) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            started = time.perf_counter()
            done = subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True, text=True)
            run: dict[str, Any] = {f"{command}_s": round(time.perf_counter() - started, 3)}
            if command == "rebuild":
                run["rebuild_ready_s"] = json.loads(done.stdout)["ready_seconds"]
            logged = args.server_logs / f"{command}-{number}-{name}.log" if args.server_logs else None
            if logged is not None:
                logged.with_suffix(".command.log").write_text(done.stdout + done.stderr, encoding="utf-8")
            run.update(asyncio.run(_retrieves(project, side_code, questions, 0.0, args.settle_seconds, logged)))
            run["rss_bytes_per_memory"] = round(run["rss_bytes"] / args.memories, 1)
            run["load_average"] = [round(x, 2) for x in os.getloadavg()]
            log(f"after {command} {number} {name}: {run}")
            figures[name] = run
        rounds.append(figures)
    timed = ("rebuild_s", "rebuild_ready_s") if command == "rebuild" else ("import_s",)
    keys = (*timed, "first_call_s", "retrieve_p50_ms", "server_cpu_s", "rss_bytes_per_memory")
    return {"rounds": rounds, **_medians(rounds, keys)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--branch-events", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--baseline", metavar="REF", default="main")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--fresh-only", action="store_true", help="a fresh clone's first call alone (see above)")
    parser.add_argument(
        "--from-snapshot-only", action="store_true", help="retrieves of servers started from a snapshot (see above)"
    )
    parser.add_argument("--after-rebuild", action="store_true", help="a server after eventmem rebuild (see above)")
    parser.add_argument("--after-import", action="store_true", help="a server after eventmem import (see above)")
    parser.add_argument("--server-logs", type=Path, help="--after-*: each command's output, each server's log, here")
    parser.add_argument(
        "--settle-seconds", type=float, default=20.0, help="--after-*: when the server's CPU and RSS are read"
    )
    parser.add_argument(
        "--prepare-seconds", type=float, default=45.0, help="--from-snapshot-only: the preparing server's run"
    )
    parser.add_argument("--rounds", type=int, default=3, help="--fresh-only, --from-snapshot-only: starts of each side")
    args = parser.parse_args(argv)
    if args.server_logs:
        args.server_logs.mkdir(parents=True, exist_ok=True)
    texts = Corpus(11).queries(args.queries)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "memories": args.memories,
        "branch_events": args.branch_events,
        "baseline": args.baseline,
    }
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-serving-") as name:
        tmp = Path(name)
        code = archive(args.baseline, tmp / "baseline-code")
        if args.fresh_only or args.from_snapshot_only or args.after_rebuild or args.after_import:
            if args.fresh_only:
                result["fresh_clone"] = fresh_clones(tmp, code, args, texts)
            elif args.from_snapshot_only:
                result["from_snapshot"] = from_snapshot(tmp, code, args)
            elif args.after_rebuild:
                result["after_rebuild"] = after_command(tmp, code, args, "rebuild")
            else:
                result["after_import"] = after_command(tmp, code, args, "import")
            result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
            emit(result, args.out)
            return 0
        result["baseline_side"] = side(tmp, "baseline", code, args, texts)
        result["this_side"] = side(tmp, "this", None, args, texts)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    keys = (
        "first_call_s",
        "retrieve_p50_ms",
        "rss_bytes_per_memory",
        "rss_peak_bytes_per_memory",
        "settled_rss_bytes_per_memory",
        "next_call_after_merge_s",
        "server_cpu_s_until_next_call_answered",
        "rss_bytes_per_memory_after_merge",
        "settled_rss_bytes_per_memory_after_merge",
        "restart_first_call_s",
        "restart_retrieve_p50_ms",
        "restart_rss_bytes_per_memory",
        "restart_rss_peak_bytes_per_memory",
    )
    result["ratios_to_baseline"] = {
        key: round(result["this_side"][key] / result["baseline_side"][key], 2)
        for key in keys
        if result["baseline_side"].get(key)
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
