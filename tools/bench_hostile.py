#!/usr/bin/env python
"""Opening a project whose journal holds a huge hostile line, side by side with the same project
without it: peak RSS and time of the first command, and their ratios.

Two projects get the same ``--memories`` saved events (the benchmark's corpus); the second also has
one ``--line-mb`` MB line in the middle of its segment (a saved event whose content was padded far
past every limit). Each project is opened cold (cache deleted) by a fresh ``eventmem search``
process, ``--runs`` times; the child's peak RSS comes from ``wait4``. Both must answer the same, and
``eventmem doctor`` must report the line. Prints one JSON object on stdout (progress on stderr).

Usage::

    python tools/bench_hostile.py                  # 2,000 memories, a 50 MB line, 3 runs
    python tools/bench_hostile.py --quick          # 200 memories, a 9 MB line, 1 run
    python tools/bench_hostile.py --out bench-hostile.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
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

from bench import Corpus, saved_event  # noqa: E402
from bench_json import emit  # noqa: E402

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.ids import to_iso  # noqa: E402
from eventmem.journal.project import ProjectPaths  # noqa: E402

QUERY = "database migration rollback"


def log(message: str) -> None:
    print(f"[bench_hostile {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_project(root: Path, lines: list[bytes], hostile: bytes) -> None:
    """A git project whose one segment holds ``lines``, with ``hostile`` (if any) in the middle."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    paths = ProjectPaths(root)
    paths.ensure()
    middle = len(lines) // 2
    data = b"".join(lines[:middle]) + (hostile + b"\n" if hostile else b"") + b"".join(lines[middle:])
    (paths.journal_dir / "bench0000.main.jsonl").write_bytes(data)


def open_once(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """Open the project cold with ``eventmem search``: seconds, peak RSS (MB) and the answer."""
    shutil.rmtree(root / ".eventmem" / "cache", ignore_errors=True)
    command = [sys.executable, "-m", "eventmem", "search", QUERY, "--json", "--limit", "10"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    proc.stdout.close()
    if proc.returncode != 0:
        raise SystemExit(f"eventmem search failed in {root} (exit {proc.returncode})")
    answer = [hit["id"] for hit in json.loads(output)["results"]]
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "answer": answer}


def measure(root: Path, env: dict[str, str], runs: int) -> dict[str, Any]:
    samples = [open_once(root, env) for _ in range(runs)]
    answers = {tuple(sample["answer"]) for sample in samples}
    assert len(answers) == 1, "the same project answered differently"
    return {
        "seconds": [round(sample["seconds"], 3) for sample in samples],
        "seconds_median": round(statistics.median(sample["seconds"] for sample in samples), 3),
        "seconds_min": round(min(sample["seconds"] for sample in samples), 3),
        "peak_rss_mb": [round(sample["peak_rss_mb"], 1) for sample in samples],
        "peak_rss_mb_max": round(max(sample["peak_rss_mb"] for sample in samples), 1),
        "answer": samples[0]["answer"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--line-mb", type=float, default=50.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.memories, args.line_mb, args.runs = 200, 9.0, 1

    corpus = Corpus(7)
    rng = random.Random(7)
    now = time.time()
    lines = [
        encode_event(saved_event(memory, to_iso(datetime.fromtimestamp(now - rng.random() * 86400, UTC)), "bench"))
        for memory in corpus.memories(args.memories)
    ]
    padding = int(args.line_mb * 1_000_000)
    hostile = lines[0][:-2] + b',"content":"' + b"x" * padding + b'"}'

    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-hostile-") as tmp:
        clean, with_line = Path(tmp) / "clean", Path(tmp) / "hostile"
        make_project(clean, lines, b"")
        make_project(with_line, lines, hostile)
        log(f"{args.memories} memories; hostile line of {len(hostile):,} bytes; {args.runs} cold opens each")
        results = {"clean": measure(clean, env, args.runs), "hostile": measure(with_line, env, args.runs)}
        doctor = subprocess.run(
            [sys.executable, "-m", "eventmem", "doctor", "--json"], cwd=with_line, env=env, capture_output=True
        )
        reported = json.loads(doctor.stdout)["corrupt_lines"]
    same_answer = results["clean"].pop("answer") == results["hostile"].pop("answer")
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "memories": args.memories,
        "hostile_line_bytes": len(hostile),
        **results,
        "ratio": {
            "seconds": round(results["hostile"]["seconds_median"] / results["clean"]["seconds_median"], 3),
            "seconds_min": round(results["hostile"]["seconds_min"] / results["clean"]["seconds_min"], 3),
            "peak_rss": round(results["hostile"]["peak_rss_mb_max"] / results["clean"]["peak_rss_mb_max"], 3),
        },
        "same_answer": same_answer,
        "doctor_reported": [{"offset": problem["offset"], "reason": problem["reason"]} for problem in reported],
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
