"""The ``eventmem`` command: ``serve`` for MCP clients, and the same service for people.

Human-readable output by default; ``--json`` prints the objects the MCP tools return.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

import msgspec

from eventmem import __version__
from eventmem.adapters.http.cli import add_http_options
from eventmem.config import config_template
from eventmem.errors import EventmemError, InvalidInput
from eventmem.events import KINDS
from eventmem.files import atomic_write
from eventmem.progress import ProgressBar
from eventmem.project import ProjectPaths, RootChoice, find_root
from eventmem.query import Filters
from eventmem.terminal import EscapingStream, print_json, printable
from eventmem.validation import check_whole

if TYPE_CHECKING:
    from eventmem.audit import AuditReport, Finding

__all__ = [
    "Parser",
    "ProgressBar",
    "chosen_root",
    "command_options",
    "configure_logging",
    "global_options",
    "main",
    "run_command",
]


def chosen_root(flag: str | None, *, create: bool = False) -> RootChoice:
    """The project root from ``--root``, else :func:`~eventmem.project.find_root`; it must be an existing
    folder (a mistyped path must not quietly start a new memory), unless ``create`` (``eventmem init``)."""
    root = RootChoice(Path(flag).expanduser().resolve(), "flag:--root") if flag else find_root()
    if create and not root.root.exists():
        root.root.mkdir(parents=True)
    if not root.root.exists():
        raise InvalidInput(
            f"the project root {root.root} (chosen by {root.source}) does not exist; "
            "check the path, or create a memory there with `eventmem init --root PATH`"
        )
    if not root.root.is_dir():
        raise InvalidInput(f"the project root {root.root} (chosen by {root.source}) is not a folder")
    return root


def _root(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


def _open(args: argparse.Namespace) -> Any:
    from eventmem.service import open_service

    return open_service(_root(args))


def _show_memory(memory: Any) -> None:
    print(f"{memory.id}  [{memory.kind}] {memory.status}  importance {memory.importance}")
    if memory.title:
        print(f"title:    {printable(memory.title)}")
    print(f"summary:  {printable(memory.summary)}")
    if memory.tags:
        print(f"tags:     {printable(', '.join(memory.tags))}")
    print(f"created:  {memory.created_at} by {printable(memory.created_by or '-')}")
    print(f"updated:  {memory.updated_at} by {printable(memory.updated_by or '-')}")
    if memory.expires_at:
        print(f"expires:  {memory.expires_at}")
    print()
    print(printable(memory.content, multiline=True))


def cmd_serve(args: argparse.Namespace) -> int:
    from eventmem.mcp_server import build_server, terminate

    if getattr(args, "http", False):
        from eventmem.adapters.http.cli import serve_http

        return serve_http(args, lambda: _root(args))
    root = _root(args)
    logging.getLogger("eventmem").info("serving %s (%s)", root.root, root.source)
    if sys.stdin.isatty():
        from eventmem.mcp_server import waiting_notice

        print(printable(waiting_notice(root)), file=sys.stderr, flush=True)
    # SIGTERM: let a save in progress finish, then exit (stdin's reader thread cannot be joined)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: terminate())
    try:
        build_server(root, tools=args.tools).run("stdio")
    except KeyboardInterrupt:
        pass
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    root = chosen_root(args.root, create=True)
    paths = ProjectPaths(root.root)
    paths.ensure()
    paths.inside(paths.archive_dir, kind="folder", create=True)
    if not os.path.lexists(paths.config_file):
        atomic_write(paths.config_file, config_template().encode(), durable=False)
    result: dict[str, Any] = {"root": str(root.root), "root_source": root.source, "memory_dir": str(paths.base)}
    if args.git_drivers:
        from eventmem.gitdrivers import install

        result["git"] = install(paths)
    if args.git_hooks:
        from eventmem.gitdrivers import install_pre_push

        result["pre_push_hook"] = install_pre_push(root.root)
    if args.json:
        print_json(result)
    else:
        print(f"eventmem memory ready in {paths.base} (root chosen by {root.source})")
        print("Commit .eventmem/ with your code; its cache/ is ignored.")
        if args.git_drivers:
            where = "this clone's .git/config" if result["git"]["git_config"] else "nowhere (not a git repository)"
            print(f"git: diff=eventmem in .eventmem/.gitattributes; the driver is configured in {where}")
        if args.git_hooks:
            print(f"git: pre-push hook {result['pre_push_hook']}")
    return 0


TAGS_HELP = "repeat it, or separate tags with commas"
TYPE_HELP = ", ".join(KINDS)


def _listed(values: list[str] | None) -> list[str] | None:
    """Repeated options, each of which may also hold comma-separated values, as one list."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def cmd_save(args: argparse.Namespace) -> int:
    text = args.text if args.text != "-" else sys.stdin.read()
    service = _open(args)
    saved = service.save_result(
        text,
        title=args.title or "",
        summary=args.summary,
        tags=_listed(args.tag),
        kind=args.type,
        importance=args.importance,
        ttl_seconds=args.ttl,
        scope=args.scope,
        by=args.by or os.environ.get("USER", "cli"),
    )
    memory = saved.memory
    try:
        service.close()
    except (OSError, EventmemError) as exc:  # the journal has the memory; only the derived cache is behind
        _warn(f"saved, but the cache could not be written ({_failure(exc)}); it is rebuilt on a later call")
    if args.json:
        print_json({"status": "success", "memory": memory} | ({"section": saved.section} if saved.section else {}))
    elif saved.section:
        print(f"updated the project-context section {saved.section} ({memory.id}): {printable(memory.summary)}")
    else:
        print(f"saved {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    service = _open(args)
    filters = Filters(
        kinds=tuple(_listed(args.type) or ()),
        tags=tuple(_listed(args.tag) or ()),
        scope=args.scope,
        min_importance=args.min_importance,
    )
    hits = service.recall(
        " ".join(args.query), limit=args.limit, filters=filters, mode=args.mode, include_content=args.json
    )
    if args.json:
        print_json({"status": "success", "results": hits})
    elif not hits:
        print("no memories match")
    else:
        for hit in hits:
            tags = f"  #{' #'.join(hit.tags)}" if hit.tags else ""
            print(f"{hit.score:6.3f}  {hit.id}  [{hit.kind}] {printable(hit.summary + tags)}")
    for warning in service.warnings():
        _warn(warning)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    service = _open(args)
    memory = service.get(args.id)
    if args.json:
        print_json({"status": "success", "memory": memory})
    else:
        _show_memory(memory)
    return 0


UPDATE_FLAGS = ("content", "title", "summary", "tag", "type", "importance", "ttl")


def cmd_update(args: argparse.Namespace) -> int:
    if all(getattr(args, name) is None for name in UPDATE_FLAGS):
        flags = ", ".join(f"--{name}" for name in UPDATE_FLAGS)
        raise InvalidInput(f"nothing to update: give at least one of {flags}")
    service = _open(args)
    ttl: Any = "unchanged"
    if args.ttl is not None:
        ttl = None if args.ttl == 0 else args.ttl
    memory = service.update(
        args.id,
        content=args.content,
        title=args.title,
        summary=args.summary,
        tags=_listed(args.tag),
        kind=args.type,
        importance=args.importance,
        ttl_seconds=ttl,
        by=args.by or os.environ.get("USER", "cli"),
    )
    if args.json:
        print_json({"status": "success", "memory": memory})
    else:
        print(f"updated {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    service = _open(args)
    memory = service.delete(args.id, reason=args.reason or "", by=args.by or os.environ.get("USER", "cli"))
    if args.json:
        print_json({"status": "success", "id": memory.id, "deleted": True})
    else:
        print(f"deleted {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    service = _open(args)
    memory, restored = service.restore(args.id, reason=args.reason or "", by=args.by or os.environ.get("USER", "cli"))
    if args.json:
        print_json({"status": "success", "memory": memory, "restored": restored})
    elif restored:
        print(f"restored {memory.id}: {printable(memory.summary)}")
    else:
        print(f"{memory.id} is live: nothing to restore")
    return 0


def _describe(event: dict[str, Any]) -> str:
    kind = event["type"]
    who = f" by {event['by']}" if event.get("by") else ""
    target = event.get("memory") or event.get("link") or ""
    detail = ""
    if kind == "saved":
        detail = f" [{event.get('kind', 'general')}] {event.get('summary') or event.get('content', '')[:80]}"
    elif kind == "updated":
        fields = [k for k in event if k not in {"type", "id", "ts", "by", "memory", "segment", "offset"}]
        detail = f" fields: {', '.join(fields)}"
    elif kind == "linked":
        detail = f" {event['source']} -{event.get('relation', 'related_to')}-> {event['target']}"
    elif event.get("reason"):
        detail = f" ({event['reason']})"
    return printable(f"{event['ts']}  {kind:<9} {target}{who}{detail}")


def cmd_log(args: argparse.Namespace) -> int:
    check_whole(args.limit, "log_limit", "--limit")
    service = _open(args)
    events = service.history(args.id, limit=args.limit)
    if args.json:
        print_json(events)
    elif not events:
        print(f"no history for {printable(args.id)}" if args.id else "the journal is empty")
    else:
        for event in events:
            print(_describe(event))
    return 0 if events or not args.id else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from eventmem.codec import LineError, UnknownEvent, decode_line
    from eventmem.journaldiff import diff_files, diff_specs, show

    if args.textconv:  # one sentence per line, so git's line diff reads as sentences
        with open(args.textconv, "rb") as handle:
            for line in handle:
                try:
                    event = decode_line(line.rstrip(b"\n"))
                except LineError as exc:
                    print(printable(f"(not an event: {exc})"))
                    continue
                if isinstance(event, UnknownEvent):
                    print(printable(f"{event.ts}  {event.type:<9} (event type from a newer eventmem, kept)"))
                else:
                    print(_describe(msgspec.to_builtins(event)))
        return 0
    if args.git_driver:  # git's external diff: path old-file old-hex old-mode new-file new-hex new-mode
        path, old_file, _, _, new_file, _, _ = args.git_driver
        name = path.split(".eventmem/", 1)[-1]
        diff = diff_files(old_file, new_file, name)
    else:
        diff = diff_specs(_root(args).root, args.old, args.new)
    show(diff, as_json=args.json)
    return 0


def cmd_pr_summary(args: argparse.Namespace) -> int:
    from eventmem.history import default_base
    from eventmem.journaldiff import pr_summary, render_markdown

    root = _root(args).root
    base = args.base or default_base(root)
    diff, fork = pr_summary(root, base, args.head)
    if args.json:
        print_json({"base": base, "fork_point": fork, "diff": diff})
    else:
        sys.stdout.write(render_markdown(diff))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    service = _open(args)
    stats = service.stats()
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
    from eventmem.ids import iso_to_epoch

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
    service = _open(args)
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

    service = open_service(_root(args), load=False)
    bar = ProgressBar("rebuilding")
    embedding = ProgressBar(f"embedding with {service.project.embedder.model_id}")
    service.project.embed_progress = embedding
    started = time.perf_counter()
    count = service.project.rebuild(progress=bar, wait=False)
    ready = time.perf_counter() - started
    bar.close()
    embedding.close()
    service.project.wait_snapshot()  # (written by a thread while the bars closed)
    elapsed = time.perf_counter() - started
    result = {"status": "success", "events": count, "seconds": round(elapsed, 3), "ready_seconds": round(ready, 3)}
    if args.json:
        print_json(result)
    else:
        print(f"rebuilt from {count} events in {elapsed:.2f}s (answers ready after {ready:.2f}s, then the snapshot)")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from eventmem.audit import conflicting_ids, future_stamps
    from eventmem.gitdrivers import check as check_git_drivers
    from eventmem.service import open_service

    root = _root(args)
    paths = ProjectPaths(root.root)
    service = open_service(root)
    store = service.project
    segments = store.journal.segments()
    torn = []
    corrupt: list[dict[str, Any]] = []  # full scan: store.problems misses lines a loaded snapshot covers
    for segment in segments:
        result = store.journal.scan(segment.path, 0, name=segment.name)
        corrupt.extend({"segment": p.path, "offset": p.offset, "reason": p.reason} for p in result.corrupt)
        if result.torn_tail:
            torn.append({"segment": segment.name, "bytes": result.torn_tail})
    snapshot = paths.cache_dir / "snapshot.bin"
    conflicts = [msgspec.to_builtins(d) for d in conflicting_ids(paths)]
    ahead = [msgspec.to_builtins(s) for s in future_stamps(paths)]
    audited, findings = _doctor_findings(paths)
    report: dict[str, Any] = {
        "root": str(root.root),
        "root_source": root.source,
        "memory_dir": str(paths.base),
        "memory_dir_exists": paths.base.exists(),
        "writer": paths.writer_id() if paths.base.exists() else None,
        "branch": paths.branch(),
        "segments": [{"name": s.name, "bytes": s.size} for s in segments],
        "corrupt_lines": corrupt,
        "torn_tails": torn,
        "quarantined": store.journal.quarantined(),
        "unknown_event_types": dict(store.state.unknown),
        "refused_segments": dict(store.journal.refused),
        "ignored_settings": service.ignored_settings,
        "allowed_settings": service.allowed_settings,
        "conflicting_ids": conflicts,
        "future_stamps": ahead,
        "cache": {
            "snapshot_bytes": snapshot.stat().st_size if snapshot.exists() else 0,
            "vector_index_bytes": sum(f.stat().st_size for f in paths.cache_dir.glob("vectors-*.faiss")),
            "embedder": store.embedder.model_id,
            "cached_embeddings": len(store.embeddings),
        },
        "git_drivers": check_git_drivers(paths),
        "findings": findings,
    }
    report["healthy"] = (
        not corrupt
        and audited.ok
        and not conflicts
        and not store.journal.refused
        and all(driver["problem"] is None for driver in report["git_drivers"])
    )
    set_verdict(0 if report["healthy"] else 1)
    if args.json:
        print_json(report)
    else:
        print(f"root:        {report['root']}  (chosen by {report['root_source']})")
        print(f"memory dir:  {report['memory_dir']}{'' if report['memory_dir_exists'] else '  (not created yet)'}")
        writer = report["writer"] or "(none yet: given on the first save)"
        print(f"writer:      {writer} on branch {report['branch']}")
        for seg in report["segments"]:
            print(f"segment:     {printable(str(seg['name']))} ({seg['bytes']} bytes)")
        for problem in report["corrupt_lines"]:
            print(printable(f"CORRUPT:     {problem['segment']} at byte {problem['offset']}: {problem['reason']}"))
        for item in torn:
            torn_name = printable(str(item["segment"]))
            print(f"torn tail:   {torn_name}: {item['bytes']} bytes (quarantined and cut by the next write)")
        for note in report["quarantined"]:
            print(printable(f"WARNING:     {note}"))
        for name, reason in store.journal.refused.items():
            print(printable(f"REFUSED:     {name}: {reason}"))
        for line in service.ignored_settings:
            print(printable(f"ignored:     {line}"))
        for line in service.allowed_settings:
            print(printable(f"allowed:     {line} (by `eventmem allow`)"))
        for item in conflicts:
            places = ", ".join(f"{place['segment']} at byte {place['offset']}" for place in item["locations"])
            folded = item["folded"]
            kept = f"; folded: {folded['segment']} at byte {folded['offset']}" if folded else ""
            print(printable(f"CONFLICT:    event id {item['id']} on lines that differ: {places}{kept}"))
        for item in ahead:
            print(
                printable(
                    f"future:      {item['segment']} at byte {item['offset']}: event {item['event']} stamped "
                    f"{item['ts']}, {item['seconds']:.0f} s ahead of this clock"
                )
            )
        for finding in findings:  # (those told above are left out)
            if finding.code in ("corrupt-line", "torn-tail", "future-stamp"):
                continue
            if finding.code == "duplicate-id" and finding.severity == "error":
                continue
            print(f"finding:     {finding.render()}")
        cache = report["cache"]
        print(
            f"cache:       snapshot {cache['snapshot_bytes']} bytes, vector index files {cache['vector_index_bytes']} "
            f"bytes, embedder {store.embedder.model_id}"
        )
        for driver in report["git_drivers"]:
            verdict = "runs" if driver["problem"] is None else f"PROBLEM: {driver['problem']}"
            print(printable(f"git driver:  {driver['key']} = {driver['command']}: {verdict}"))
        advice = "run `eventmem replay audit`" if corrupt else "see above"
        print("healthy" if report["healthy"] else f"PROBLEMS FOUND: {advice}")
    return 0 if report["healthy"] else 1


def cmd_allow(args: argparse.Namespace) -> int:
    """``eventmem allow``: approve the tracked config as it is now (its settings that reach the
    network take effect until the file changes); ``--revoke`` withdraws it."""
    from eventmem.config import allow, revoke

    paths = ProjectPaths(_root(args).root)
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


def _doctor_findings(paths: ProjectPaths) -> tuple[AuditReport, list[Finding]]:
    """The audit of the journal (git history not consulted) and its findings, as ``check`` tells them."""
    from eventmem.audit import audit, findings

    report = audit(paths, use_git=False)
    return report, findings(report)


def cmd_check(args: argparse.Namespace) -> int:
    from eventmem.check import check_branch

    report = check_branch(_root(args).root, args.base, args.head)
    set_verdict(0 if report.ok else 1)
    if args.json:
        print_json({"ok": report.ok, **msgspec.to_builtins(report)})
        return 0 if report.ok else 1
    for finding in report.findings:
        print(finding.render())
    chosen = " (chosen: origin/HEAD, else main, else master)" if report.base_chosen else ""
    verdict = "ok" if report.ok else "FAILED"
    print(
        f"check {verdict}: {len(report.findings)} finding(s) in {report.events_added} added event(s); "
        f"base {printable(report.base)}{chosen}, merge base {report.fork[:12]}"
    )
    return 0 if report.ok else 1


def cmd_import(args: argparse.Namespace) -> int:
    """``eventmem import pmp <dir>``: an ``.ai/`` directory of the shared project-memory protocol."""
    from eventmem.project_context import ProjectContext

    service = _open(args)
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


class Parser(argparse.ArgumentParser):
    """argparse, with the user's input in its error messages shown escaped."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


JSON_HELP = "print JSON (the objects MCP tools return)"
ROOT_HELP = "project root, an existing folder (default: EVENTMEM_ROOT, else found from the cwd)"


def global_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--root`` before the command."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    parser.add_argument("--root", help=ROOT_HELP)


def command_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--root`` after the command too (given there, they win over the ones before)."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    parser.add_argument("--root", default=argparse.SUPPRESS, help=ROOT_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="eventmem", description="Event-sourced project memory for AI agents.", epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"eventmem {__version__}")
    global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        command_options(p)
        p.set_defaults(func=fn)
        return p

    p = add("serve", cmd_serve, "run the stdio MCP server for this project")
    p.add_argument("--tools", help="tool families to expose, comma-separated, or 'all' (default: EVENTMEM_TOOLS)")
    add_http_options(p)
    p = add("init", cmd_init, "create .eventmem/ (config and .gitignore) in the project")
    p.add_argument(
        "--git-drivers",
        action="store_true",
        help="also mark segments diff=eventmem in .eventmem/.gitattributes and configure that diff driver",
    )
    p.add_argument("--git-hooks", action="store_true", help="also install a pre-push hook that runs `eventmem check`")
    p = add("save", cmd_save, "save a memory ('-' reads the text from stdin)")
    p.add_argument("text")
    p.add_argument("--title")
    p.add_argument("--summary")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help=TAGS_HELP)
    p.add_argument("--type", "--kind", dest="type", default="general", help=TYPE_HELP)
    p.add_argument("--importance", type=float, default=0.5)
    p.add_argument("--ttl", type=int, help="seconds until it expires")
    p.add_argument("--scope", default="project", choices=["project", "global"])
    p.add_argument("--by", help="who is saving (default: $USER)")
    p = add("search", cmd_search, "hybrid search of the memory")
    p.add_argument("query", nargs="+")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--type", "--kind", dest="type", action="append", help="only these types (" + TYPE_HELP + ")")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help="only memories with every tag given")
    p.add_argument("--scope", choices=["project", "global", "all"])
    p.add_argument("--min-importance", type=float)
    p.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    p = add("show", cmd_show, "show one memory")
    p.add_argument("id")
    p = add("update", cmd_update, "change fields of a memory")
    p.add_argument("id")
    p.add_argument("--content")
    p.add_argument("--title")
    p.add_argument("--summary")
    p.add_argument("--tag", "--tags", dest="tag", action="append", help="the new tags: " + TAGS_HELP)
    p.add_argument("--type", "--kind", dest="type", help=TYPE_HELP)
    p.add_argument("--importance", type=float)
    p.add_argument("--ttl", type=int, help="seconds; 0 makes it long-term")
    p.add_argument("--by")
    p = add("delete", cmd_delete, "delete a memory (its history is kept)")
    p.add_argument("id")
    p.add_argument("--reason")
    p.add_argument("--by")
    p = add("restore", cmd_restore, "bring back a deleted or expired memory (and the links its delete removed)")
    p.add_argument("id")
    p.add_argument("--reason")
    p.add_argument("--by")
    p = add("log", cmd_log, "history of one memory, or of all")
    p.add_argument("id", nargs="?")
    p.add_argument("--limit", type=int, default=200, help="at most this many events, newest")
    add("stats", cmd_stats, "counts by type, status and tag")
    add("rebuild", cmd_rebuild, "drop the cache and rebuild every projection from the journal")
    p = add("compact", cmd_compact, "expire memories past their TTL and archive old deleted/expired history")
    p.add_argument("--now", help="the time to compact at (ISO-8601; default: now; a later time needs --dry-run)")
    p.add_argument("--dry-run", action="store_true", help="list what would be expired and archived; write nothing")
    p.add_argument("--no-archive", action="store_true", help="only write expiry events")
    p.add_argument("--by", help="who is compacting (default: $USER)")
    add("doctor", cmd_doctor, "which root was chosen and why, journal health, cache state")
    p = add("allow", cmd_allow, "let the tracked .eventmem/config.toml use the network, as it is now")
    p.add_argument("--revoke", action="store_true", help="withdraw the approval")
    p = add("check", cmd_check, "fail a branch whose journal would harm whoever merges it (for CI and hooks)")
    p.add_argument("--base", help="the revision to compare with (default: origin/HEAD, else main, else master)")
    p.add_argument("--head", default="HEAD", help="the revision to check (default: HEAD)")
    p = add("import", cmd_import, "turn an existing .ai/ directory (project-memory protocol) into events")
    p.add_argument("format", choices=["pmp"], help="pmp: the shared project-memory protocol's .ai/ files")
    p.add_argument("dir", help="the directory, such as .ai")
    p.add_argument("--force", action="store_true", help="take a section from the file even if changed since")
    p = add("diff", cmd_diff, "memory-level changes between two journals or git revisions")
    p.add_argument("old", nargs="?", default="HEAD", help="a git revision or a path (default: HEAD)")
    p.add_argument("new", nargs="?", default="WORKTREE", help="a git revision or a path (default: the working tree)")
    p.add_argument("--textconv", metavar="FILE", help="print a segment one sentence per event (git textconv)")
    p.add_argument("--git-driver", nargs=7, metavar="ARG", help="the seven arguments git gives a diff command")
    p = add("pr-summary", cmd_pr_summary, "this branch's memory changes as markdown for a pull request")
    p.add_argument("base", nargs="?", help="the branch the pull request targets (default: origin/HEAD, main, master)")
    p.add_argument("--head", default="HEAD", help="the revision the pull request brings (default: HEAD)")
    from eventmem import replay

    description = "rebuild, audit, time travel and history of the journal (also tools/replay.py)"
    p = sub.add_parser("replay", help=description, description=description)
    command_options(p)
    replay.add_commands(p.add_subparsers(dest="replay_command", required=True, metavar="command"), command_options)
    return parser


class _PrintableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), multiline=True)


def configure_logging() -> None:
    """Logs go to stderr (stdout belongs to the MCP protocol and to --json), at EVENTMEM_LOG_LEVEL,
    with control characters shown escaped (a log line may quote a journal's bytes)."""
    level = os.environ.get("EVENTMEM_LOG_LEVEL", "WARNING").strip().upper() or "WARNING"
    known = isinstance(logging.getLevelName(level), int)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("eventmem %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level if known else "WARNING", handlers=[handler])
    if not known:
        logging.getLogger("eventmem").warning(
            "EVENTMEM_LOG_LEVEL=%r is not a level (DEBUG, INFO, WARNING, ERROR); using WARNING", level
        )


EXIT_CODES = """exit codes: 0 done; 1 the command failed (a disk or journal problem, doctor or audit found
problems, log found no history); 2 bad usage or input (nothing was written). A closed pipe
(eventmem log | head) ends quietly with 0. EVENTMEM_DEBUG=1 shows the traceback of an unexpected error."""


def _warn(message: str) -> None:
    print(f"eventmem: warning: {printable(message)}", file=sys.stderr)


def _failure(exc: BaseException) -> str:
    """One line saying what went wrong: for an OS error, the reason and the file."""
    if isinstance(exc, OSError) and exc.strerror:
        files = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
        return f"{exc.strerror}: {' -> '.join(files)}" if files else exc.strerror
    return str(exc) or type(exc).__name__


def _fail(message: str, code: int, as_json: bool, prog: str) -> int:
    if as_json:
        try:
            print_json({"status": "error", "error": message})
            sys.stdout.flush()
        except OSError:
            pass
    print(f"{prog}: {printable(message)}", file=sys.stderr)
    return code


_VERDICT: dict[str, int] = {}
"""The exit code a command that judges (doctor, check, replay audit) reached before printing."""


def set_verdict(code: int) -> None:
    """Record a judging command's exit code before it prints: a reader that goes away early
    (``eventmem check | head``) must not turn a failed check into a success."""
    _VERDICT["code"] = code


def _quiet_stdout() -> None:
    """The reader went away (``eventmem log | head -1``): drop the rest of the output, as Unix tools do."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, *, prog: str = "eventmem") -> int:
    """Run one command behind the error boundary: every failure is one line on stderr and an exit code
    (:data:`EXIT_CODES`); human-readable output passes through :class:`~eventmem.terminal.EscapingStream`."""
    as_json = bool(getattr(args, "json", False))
    stdout = sys.stdout
    if not as_json and func is not cmd_serve:
        sys.stdout = cast(TextIO, EscapingStream(stdout))
    _VERDICT.clear()
    try:
        code = func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return _VERDICT.get("code", 0)
    except KeyboardInterrupt:
        return 130
    except InvalidInput as exc:
        return _fail(str(exc), 2, as_json, prog)
    except (EventmemError, OSError) as exc:
        return _fail(_failure(exc), 1, as_json, prog)
    except Exception as exc:
        debug = os.environ.get("EVENTMEM_DEBUG", "").strip() not in ("", "0")
        if debug:
            traceback.print_exc()
        where = "the traceback is above" if debug else "run it again with EVENTMEM_DEBUG=1 for the traceback"
        command = " ".join(
            str(part) for part in (getattr(args, "command", None), getattr(args, "replay_command", None)) if part
        )
        what = f"`{prog} {command}`" if command else f"`{prog}`"
        return _fail(f"{what} failed unexpectedly ({type(exc).__name__}: {_failure(exc)}); {where}", 1, as_json, prog)
    finally:
        sys.stdout = stdout


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
