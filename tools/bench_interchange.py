#!/usr/bin/env python
"""Import throughput: ``eventmem import FORMAT PATH`` of a store of ``--memories`` memories, per format.

For each format a store is written the way that tool writes it (server-memory JSONL; memorygraph's
SQLite ``nodes`` and ``relationships``; mcp-memory-service's ``memories`` table; a folder of
basic-memory notes; an eventmem JSON dump), from the benchmark's corpus, with a link from every
memory to the one before it where the format has links. Each is imported by a fresh ``eventmem``
process into a fresh project: the wall time (process start, read, plan, one append, indexing) and
memories per second, then the time of a second import of the same store (a dry run that finds
everything unchanged). Prints one JSON object on stdout (progress on stderr).

``--large LINES`` measures instead one large server-memory import (half entities, half relations,
as the official server's file of a long-lived project): its wall time and the importing process's
peak memory (its own, from ``wait4``), with the default ``max_segment_bytes`` (the import goes on in
new segments as each fills), beside the same import into one segment (``max_segment_bytes`` at its
ceiling: the baseline, what one append of the whole batch costs), as ratios; ``--segment-mb`` sets a
smaller segment for the rolled-over run (a smaller store then still spans several segments).
``--baseline-tree DIR`` runs the same rolled-over import a second time with the eventmem of another
checkout (``git worktree add DIR main``), in the same run, as ratios; ``--rebuild-floor`` adds the
peak memory of ``eventmem rebuild`` of the imported project (a process folding and indexing that
journal from nothing: what the import's peak is compared with).

Usage::

    python tools/bench_interchange.py                 # 10,000 memories per format
    python tools/bench_interchange.py --quick         # 200
    python tools/bench_interchange.py --out bench-interchange.json
    python tools/bench_interchange.py --large 200000  # one 200k-line import, rolled over vs one segment
    python tools/bench_interchange.py --large 200000 --rolled-only  # the rolled-over import alone
    python tools/bench_interchange.py --large 20000 --rolled-only --baseline-tree ../base --rebuild-floor
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from bench import Corpus  # noqa: E402
from bench_json import emit  # noqa: E402

Memory = tuple[str, str, tuple[str, ...], str, float]
NODES = (
    "CREATE TABLE nodes (id TEXT PRIMARY KEY, label TEXT NOT NULL, properties TEXT NOT NULL, "
    "created_at TIMESTAMP, updated_at TIMESTAMP)"
)
RELATIONSHIPS = (
    "CREATE TABLE relationships (id TEXT PRIMARY KEY, from_id TEXT NOT NULL, to_id TEXT NOT NULL, "
    "rel_type TEXT NOT NULL, properties TEXT NOT NULL, created_at TIMESTAMP, valid_until TIMESTAMP)"
)
MEMORIES = (
    "CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, content_hash TEXT UNIQUE NOT NULL, "
    "content TEXT NOT NULL, tags TEXT, memory_type TEXT, metadata TEXT, created_at REAL, updated_at REAL, "
    "created_at_iso TEXT, updated_at_iso TEXT, deleted_at REAL DEFAULT NULL)"
)
INSERT_MEMORY = (
    "INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at_iso) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


def log(message: str) -> None:
    print(f"[bench_interchange {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def server_memory(memories: list[Memory], folder: Path) -> Path:
    path = folder / "memory.jsonl"
    lines = []
    for index, (title, content, tags, kind, importance) in enumerate(memories):
        observations = [content, f"importance {importance:g}", "tags: " + ", ".join(tags)]
        lines.append({"type": "entity", "name": f"{title} {index}", "entityType": kind, "observations": observations})
    lines += [
        {
            "type": "relation",
            "from": f"{memories[i][0]} {i}",
            "to": f"{memories[i - 1][0]} {i - 1}",
            "relationType": "RELATED_TO",
        }
        for i in range(1, len(memories))
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def memorygraph(memories: list[Memory], folder: Path) -> Path:
    path = folder / "memory.db"
    db = sqlite3.connect(path)
    db.execute(NODES)
    db.execute(RELATIONSHIPS)
    for index, (title, content, tags, kind, importance) in enumerate(memories):
        props = {
            "id": f"n{index}",
            "type": kind,
            "title": title,
            "content": content,
            "tags": list(tags),
            "importance": importance,
        }
        db.execute(
            "INSERT INTO nodes VALUES (?, 'Memory', ?, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
            (f"n{index}", json.dumps(props)),
        )
        if index:
            db.execute(
                "INSERT INTO relationships VALUES (?, ?, ?, 'RELATED_TO', ?, '2026-01-01', NULL)",
                (f"r{index}", f"n{index}", f"n{index - 1}", json.dumps({"strength": 0.8})),
            )
    db.commit()
    db.close()
    return path


def mcp_memory_service(memories: list[Memory], folder: Path) -> Path:
    path = folder / "sqlite_vec.db"
    db = sqlite3.connect(path)
    db.execute(MEMORIES)
    for index, (title, content, tags, kind, importance) in enumerate(memories):
        db.execute(
            INSERT_MEMORY,
            (
                f"h{index:08d}",
                f"{title}. {content}",
                ",".join(tags),
                kind,
                json.dumps({"importance": importance}),
                "2026-01-01T00:00:00Z",
            ),
        )
    db.commit()
    db.close()
    return path


def markdown(memories: list[Memory], folder: Path) -> Path:
    notes = folder / "notes"
    notes.mkdir()
    for index, (title, content, tags, kind, _) in enumerate(memories):
        relation = f"\n## Relations\n- relates_to [[{memories[index - 1][0]} {index - 1}]]\n" if index else ""
        tag_list = "".join(f"- {tag}\n" for tag in tags)
        header = f"---\ntitle: {title} {index}\ntype: note\ntags:\n{tag_list}---\n\n# {title} {index}\n\n"
        text = f"{header}{content}\n\n## Observations\n- [{kind}] {content[:80]}\n{relation}"
        (notes / f"{index:06d}.md").write_text(text, encoding="utf-8")
    return notes


def json_dump(memories: list[Memory], folder: Path) -> Path:
    path = folder / "dump.json"
    data = {
        "format": "eventmem-dump",
        "version": 1,
        "memories": [
            {"id": f"m{i}", "kind": kind, "title": title, "body": content, "tags": list(tags), "importance": importance}
            for i, (title, content, tags, kind, importance) in enumerate(memories)
        ],
        "links": [
            {"source": f"m{i}", "target": f"m{i - 1}", "relation": "related_to"} for i in range(1, len(memories))
        ],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


WRITERS: dict[str, Callable[[list[Memory], Path], Path]] = {
    "server-memory": server_memory,
    "memorygraph": memorygraph,
    "mcp-memory-service": mcp_memory_service,
    "markdown": markdown,
    "json": json_dump,
}


def import_once(
    project: Path, name: str, store: Path, env: dict[str, str], *extra: str
) -> tuple[float, dict[str, Any]]:
    command = [sys.executable, "-m", "eventmem", "import", name, str(store), "--json", *extra]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"eventmem import {name} failed: {result.stderr.strip()}")
    report: dict[str, Any] = json.loads(result.stdout)
    return seconds, report


def measured(command: list[str], project: Path, env: dict[str, str]) -> tuple[float, float, bytes]:
    """Run ``command`` in ``project``: its wall seconds, its own peak RSS in MB (from ``wait4``), its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=project, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(command[2:4])} failed: {err.read().decode(errors='replace').strip()}")
        return seconds, usage.ru_maxrss / 1024, out.read()  # (ru_maxrss: kilobytes on Linux)


