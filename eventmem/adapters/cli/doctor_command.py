"""``eventmem doctor``: which root was chosen and why, the journal's health, the cache's state."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from eventmem.adapters.cli.roots import root_of
from eventmem.adapters.command_line import set_verdict
from eventmem.core.terminal import print_json, printable
from eventmem.journal.project import ProjectPaths

if TYPE_CHECKING:
    from eventmem.review.audit_report import AuditReport, Finding

__all__ = ["cmd_doctor"]


def cmd_doctor(args: argparse.Namespace) -> int:
    from eventmem.journal.config import load_settings
    from eventmem.journal.gitdrivers import check as check_git_drivers
    from eventmem.review.audit import conflicting_ids, future_stamps
    from eventmem.service import open_service

    root = root_of(args)
    paths = ProjectPaths(root.root)
    if getattr(args, "fix", False):
        from eventmem.journal.relink import fix_linked_folders

        out = sys.stderr if args.json else sys.stdout  # (--json: stdout holds the report only)
        fixed = fix_linked_folders(paths, lambda line: print(printable(f"fix:         {line}"), file=out, flush=True))
        if not fixed:
            print("fix:         no memory folder is a symbolic link: nothing to do", file=out)
    service = open_service(root)
    health = service.health()
    corrupt: list[dict[str, Any]] = health["corrupt_lines"]
    snapshot = paths.cache_dir / "snapshot.bin"
    conflicts = [msgspec.to_builtins(d) for d in conflicting_ids(paths)]
    ahead = [msgspec.to_builtins(s) for s in future_stamps(paths)]
    audited, findings = _doctor_findings(paths)
    invalid = load_settings(paths.config_file).invalid  # (ignored, their defaults used: still a problem)
    report: dict[str, Any] = {
        "root": str(root.root),
        "root_source": root.source,
        "memory_dir": str(paths.base),
        "memory_dir_exists": paths.base.exists(),
        "writer": paths.writer_id() if paths.base.exists() else None,
        "branch": paths.branch(),
        "segments": health["segments"],
        "corrupt_lines": corrupt,
        "torn_tails": health["torn_tails"],
        "quarantined": health["quarantined"],
        "unknown_event_types": health["unknown_event_types"],
        "refused_segments": health["refused_segments"],
        "ignored_settings": service.ignored_settings,
        "invalid_settings": invalid,
        "allowed_settings": service.allowed_settings,
        "conflicting_ids": conflicts,
        "future_stamps": ahead,
        "cache": {
            "snapshot_bytes": snapshot.stat().st_size if snapshot.exists() else 0,
            "vector_index_bytes": sum(f.stat().st_size for f in paths.cache_dir.glob("vectors-*.faiss")),
            "embedder": health["embedder"],
            "cached_embeddings": health["cached_embeddings"],
        },
        "git_drivers": check_git_drivers(paths),
        "findings": findings,
    }
    report["healthy"] = (
        not corrupt
        and audited.ok
        and not conflicts
        and not health["refused_segments"]
        and not invalid
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
        for item in report["torn_tails"]:
            torn_name = printable(str(item["segment"]))
            print(f"torn tail:   {torn_name}: {item['bytes']} bytes (quarantined and cut by the next write)")
        for note in report["quarantined"]:
            print(printable(f"WARNING:     {note}"))
        for name, reason in report["refused_segments"].items():
            print(printable(f"REFUSED:     {name}: {reason}"))
        for line in invalid:
            print(printable(f"INVALID:     {line}"))
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
            f"bytes, embedder {cache['embedder']}"
        )
        for driver in report["git_drivers"]:
            verdict = "runs" if driver["problem"] is None else f"PROBLEM: {driver['problem']}"
            print(printable(f"git driver:  {driver['key']} = {driver['command']}: {verdict}"))
        advice = "run `eventmem replay audit`" if corrupt else "see above"
        print("healthy" if report["healthy"] else f"PROBLEMS FOUND: {advice}")
    return 0 if report["healthy"] else 1


def _doctor_findings(paths: ProjectPaths) -> tuple[AuditReport, list[Finding]]:
    """The audit of the journal (git history not consulted) and its findings, as ``check`` tells them."""
    from eventmem.review.audit import audit
    from eventmem.review.audit_findings import findings

    report = audit(paths, use_git=False)
    return report, findings(report)
