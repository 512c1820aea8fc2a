"""Replay and inspect a project's memory journal: ``eventmem replay`` (and ``tools/replay.py``).

    eventmem replay rebuild [--json]   drop .eventmem/cache/ and rebuild every projection
    eventmem replay audit [--json]     check every line of every segment; exit 1 if not ok
    eventmem replay at WHEN [MEMORY]   the memory as of a time, an event id or a git revision
    eventmem replay log MEMORY         the history of one memory: what changed, who, when
    eventmem replay diff [OLD] [NEW]   memory-level changes between two journals or revisions

The project is found like every eventmem entry point: ``--root``, else ``EVENTMEM_ROOT``, else the
nearest ``.eventmem/`` or ``.git`` walking up from the working directory.

Exit codes: 0 done / audit ok, 1 the audit found errors (warnings alone do not fail it) or the
command failed, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from eventmem.adapters.command_line import (
    Parser,
    chosen_root,
    command_options,
    configure_logging,
    global_options,
    run_command,
    set_verdict,
)
from eventmem.adapters.progress import ProgressBar
from eventmem.core.terminal import print_json, printable
from eventmem.journal.project import ProjectPaths, RootChoice

if TYPE_CHECKING:
    from eventmem.review.audit_report import AuditReport

# The commands import the modules they use when they run: every ``eventmem`` command builds this
# parser, and ``eventmem serve`` and git's textconv should not pay for loading the history modules.

__all__ = ["add_commands", "build_parser", "main"]


def _root(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


# -- rebuild -----------------------------------------------------------------------------------


def cmd_rebuild(args: argparse.Namespace) -> int:
    from eventmem.service import open_service

    root = _root(args)
    paths = ProjectPaths(root.root)
    dropped = paths.cache_dir.exists()
    if paths.cache_dir.is_dir():
        shutil.rmtree(paths.cache_dir)
    elif dropped:  # a file where the cache folder belongs: the cache is derived, so it goes too
        paths.cache_dir.unlink()
    service = open_service(root, load=False)
    try:
        bar = ProgressBar("rebuilding")
        started = time.perf_counter()
        rebuilt = service.rebuild(bar, wait=False)
        ready = time.perf_counter() - started
        bar.close()
        service.wait_snapshot()
        elapsed = time.perf_counter() - started
        events, unknown = rebuilt["events"], rebuilt["unknown_events"]
        summary = {
            "status": "success",
            "root": str(root.root),
            "root_source": root.source,
            "cache_dropped": dropped,
            **rebuilt,
            "seconds": round(elapsed, 3),
            "ready_seconds": round(ready, 3),
        }
    finally:
        service.close()
    if args.json:
        print_json(summary)
    else:
        print(f"rebuilt {root.root} (root chosen by {root.source})")
        print(
            f"  {events} events from {summary['segments']} segment(s), {summary['journal_bytes']} bytes, "
            f"in {elapsed:.2f}s (answers ready after {ready:.2f}s, then the snapshot)"
        )
        print(f"  {summary['memories']} live memories, {summary['links']} links")
        if unknown:
            print(f"  unknown event types (kept, skipped): {summary['unknown_events']}")
        for problem in summary["corrupt_lines"]:
            line = f"{problem['segment']}: corrupt line at byte {problem['offset']}: {problem['reason']}"
            print(printable(f"  skipped {line}; run `eventmem replay audit` for details"))
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
    for skew in report.clock_skew:
        what = "in the future" if skew.problem == "future" else "away from the time in its id"
        yield (
            f"warning  clock skew: event {skew.event} by {skew.by or '?'} "
            f"is stamped {skew.ts}, {skew.seconds:.0f}s {what}: {skew.segment} at byte {skew.offset}"
        )
    for finding in report.trust:
        yield f"{'ERROR   ' if finding.severity == 'error' else 'warning '} {finding.render()}"
    for edit in report.concurrent_edits:
        yield f"info     {_concurrent(edit)}"
    verdict = "ok" if report.ok else "PROBLEMS FOUND"
    yield f"{verdict}: {report.errors} error(s), {report.warnings} warning(s)"


def cmd_audit(args: argparse.Namespace) -> int:
    from eventmem.review.audit import audit

    root = _root(args)
    report = audit(ProjectPaths(root.root))
    set_verdict(0 if report.ok else 1)
    if args.json:
        data = msgspec.to_builtins(report)
        data.update(root_source=root.source, errors=report.errors, warnings=report.warnings)
        print_json(data)
    else:
        for line in _render(report, root):
            print(printable(line))
    return 0 if report.ok else 1


# -- time travel, history, diff ---------------------------------------------------------------


def _concurrent(edit: Any) -> str:
    from eventmem.review.journaldiff_render import show_value

    wins, loses = edit.wins, edit.loses
    return (
        f"concurrent edit of {edit.memory} {show_value(edit.title, 40)}, {edit.field}: "
        f"{show_value(wins.value, 40)} ({wins.by or '?'}, {wins.ts}, {wins.segment}) wins over "
        f"{show_value(loses.value, 40)} ({loses.by or '?'}, {loses.ts}, {loses.segment}); "
        f"neither writer had seen the other's write (judged on {edit.evidence})"
    )


def cmd_at(args: argparse.Namespace) -> int:
    from eventmem.journal.history import as_of, memory_at
    from eventmem.review.journaldiff_render import show_value

    found = as_of(_root(args).root, args.when)
    records = [r for r in found.state.memories.values() if r.exists]
    views = sorted((memory_at(r, found.moment) for r in records), key=lambda v: (v["created_at"], v["id"]))
    if args.memory:
        view = next((v for v in views if v["id"] == args.memory), None)
        if args.json:
            print_json({"as_of": found.description, "memory": view})
        elif view is None:
            print(printable(f"{args.memory} did not exist {found.description}"))
        else:
            print(printable(f"{view['id']} {found.description}: [{view['kind']}] {view['status']}"))
            for key in ("title", "summary", "tags", "importance", "ttl_seconds", "created_at", "updated_at"):
                print(printable(f"  {key + ':':<12} {view[key]}"))
            print("\n" + printable(view["content"], multiline=True))
        return 0 if view is not None else 1
    shown = views if args.all else [v for v in views if v["status"] == "live"]
    if args.json:
        print_json({"as_of": found.description, "memories": shown})
        return 0
    print(printable(f"{found.description}: {sum(v['status'] == 'live' for v in views)} live memories of {len(views)}"))
    for view in shown:
        name = show_value(view["title"] or view["summary"], 60)
        print(printable(f"{view['id']}  [{view['kind']}] {view['status']:<8} {name}"))
    return 0


def _memory_named(history: Any, text: str) -> str:
    """The memory id ``text`` names in this journal: a ULID in any case, or a unique prefix of 6 or
    more characters (as ``eventmem show`` takes one)."""
    from eventmem.core.codec import UnknownEvent
    from eventmem.core.errors import InvalidInput
    from eventmem.core.events import memory_ids
    from eventmem.core.ids import canonical_id, looks_like_prefix

    wanted = canonical_id(text.strip())
    known = {
        m for entry in history.entries if not isinstance(entry.event, UnknownEvent) for m in memory_ids(entry.event)
    }
    if wanted in known or not looks_like_prefix(wanted):
        return wanted
    found = sorted(m for m in known if m.startswith(wanted.upper()))
    if len(found) > 1:
        raise InvalidInput(
            f"id prefix {wanted!r} is ambiguous: {len(found)} memories start with it ({', '.join(found[:5])})"
        )
    return found[0] if found else wanted


def _change(name: str, old: Any, new: Any) -> str:
    """One field's change in words: a long text by the words that changed (as ``eventmem diff`` shows
    them), anything else as ``old → new``."""
    from eventmem.review.journaldiff import field_words
    from eventmem.review.journaldiff_render import show_value

    words = field_words(old, new)
    return f"{name} {words}" if words else f"{name} {show_value(old, 40)} → {show_value(new, 40)}"


def cmd_log(args: argparse.Namespace) -> int:
    from eventmem.journal.history import memory_log, read_worktree
    from eventmem.review.concurrency import find_concurrent_edits
    from eventmem.review.journaldiff_render import show_value

    root = _root(args)
    history = read_worktree(ProjectPaths(root.root))
    args.memory = _memory_named(history, args.memory)
    lines = memory_log(history, args.memory)
    concurrent = [e for e in find_concurrent_edits(history.entries, git_root=root.root) if e.memory == args.memory]
    if args.json:
        print_json({"memory": args.memory, "events": lines, "concurrent_edits": concurrent})
        return 0 if lines else 1
    if not lines:
        print(printable(f"no history for {args.memory}"))
        return 1
    print(printable(f"history of {args.memory}: {len(lines)} event(s)"))
    for line in lines:
        if line.type == "saved" and "kind" in line.changes:
            name = line.changes.get("title") or line.changes.get("content") or [None, ""]
            what = f"[{line.changes['kind'][1]}] {show_value(name[1])}"
        else:
            what = "; ".join(_change(k, old, new) for k, (old, new) in line.changes.items())
        note = f" ({line.note})" if line.note else ""
        print(printable(f"{line.ts}  {line.type:<9} by {line.by or '?':<12} {what}{note}   [{line.segment}]"))
    for edit in concurrent:
        print(printable(_concurrent(edit)))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from eventmem.review.journaldiff import diff_specs
    from eventmem.review.journaldiff_render import show

    diff = diff_specs(_root(args).root, args.old, args.new)
    show(diff, as_json=args.json)
    return 0


# -- entry point -------------------------------------------------------------------------------


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the replay commands to ``sub`` (an argparse subparsers action); ``common`` adds ``--json``
    and ``--root`` to each."""

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        common(p)
        p.set_defaults(func=fn)
        return p

    add("rebuild", cmd_rebuild, "drop the cache and rebuild every projection from the journal")
    add("audit", cmd_audit, "check every journal line; exit 1 when anything is wrong")
    p = add("at", cmd_at, "the memory as of a time, an event id or a git revision (time travel)")
    p.add_argument("when", help="a time (2026-01-05, 2026-01-05T10:02:00Z), an event id, or a git revision")
    p.add_argument("memory", nargs="?", help="one memory's id (default: list every memory)")
    p.add_argument("--all", action="store_true", help="list deleted and expired memories too")
    p = add("log", cmd_log, "the history of one memory: each event, who, when, what it changed")
    p.add_argument("memory")
    p = add("diff", cmd_diff, "memory-level changes between two journals or git revisions")
    p.add_argument("old", nargs="?", default="HEAD", help="a git revision or a path (default: HEAD)")
    p.add_argument("new", nargs="?", default="WORKTREE", help="a git revision or a path (default: the working tree)")


def build_parser(prog: str = "replay.py") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Replay and inspect the eventmem journal.")
    global_options(parser)
    add_commands(parser.add_subparsers(dest="replay_command", required=True, metavar="command"), command_options)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "replay.py") -> int:
    configure_logging()
    args = build_parser(prog).parse_args(argv)
    return run_command(args.func, args, prog=prog)
