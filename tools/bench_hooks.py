#!/usr/bin/env python
"""eventmem lifecycle-hook benchmark: process start to answer, next to a bare Python start in the same run.

Prints one JSON object on stdout (progress on stderr). A project of ``--memories`` memories (written
straight into journal segments, as ``tools/bench.py`` does) gets its hooks' index built once; then each
round starts, in turn and in a new process each time:

- ``python_pass``: ``python -c pass``, the floor of any Python hook;
- ``python_stdlib``: ``python -c "import json, sqlite3"``, what the fast path needs at least;
- ``session_start``: ``eventmem hook claude-code`` with a Claude Code ``SessionStart`` event on stdin,
  timed until it has printed its answer and exited (the console script, as a client runs it);
- ``prompt_related``: ``UserPromptSubmit`` with a prompt built from the corpus' words (an answer);
- ``prompt_unrelated``: ``UserPromptSubmit`` with a prompt the memory knows nothing of (no answer);
- ``session_start_module``: the same as ``session_start`` through ``python -m eventmem``.

Each round uses a new session, so nothing is left out as already shown. The target: ``session_start``
and ``prompt_related`` within 200 ms p50. Also reported: the index build (``eventmem hooks reindex``),
the answers' sizes, and the machine's load (this box is shared: the ratios are the figures to read).

Usage::

    python tools/bench_hooks.py                     # 10k memories, 30 rounds
    python tools/bench_hooks.py --memories 1000 --rounds 10 --out hooks.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import Corpus, Project, ratio, stats
from bench_json import emit

TARGET_MS = 200.0


def log(message: str) -> None:
    sys.stderr.write(f"[bench_hooks] {message}\n")
    sys.stderr.flush()


def eventmem_script() -> list[str]:
    """The ``eventmem`` console script beside this Python (a client runs that), else ``python -m``."""
    script = Path(sys.executable).parent / "eventmem"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "eventmem"]


def timed_run(command: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> tuple[float, float, bytes]:
    """Seconds from starting ``command`` to its exit with all it printed read, the CPU seconds it used
    (user + system: far less moved by other jobs on a shared box than the wall clock), and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-500:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="eventmem-bench-hooks-"))
    try:
        result = run(tmp, args.memories, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    emit(result, args.out)
    return 0


def run(tmp: Path, memories: int, rounds: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
    env |= {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config"), "EVENTMEM_GLOBAL_DIR": str(tmp / "g")}
    root = tmp / "project"
    root.mkdir()
    corpus = Corpus(7)
    log(f"writing {memories} memories")
    populated = Project(root, env).populate(memories, corpus)
    script = eventmem_script()
    log("building the hooks' index (eventmem hooks reindex)")
    build_s, _, _ = timed_run([*script, "hooks", "reindex", "--root", str(root)], b"", root, env)
    words = corpus.content_words
    related = f"how do we {words[3]} the {words[11]} when {words[20]} fails"
    unrelated = "what is the capital of France and who painted the Mona Lisa"

    def event(name: str, session: str, **fields: str) -> bytes:
        body = {"session_id": session, "transcript_path": "", "cwd": str(root), "hook_event_name": name, **fields}
        return json.dumps(body).encode()

    hook = [*script, "hook", "claude-code"]
    variants: dict[str, tuple[list[str], Any]] = {
        "python_pass": ([sys.executable, "-c", "pass"], lambda i: b""),
        "python_stdlib": ([sys.executable, "-c", "import json, sqlite3"], lambda i: b""),
        "session_start": (hook, lambda i: event("SessionStart", f"s{i}", source="startup")),
        "prompt_related": (hook, lambda i: event("UserPromptSubmit", f"p{i}", prompt=related)),
        "prompt_unrelated": (
            [*script, "hook", "claude-code"],
            lambda i: event("UserPromptSubmit", f"u{i}", prompt=unrelated),
        ),
        "session_start_module": (
            [sys.executable, "-m", "eventmem", "hook", "claude-code"],
            lambda i: event("SessionStart", f"m{i}", source="startup"),
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    sizes: dict[str, int] = {}
    for command, stdin in variants.values():  # one warm-up each (file cache, pyc)
        timed_run(command, stdin(-1), root, env)
    log(f"{rounds} rounds of {len(variants)} process starts")
    for i in range(rounds):
        for name, (command, stdin) in variants.items():
            seconds, used, out = timed_run(command, stdin(i), root, env)
            samples[name].append(seconds)
            cpu[name].append(used)
            sizes[name] = len(out)
    figures = {name: stats(values) for name, values in samples.items()}
    floor = figures["python_pass"]["p50_ms"]
    cpu_floor = stats(cpu["python_pass"])["p50_ms"]
    for name, figure in figures.items():
        figure["ratio_to_python_pass_p50"] = ratio(figure["p50_ms"], floor)
        figure["cpu_p50_ms"] = stats(cpu[name])["p50_ms"]
        figure["cpu_ratio_to_python_pass_p50"] = ratio(figure["cpu_p50_ms"], cpu_floor)
        figure["answer_bytes"] = sizes[name]
    index_file = root / ".eventmem" / "cache" / "hooks" / "index.sqlite"
    return {
        "memories": memories,
        "rounds": rounds,
        "populate": populated,
        "index_build_s": round(build_s, 3),
        "index_bytes": index_file.stat().st_size,
        "command": " ".join(Path(part).name if i == 0 else part for i, part in enumerate(script)),
        "figures": figures,
        "target_p50_ms": TARGET_MS,
        "meets_target": {
            name: figures[name]["p50_ms"] <= TARGET_MS
            for name in ("session_start", "prompt_related", "prompt_unrelated")
        },
        "answered": {"prompt_related": sizes["prompt_related"] > 0, "prompt_unrelated": sizes["prompt_unrelated"] > 0},
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    sys.exit(main())