def measured_import(project: Path, store: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``eventmem import server-memory`` process: its wall time, peak RSS and report."""
    command = [sys.executable, "-m", "eventmem", "import", "server-memory", str(store), "--json"]
    seconds, peak, out = measured(command, project, env)
    report: dict[str, Any] = json.loads(out)
    segments = sorted((project / ".eventmem" / "journal").glob("*.jsonl"))
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(peak, 1),
        "added": report["added"],
        "links_added": report["linksAdded"],
        "segments": len(segments),
        "journal_mb": round(sum(path.stat().st_size for path in segments) / 1_048_576, 1),
    }


def large_import(
    lines: int,
    env: dict[str, str],
    tmp: Path,
    segment_mb: int = 0,
    rolled_only: bool = False,
    baseline_tree: Path | None = None,
    rebuild_floor: bool = False,
) -> dict[str, Any]:
    entities = lines // 2
    memories = Corpus(11).memories(entities)
    store = server_memory(memories, tmp)
    runs: dict[str, Any] = {}
    rolled_limit = str(segment_mb * 1_048_576) if segment_mb else ""
    plan: list[tuple[str, str, Path | None]] = [
        ("one_segment", "1073741824", None),
        ("rolled_over", rolled_limit, None),
    ]
    plan = plan[1:] if rolled_only else plan
    if baseline_tree is not None:
        plan.append(("baseline_rolled_over", rolled_limit, baseline_tree.resolve()))
    for label, limit, tree in plan:
        project = tmp / label / "project"
        project.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        run_env = dict(env, EVENTMEM_MAX_SEGMENT_BYTES=limit) if limit else dict(env)
        run_env["EVENTMEM_GLOBAL_DIR"] = str(tmp / label / "global")  # (each embeds its texts: no shared cache)
        if tree is not None:  # (before the installed eventmem on the path)
            run_env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
        runs[label] = measured_import(project, store, run_env)
        if tree is not None:
            runs[label]["tree"] = subprocess.run(
                ["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True, text=True
            ).stdout.strip()
        log(f"large import ({label}): {runs[label]}")
    if rebuild_floor:
        project = tmp / "rolled_over" / "project"
        rebuild_env = dict(env, EVENTMEM_GLOBAL_DIR=str(tmp / "rebuild" / "global"))  # (it embeds every text)
        seconds, peak, _ = measured([sys.executable, "-m", "eventmem", "rebuild"], project, rebuild_env)
        runs["rebuild_of_the_import"] = {"seconds": round(seconds, 2), "peak_rss_mb": round(peak, 1)}
        log(f"rebuild of the imported project: {runs['rebuild_of_the_import']}")
    result: dict[str, Any] = {
        "lines": len(store.read_text(encoding="utf-8").splitlines()),
        "store_mb": round(store.stat().st_size / 1_048_576, 1),
        "max_segment_bytes": f"{segment_mb} MiB" if segment_mb else "default (64 MiB)",
        **runs,
    }
    if baseline_tree is not None:
        rolled, base = runs["rolled_over"], runs["baseline_rolled_over"]
        result["time_ratio_to_baseline_tree"] = round(rolled["seconds"] / base["seconds"], 3)
        result["memory_ratio_to_baseline_tree"] = round(rolled["peak_rss_mb"] / base["peak_rss_mb"], 3)
    if rebuild_floor:
        floor = runs["rebuild_of_the_import"]["peak_rss_mb"]
        result["memory_ratio_to_rebuild"] = round(runs["rolled_over"]["peak_rss_mb"] / floor, 3)
    if rolled_only:
        result["baseline"] = "not run (--rolled-only): the one-segment import would double the time"
        return result
    rolled, single = runs["rolled_over"], runs["one_segment"]
    result["time_ratio_rolled_over_to_one_segment"] = round(rolled["seconds"] / single["seconds"], 3)
    result["memory_ratio_rolled_over_to_one_segment"] = round(rolled["peak_rss_mb"] / single["peak_rss_mb"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 memories per format (smoke test)")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--large", type=int, default=0, metavar="LINES", help="measure one large server-memory import")
    parser.add_argument(
        "--segment-mb",
        type=int,
        default=0,
        help="--large: max_segment_bytes of the rolled-over run, in MiB (default 64)",
    )
    parser.add_argument(
        "--rolled-only",
        action="store_true",
        help="--large: only the rolled-over import (no one-segment baseline, so no ratios)",
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        metavar="DIR",
        help="--large: also run the rolled-over import with the eventmem of this checkout (ratios to it)",
    )
    parser.add_argument(
        "--rebuild-floor",
        action="store_true",
        help="--large: also measure eventmem rebuild of the imported project (its peak memory)",
    )
    args = parser.parse_args(argv)
    if args.large:
        with tempfile.TemporaryDirectory(prefix="eventmem-bench-interchange-") as tmp:
            env = dict(os.environ, EVENTMEM_GLOBAL_DIR=str(Path(tmp) / "global"))
            env.pop("EVENTMEM_MAX_SEGMENT_BYTES", None)
            large = large_import(
                args.large,
                env,
                Path(tmp),
                args.segment_mb,
                args.rolled_only,
                args.baseline_tree,
                args.rebuild_floor,
            )
        text = json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "load_average_1m_at_end": round(os.getloadavg()[0], 1),
                    "machine_loaded": os.getloadavg()[0] > (os.cpu_count() or 1),
                },
                "large_import": large,
            },
            indent=2,
        )
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0
    if args.quick:
        args.memories = 200
    memories = Corpus(11).memories(args.memories)
    env = dict(os.environ)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-interchange-") as tmp:
        env["EVENTMEM_GLOBAL_DIR"] = str(Path(tmp) / "global")
        for name, write in WRITERS.items():
            folder = Path(tmp) / name
            project = folder / "project"
            project.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(project)], check=True)
            store = write(memories, folder)
            seconds, report = import_once(project, name, store, env)
            again, second = import_once(project, name, store, env, "--dry-run")
            log(f"{name}: {report['added']} memories in {seconds:.2f}s; again (dry run) {again:.2f}s")
            results[name] = {
                "added": report["added"],
                "links_added": report["linksAdded"],
                "problems": len(report["problems"]),
                "seconds": round(seconds, 3),
                "memories_per_second": round(report["added"] / seconds, 1),
                "second_import_dry_run_seconds": round(again, 3),
                "second_import_unchanged": second["unchanged"],
            }
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "memories": args.memories,
        "formats": results,
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
