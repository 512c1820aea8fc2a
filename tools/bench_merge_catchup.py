#!/usr/bin/env python
"""The catch-up a running server does for a merged branch, in process, against the same at a git ref.

One generated git project (``tools/scale_journal.py``) with a branch of ``--branch-events`` events.
Each round, each side (this code, then the baseline's: ``git archive`` of the ref, first on the child's
``PYTHONPATH``) opens its own copy of the project as ``eventmem serve`` does (vectors in the
background), waits until its start's threads are done (vectors, keyword postings, snapshot), merges
the branch with ``git merge`` and answers ``search`` for the branch's marked memory: the wall time of
that catch-up and answer, and the CPU time of the thread that did it (``time.thread_time``: far less
moved by the other work on the machine than wall time). Sides alternate; medians and ratios to the
baseline. With ``--profile`` a side's catch-up is also profiled (cProfile, top functions by own time).

Usage::

    python tools/bench_merge_catchup.py --memories 100000 --rounds 3 --baseline main --out merge.json
"""

from __future__ import annotations

import argparse
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

from bench_json import emit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

MARKER = "mergemarkerone"


def child(place: Path, profile: bool) -> dict[str, Any]:
    """In a child process (its own code first on the path): open the copy at ``place``, merge, answer."""
    import cProfile
    import io
    import pstats

    import eventmem
    from eventmem.journal.project import RootChoice
    from eventmem.service import open_service

    root = place / "project"
    from scale_journal import git  # (after eventmem: it puts this checkout's root first on the path)

    os.environ["EVENTMEM_GLOBAL_DIR"] = str(place / "global")
    os.environ["EVENTMEM_LOG_LEVEL"] = "WARNING"
    service = open_service(RootChoice(root, "bench"), background_vectors=True)
    store = service.project
    service.search("warm up", limit=5)
    store.wait_vectors(900)
    ranking = store.derived.keywords.index.ranking
    if ranking is not None:
        ranking.wait(900)
    time.sleep(2.0)  # (the snapshot the start made due: taken 0.5 s after a catch-up, then written)
    store.wait_snapshot()
    service.search("warm up again", limit=5)  # (the postings made are now the ones that rank)
    git(root, "merge", "-q", "--no-ff", "-m", "merge feature1", "feature1")
    out: dict[str, Any] = {"load_average_at_merge": [round(x, 2) for x in os.getloadavg()]}
    out["code"] = "baseline" if "baseline-code" in eventmem.__file__ else "this"
    profiler = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.thread_time()
    if profiler is not None:
        profiler.enable()
    events = store.catch_up()
    hits = service.search(MARKER, limit=5)
    if profiler is not None:
        profiler.disable()
    out["catch_up_and_answer_s"] = round(time.perf_counter() - wall, 3)
    out["catch_up_and_answer_cpu_s"] = round(time.thread_time() - cpu, 3)
    out["events"] = events
    out["answer_holds_the_merge"] = bool(hits) and MARKER in hits[0].title
    out["vector_status"] = store.vector_status()
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(25)
        out["profile"] = text.getvalue().splitlines()
    store.wait_vectors(900)
    service.close()
    return out


def make_project(place: Path, memories: int, branch_events: int) -> dict[str, Any]:
    from scale_journal import Project

    project = Project(place / "project")
    project.create(memories)
    events, counts, _ = project.mixed_events(branch_events, 101, MARKER)
    project.branch("feature1", events)
    return {"events": len(events), "by_type": counts}


def run_side(tmp: Path, template: Path, name: str, code: Path | None, profile: bool) -> dict[str, Any]:
    place = tmp / name
    shutil.rmtree(place, ignore_errors=True)
    place.mkdir()
    shutil.copytree(template / "project", place / "project", symlinks=True)
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    args = [sys.executable, __file__, "--child", str(place)] + (["--profile"] if profile else [])
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    shutil.rmtree(place, ignore_errors=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--branch-events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REF", default="main")
    parser.add_argument("--profile", action="store_true", help="profile each side's catch-up in the last round")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.profile)))
        return 0
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "memories": args.memories,
        "baseline": args.baseline,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-merge-") as name:
        tmp = Path(name)
        code = tmp / "baseline-code"
        code.mkdir()
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "eventmem"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(code)], input=tar.stdout, check=True)
        result["merged_branch"] = make_project(tmp / "template", args.memories, args.branch_events)
        rounds = []
        for number in range(args.rounds):
            profile = args.profile and number == args.rounds - 1
            figures = {}
            for side, side_code in (("baseline", code), ("this", None)):
                figures[side] = run_side(tmp, tmp / "template", side, side_code, profile)
                print(
                    f"round {number} {side}: {figures[side]['catch_up_and_answer_s']} s, "
                    f"{figures[side]['catch_up_and_answer_cpu_s']} CPU s",
                    file=sys.stderr,
                    flush=True,
                )
            rounds.append(figures)
    result["rounds"] = rounds
    for key in ("catch_up_and_answer_s", "catch_up_and_answer_cpu_s"):
        base = statistics.median(r["baseline"][key] for r in rounds)
        this = statistics.median(r["this"][key] for r in rounds)
        result[f"median_{key}"] = {"baseline": base, "this": this, "ratio": round(this / base, 3)}
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
