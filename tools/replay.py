#!/usr/bin/env python3
"""Replay and inspect a project's memory journal: a thin command line over the eventmem library.

    python tools/replay.py rebuild [--json]   drop .eventmem/cache/ and rebuild every projection
    python tools/replay.py audit [--json]     check every line of every segment; exit 1 if not ok

The project is found like every eventmem entry point: ``--root``, else ``EVENTMEM_ROOT``, else the
nearest ``.eventmem/`` or ``.git`` walking up from the working directory. Runs from any directory,
with or without eventmem installed (the checkout it belongs to is used as a fallback).

Exit codes: 0 done / audit ok, 1 the audit found errors (warnings alone do not fail it),
2 the command could not run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

try:
    import eventmem  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from eventmem.audit import AuditReport, audit
from eventmem.cli import ProgressBar
from eventmem.errors import EventmemError
from eventmem.project import ProjectPaths, RootChoice, find_root
from eventmem.service import open_service


def _root(args: argparse.Namespace) -> RootChoice:
    if args.root:
        return RootChoice(Path(args.root).resolve(), "flag:--root")
    return find_root()


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False) + "\n")


# -- rebuild -----------------------------------------------------------------------------------


def cmd_rebuild(args: argparse.Namespace) -> int:
    root = _root(args)
    paths = ProjectPaths(root.root)
    dropped = paths.cache_dir.exists()
    if dropped:
        shutil.rmtree(paths.cache_dir)
    service = open_service(root, load=False)
    try:
        store = service.project
        bar = ProgressBar("rebuilding")
        started = time.perf_counter()
        events = store.rebuild(progress=bar)
        bar.close()
        elapsed = time.perf_counter() - started
        state = store.state
        segments = store.journal.segments()
        summary = {
            "status": "success",
            "root": str(root.root),
            "root_source": root.source,
            "cache_dropped": dropped,
            "events": events,
            "segments": len(segments),
            "journal_bytes": sum(s.size for s in segments),
            "memories": sum(1 for memory_id in state.memories if state.visible(memory_id) is not None),
            "links": sum(1 for link in state.links.values() if link.alive),
            "unknown_events": dict(state.unknown),
            "corrupt_lines": [
                {"segment": p.path, "offset": p.offset, "reason": p.reason} for p in store.problems.values()
            ],
            "seconds": round(elapsed, 3),
        }
    finally:
        service.close()
    if args.json:
        _print_json(summary)
    else:
        print(f"rebuilt {root.root} (root chosen by {root.source})")
        print(
            f"  {events} events from {summary['segments']} segment(s), {summary['journal_bytes']} bytes, "
            f"in {elapsed:.2f}s"
        )
        print(f"  {summary['memories']} live memories, {summary['links']} links")
        if state.unknown:
            print(f"  unknown event types (kept, skipped): {summary['unknown_events']}")
        for problem in store.problems.values():
            print(f"  skipped {problem}; run `python tools/replay.py audit` for details")
    return 0


# -- audit -------------------------------------------------------------------------------------


def _render(report: AuditReport, root: RootChoice) -> Iterator[str]:
    c = report.counts
    yield f"audit of {report.root} (root chosen by {root.source})"
    yield (
        f"  {c.segments} segment(s), {c.bytes} bytes, {c.events} events ({c.distinct_events} distinct), "
        f"{c.memories} memories, {c.links} links"
    )
    for line in report.corrupt_lines:
        yield f"ERROR    corrupt line: {line.segment} at byte {line.offset}: {line.reason}"
    for dup in report.duplicate_ids:
        where = ", ".join(f"{loc.segment} at byte {loc.offset}" for loc in dup.locations)
        if dup.identical:
            yield f"warning  event id {dup.id} appears {len(dup.locations)} times, identical: {where}"
        else:
            yield f"ERROR    event id {dup.id} appears {len(dup.locations)} times, with different content: {where}"
    for ref in report.unknown_references:
        what = {"link": "link", "memory": "memory"}.get(ref.role, f"{ref.role} memory")
        yield (
            f"ERROR    {ref.type} event {ref.event} is about unknown {what} {ref.missing}: "
            f"{ref.segment} at byte {ref.offset}"
        )
    for tail in report.torn_tails:
        yield (
            f"warning  torn tail: {tail.segment}: {tail.bytes} unterminated bytes at byte {tail.offset} "
            "(a write in progress or a crash; cut by the next write)"
        )
    for kind, count in report.unknown_types.items():
        yield f"info     {count} event(s) of unknown type {kind!r} (from a newer version; kept, skipped)"
    verdict = "ok" if report.ok else "PROBLEMS FOUND"
    yield f"{verdict}: {report.errors} error(s), {report.warnings} warning(s)"


def cmd_audit(args: argparse.Namespace) -> int:
    root = _root(args)
    report = audit(ProjectPaths(root.root))
    if args.json:
        data = msgspec.to_builtins(report)
        data.update(root_source=root.source, errors=report.errors, warnings=report.warnings)
        _print_json(data)
    else:
        for line in _render(report, root):
            print(line)
    return 0 if report.ok else 1


# -- entry point -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replay.py", description="Replay and inspect the eventmem journal.")
    parser.add_argument("--root", help="project root (default: EVENTMEM_ROOT, else found from the cwd)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--root", default=argparse.SUPPRESS, help="project root (overrides the one before)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(func=fn)
        return p

    add("rebuild", cmd_rebuild, "drop the cache and rebuild every projection from the journal")
    add("audit", cmd_audit, "check every journal line; exit 1 when anything is wrong")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("EVENTMEM_LOG_LEVEL", "WARNING").upper(),
        stream=sys.stderr,
        format="eventmem %(levelname)s %(name)s: %(message)s",
    )
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (EventmemError, OSError) as exc:
        print(f"replay.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
