"""The commands that look after a project's memory: stats, compact, rebuild, allow, import."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from eventmem.adapters.cli.roots import close_service, open_service_of, render_view, root_of
from eventmem.adapters.progress import ProgressBar
from eventmem.core.errors import InvalidInput
from eventmem.core.terminal import print_json, printable
from eventmem.journal.project import ProjectPaths

__all__ = ["cmd_allow", "cmd_compact", "cmd_import", "cmd_rebuild", "cmd_stats"]


def cmd_stats(args: argparse.Namespace) -> int:
    service = open_service_of(args)
    stats = service.stats()
    close_service(service)
    if args.json:
        print_json(stats)
    else:
        print(f"root:      {stats['root']} ({stats['root_source']})")
        print(f"memories:  {stats['memories']} live, by status {stats['by_status']}")
        print(f"by type:   {stats['by_kind']}")
        print(f"links:     {stats['links']}")
        print(f"events:    {stats['events']} in {stats['segments']} segment(s), {stats['journal_bytes']} bytes")
        if stats["top_tags"]:
            print(printable(f"top tags:  {', '.join(f'{t} ({n})' for t, n in stats['top_tags'].items())}"))
        if stats["unknown_events"]:
            print(printable(f"unknown event types (kept, skipped): {stats['unknown_events']}"))
        for problem in stats["corrupt_lines"]:
            print(printable(f"CORRUPT:   {problem['segment']} at byte {problem['offset']}: {problem['reason']}"))
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from eventmem.core.ids import iso_to_epoch

    now: float | None = None
    if args.now:
        try:
            now = iso_to_epoch(args.now)
        except (ValueError, OverflowError, OSError):
            raise InvalidInput(
                f"--now {args.now!r} is not an ISO-8601 time: give a date or time such as 2026-03-01T12:00:00Z"
            ) from None
        if now > time.time() and not args.dry_run:
            raise InvalidInput(
                f"--now {args.now} is later than the clock: compacting then would write events stamped in the "
                "future into the journal; add --dry-run to see what would happen"
            )
    service = open_service_of(args)
    try:
        by = args.by or os.environ.get("USER", "cli")
        report = service.compact(now=now, by=by, archive=not args.no_archive, dry_run=args.dry_run)
    finally:
        service.close()
    if args.dry_run:
        return _show_compact_preview(args, report)
    if args.json:
        print_json({"status": "success", **report})
    else:
        print(f"expired {len(report['expired'])} memor{'y' if len(report['expired']) == 1 else 'ies'}")
        for item in report["archived"]:
            print(
                f"archived the history of {item['memories']} memories ({item['events']} events) into "
                f"{item['segment']}; {item['rewritten']} {item['bytes_before']} -> {item['bytes_after']} bytes"
            )
        if not report["archived"]:
            print("nothing to archive")
    return 0


def _show_compact_preview(args: argparse.Namespace, report: dict[str, Any]) -> int:
    if args.json:
        print_json({"status": "success", **report})
        return 0
    print(f"dry run at {report['now']}: nothing written")
    print(f"would expire {len(report['would_expire'])}: {printable(' '.join(report['would_expire']) or '-')}")
    archive = printable(" ".join(report["would_archive"]) or "-")
    print(f"would archive the history of {len(report['would_archive'])}: {archive}")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from eventmem.service import open_service

    service = open_service(root_of(args), load=False)
    bar = ProgressBar("rebuilding")
    embedding = ProgressBar(f"embedding with {service.model_id}")
    started = time.perf_counter()
    count = service.rebuild(bar, embedding=embedding, wait=False)["events"]
    ready = time.perf_counter() - started
    bar.close()
    embedding.close()
    service.wait_snapshot()  # (written by a thread while the bars closed)
    elapsed = time.perf_counter() - started
    render_view(service)  # the view from the rebuilt fold (a clone without a server may hold a stale one)
    result = {"status": "success", "events": count, "seconds": round(elapsed, 3), "ready_seconds": round(ready, 3)}
    if args.json:
        print_json(result)
    else:
        print(f"rebuilt from {count} events in {elapsed:.2f}s (answers ready after {ready:.2f}s, then the snapshot)")
    return 0


def cmd_allow(args: argparse.Namespace) -> int:
    """``eventmem allow``: approve the tracked config as it is now (its settings that reach the
    network take effect until the file changes); ``--revoke`` withdraws it."""
    from eventmem.journal.config import allow, revoke

    paths = ProjectPaths(root_of(args).root)
    if args.revoke:
        done = revoke(paths.config_file)
        result: dict[str, Any] = {"status": "success", "revoked": done}
        message = "approval withdrawn" if done else "there was no approval to withdraw"
    else:
        settings = allow(paths.config_file)
        result = {"status": "success", "allowed": settings}
        listed = "".join(f"\n  {line}" for line in settings) or " (it asks for nothing that leaves the machine)"
        message = f"allowed {paths.config_file} as it is now; any change to it revokes this.{listed}"
    if args.json:
        print_json(result)
    else:
        print(message)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``eventmem import pmp <dir>``: an ``.ai/`` directory of the shared project-memory protocol."""
    from eventmem.context.project_context import ProjectContext

    service = open_service_of(args)
    try:
        report = ProjectContext(service).import_pmp(Path(args.dir), force=args.force)
    finally:
        service.close()
    if args.json:
        print_json(report)
        return 0
    for counts in report["sections"].values():
        if counts["file"] is None:
            continue
        names = ("added", "updated", "unchanged", "kept", "placeholders")
        detail = ", ".join(f"{counts[k]} {k}" for k in names if counts[k])
        print(f"{counts['file']:<26} {detail or 'nothing to import'}")
    print(f"{report['events']} event(s) appended")
    if any(counts["kept"] for counts in report["sections"].values()):
        print("kept: sections changed in eventmem since the last import (use --force to take the file)")
    return 0
