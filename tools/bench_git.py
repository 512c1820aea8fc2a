#!/usr/bin/env python
"""Git benchmark: merges, diffs and time travel on real repositories, each next to a baseline.

Prints one JSON object on stdout; progress goes to stderr. Figures:

- ``merge_catch_up``: 10k events arrive from another branch. ``git merge`` time, then the time a
  server that was running on the target branch takes to catch up (``Store.catch_up``: fold, embed
  and index the new memories). Baselines: the same events appended to a segment without git and
  caught up by a server the same way (what a merge costs on top), and a bare in-memory fold of the
  same events (decode and apply, no index).
- ``diff``: ``eventmem diff A B`` between two revisions of a 100k-event journal (B adds 1,000
  events): the library call (``git ls-tree`` + ``git cat-file --batch``, two folds, comparison) and
  the command end to end. Baselines: one fold of the same journal from the working tree, and
  ``git diff --stat A B``.
- ``at``: the memory as of a time in the middle of a 100k-event journal: the library call and
  ``tools/replay.py at TIME MEMORY`` end to end. Baseline: one full fold from the working tree.

Events are written straight into segment files (saves of memories with 30-60 word texts, updates,
deletes); the embedder is the built-in one. Everything lives in a temporary directory that is
removed at the end. Usage::

    python tools/bench_git.py                  # 10k merged events, 100k-event journals
    python tools/bench_git.py --quick          # tiny sizes (smoke test)
    python tools/bench_git.py --out git.json   # also write the JSON to a file
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import eventmem  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Corpus, log, machine, ratio
from bench_json import emit

from eventmem.core.codec import decode_lines, encode_event
from eventmem.core.events import AnyEvent, MemoryDeleted, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, to_iso
from eventmem.core.state import State
from eventmem.journal.history import as_of, read_revision, read_worktree
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.review.journaldiff import diff_specs
from eventmem.service import MemoryService, open_service

REPO = Path(__file__).resolve().parent.parent
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return result.stdout


def new_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "bench")
    git(root, "config", "user.email", "bench@example.invalid")
    return root


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


class Events:
    """Saves of new memories, updates and deletes of earlier ones, one millisecond apart."""

    def __init__(self, corpus: Corpus, seed: int) -> None:
        self.corpus = corpus
        self.rng = random.Random(seed)
        self.memories: list[str] = []
        self.clock = START

    def make(self, count: int, by: str) -> list[AnyEvent]:
        texts = iter(self.corpus.memories(count))
        out: list[AnyEvent] = []
        for _ in range(count):
            self.clock += timedelta(milliseconds=1)
            ts, roll = to_iso(self.clock), self.rng.random()
            title, content, tags, kind, importance = next(texts)
            if roll < 0.7 or len(self.memories) < 10:
                memory = new_id()
                self.memories.append(memory)
                out.append(
                    MemorySaved(
                        id=new_id(),
                        ts=ts,
                        by=by,
                        memory=memory,
                        kind=kind,
                        title=title,
                        content=content,
                        tags=tags,
                        importance=importance,
                    )
                )
            elif roll < 0.95:
                target = self.rng.choice(self.memories)
                out.append(MemoryUpdated(id=new_id(), ts=ts, by=by, memory=target, importance=importance))
            else:
                out.append(MemoryDeleted(id=new_id(), ts=ts, by=by, memory=self.rng.choice(self.memories)))
        return out


def write(root: Path, segment: str, events: list[AnyEvent]) -> bytes:
    data = b"".join(encode_event(event) for event in events)
    path = ProjectPaths(root).journal_dir / segment
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(data)
    return data


def service_on(root: Path, env: dict[str, str]) -> MemoryService:
    return open_service(RootChoice(root, "bench"), environ=env)


def best(fn: Callable[[], object], repeats: int) -> float:
    times: list[float] = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def seconds(value: float) -> float:
    return round(value, 4)


# -- merge plus catch-up ---------------------------------------------------------------------------


def merge_catch_up(tmp: Path, env: dict[str, str], base: int, arriving: int, repeats: int) -> dict[str, Any]:
    """Best of ``repeats`` runs, alternating the git merge and the baseline (the machine's load
    varies; both pay the same embedding of the arriving memories, which dominates)."""
    log(f"merge: {base} base events, {arriving} arriving from a branch, best of {repeats}")
    events = Events(Corpus(seed=11), seed=11)
    base_events, branch_events = events.make(base, "ann"), events.make(arriving, "alice")
    merges: list[float] = []
    catch_ups: list[float] = []
    totals: list[float] = []
    locals_: list[float] = []
    for run in range(repeats):
        repo = new_repo(tmp / f"merge-{run}")
        write(repo, "w0.main.jsonl", base_events)
        commit(repo, "base")
        git(repo, "checkout", "-q", "-b", "feature")
        branch_bytes = write(repo, "w1.feature.jsonl", branch_events)
        commit(repo, "feature")
        git(repo, "checkout", "-q", "main")
        service = service_on(repo, env)  # the server running on main before the merge
        started = time.perf_counter()
        git(repo, "merge", "--no-edit", "-q", "feature")
        merged = time.perf_counter()
        applied = service.project.catch_up()
        caught_up = time.perf_counter()
        assert applied == arriving, (applied, arriving)
        service.close()
        merges.append(merged - started)
        catch_ups.append(caught_up - merged)
        totals.append(caught_up - started)

        plain = tmp / f"merge-baseline-{run}"
        write(plain, "w0.main.jsonl", base_events)
        baseline_service = service_on(plain, env)
        write(plain, "w1.feature.jsonl", branch_events)
        local_started = time.perf_counter()
        assert baseline_service.project.catch_up() == arriving
        locals_.append(time.perf_counter() - local_started)
        baseline_service.close()

    def fold() -> None:
        state = State()
        for event in decode_lines(branch_bytes) or ():
            state.apply(event)

    in_memory = best(fold, 3)
    total, local = min(totals), min(locals_)
    return {
        "base_events": base,
        "arriving_events": arriving,
        "git_merge_s": seconds(min(merges)),
        "catch_up_s": seconds(min(catch_ups)),
        "merge_plus_catch_up_s": seconds(total),
        "baseline_same_events_without_git_s": seconds(local),
        "baseline_fold_in_memory_s": seconds(in_memory),
        "ratio_vs_without_git": ratio(total, local),
        "ratio_vs_fold_in_memory": ratio(total, in_memory),
        "runs": {"merge_plus_catch_up_s": [seconds(t) for t in totals], "without_git_s": [seconds(t) for t in locals_]},
    }


# -- diff and time travel on a large journal ------------------------------------------------------


def large_journal(tmp: Path, count: int, change: int) -> tuple[Path, Events]:
    log(f"journal of {count} events, then {change} more")
    events = Events(Corpus(seed=7), seed=7)
    repo = new_repo(tmp / "large")
    half = count // 2
    write(repo, "w0.main.jsonl", events.make(half, "ann"))
    write(repo, "w1.main.jsonl", events.make(count - half, "bob"))
    commit(repo, "A")
    git(repo, "tag", "A")
    write(repo, "w0.main.jsonl", events.make(change, "ann"))
    commit(repo, "B")
    git(repo, "tag", "B")
    return repo, events


def full_fold(repo: Path) -> None:
    read_worktree(ProjectPaths(repo)).fold()


def diff_figures(repo: Path, repeats: int) -> dict[str, Any]:
    log("diff A B")
    library = best(lambda: diff_specs(repo, "A", "B"), repeats)
    command = [sys.executable, "-m", "eventmem", "diff", "A", "B", "--json"]
    end_to_end = best(lambda: subprocess.run(command, cwd=repo, check=True, capture_output=True), repeats)
    fold = best(lambda: full_fold(repo), repeats)
    git_diff = best(lambda: git(repo, "diff", "--stat", "A", "B"), repeats)
    summary = diff_specs(repo, "A", "B")
    return {
        "events_a": len(read_revision(repo, "A").entries),
        "events_b": len(read_revision(repo, "B").entries),
        "memories_changed": len(summary.memories),
        "library_s": seconds(library),
        "command_s": seconds(end_to_end),
        "baseline_one_fold_s": seconds(fold),
        "baseline_git_diff_stat_s": seconds(git_diff),
        "ratio_library_vs_one_fold": ratio(library, fold),
        "ratio_command_vs_one_fold": ratio(end_to_end, fold),
    }


def at_figures(repo: Path, events: Events, repeats: int) -> dict[str, Any]:
    log("at <time in the middle>")
    entries = sorted(read_worktree(ProjectPaths(repo)).entries, key=lambda e: e.stamp)
    middle = entries[len(entries) // 2].event
    memory = events.memories[len(events.memories) // 4]
    library = best(lambda: as_of(repo, middle.ts), repeats)
    command = [sys.executable, str(REPO / "tools" / "replay.py"), "at", middle.ts, memory, "--json"]
    end_to_end = best(lambda: subprocess.run(command, cwd=repo, check=True, capture_output=True), repeats)
    fold = best(lambda: full_fold(repo), repeats)
    return {
        "events": len(entries),
        "as_of": middle.ts,
        "library_s": seconds(library),
        "command_s": seconds(end_to_end),
        "baseline_full_fold_s": seconds(fold),
        "ratio_library_vs_full_fold": ratio(library, fold),
        "ratio_command_vs_full_fold": ratio(end_to_end, fold),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--merge-events", type=int, default=10_000)
    parser.add_argument("--journal-events", type=int, default=100_000)
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    arriving, count = (200, 1_000) if args.quick else (args.merge_events, args.journal_events)
    repeats = 1 if args.quick else 3
    tmp = Path(tempfile.mkdtemp(prefix="eventmem-bench-git-"))
    env = {"EVENTMEM_GLOBAL_DIR": str(tmp / "global"), "EVENTMEM_LOG_LEVEL": "WARNING"}
    saved_env = {k: os.environ.get(k) for k in ("GIT_CONFIG_NOSYSTEM", "EVENTMEM_GLOBAL_DIR")}
    os.environ.update(GIT_CONFIG_NOSYSTEM="1", EVENTMEM_GLOBAL_DIR=env["EVENTMEM_GLOBAL_DIR"])
    try:
        result: dict[str, Any] = {
            "benchmark": "eventmem tools/bench_git.py",
            "machine": machine(tmp),
            "settings": {"quick": args.quick, "repeats": repeats, "best_of": repeats},
            "merge_catch_up": merge_catch_up(tmp, env, max(arriving // 10, 10), arriving, max(repeats - 1, 1)),
        }
        repo, events = large_journal(tmp, count, max(count // 100, 10))
        result["diff"] = diff_figures(repo, repeats)
        result["at"] = at_figures(repo, events, repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
