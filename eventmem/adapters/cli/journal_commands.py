"""The commands that read the journal and its git history: log, diff, pr-summary, check."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from eventmem.adapters.cli.roots import close_service, open_service_of, root_of
from eventmem.adapters.command_line import set_verdict
from eventmem.core.terminal import print_json, printable
from eventmem.core.validation import check_whole

__all__ = ["cmd_check", "cmd_diff", "cmd_log", "cmd_pr_summary"]


def _describe(event: dict[str, Any]) -> str:
    kind = event["type"]
    who = f" by {event['by']}" if event.get("by") else ""
    target = event.get("memory") or event.get("link") or ""
    detail = ""
    if kind == "saved":
        detail = f" [{event.get('kind', 'general')}] {event.get('summary') or event.get('content', '')[:80]}"
    elif kind == "updated":
        fields = [k for k in event if k not in {"type", "id", "ts", "by", "prev", "memory", "segment", "offset"}]
        detail = f" fields: {', '.join(fields)}"
    elif kind == "linked":
        detail = f" {event['source']} -{event.get('relation', 'related_to')}-> {event['target']}"
    elif event.get("reason"):
        detail = f" ({event['reason']})"
    return printable(f"{event['ts']}  {kind:<9} {target}{who}{detail}")


def cmd_log(args: argparse.Namespace) -> int:
    check_whole(args.limit, "log_limit", "--limit")
    service = open_service_of(args)
    events = service.history(service.resolve_id(args.id, prefix=True) if args.id else None, limit=args.limit)
    close_service(service)
    if args.json:
        print_json(events)
    elif not events:
        print(f"no history for {printable(args.id)}" if args.id else "the journal is empty")
    else:
        for event in events:
            print(_describe(event))
    return 0 if events or not args.id else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from eventmem.core.codec import LineError, UnknownEvent, decode_line
    from eventmem.review.journaldiff import diff_files, diff_specs
    from eventmem.review.journaldiff_render import show

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
        diff = diff_specs(root_of(args).root, args.old, args.new)
    show(diff, as_json=args.json)
    return 0


def cmd_pr_summary(args: argparse.Namespace) -> int:
    from eventmem.journal.history import default_base
    from eventmem.review.journaldiff import pr_summary
    from eventmem.review.journaldiff_render import render_markdown

    root = root_of(args).root
    base = args.base or default_base(root)
    diff, fork = pr_summary(root, base, args.head)
    if args.json:
        print_json({"base": base, "fork_point": fork, "diff": diff})
    else:
        sys.stdout.write(render_markdown(diff))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from eventmem.review.check import check_branch

    report = check_branch(root_of(args).root, args.base, args.head)
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
