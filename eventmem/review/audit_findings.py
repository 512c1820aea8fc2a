"""The audit's errors and warnings as findings, each at its segment's line number."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from eventmem.review.audit_report import AuditReport, Finding

__all__ = ["findings"]


def findings(report: AuditReport, memory_dir: str = ".eventmem") -> list[Finding]:
    """The audit's errors and warnings as findings, each with its segment's line number; paths are
    ``memory_dir`` (the project's ``.eventmem/``, relative to the project) joined with the segment."""
    located: list[tuple[str, str, int, str, Literal["error", "warning"]]] = [
        ("corrupt-line", line.segment, line.offset, f"not an event: {line.reason}", "error")
        for line in report.corrupt_lines
    ]
    for dup in report.duplicate_ids:
        how = "identical copies" if dup.identical else "copies with different content"
        located.extend(
            ("duplicate-id", loc.segment, loc.offset, f"event id {dup.id} has {how}", dup.severity)
            for loc in dup.locations
        )
    for ref in report.unknown_references:
        what = "link" if ref.role == "link" else "memory"
        message = f"{ref.type} event {ref.event} is about unknown {what} {ref.missing}"
        located.append(("unknown-memory", ref.segment, ref.offset, message, "error"))
    located.extend(
        ("torn-tail", tail.segment, tail.offset, f"{tail.bytes} unterminated bytes", "warning")
        for tail in report.torn_tails
    )
    for skew in report.clock_skew:
        if skew.problem == "future":
            message = f"event {skew.event} is stamped {skew.ts}, {skew.seconds:.0f}s in the future"
            located.append(("future-stamp", skew.segment, skew.offset, message, "warning"))
    lines = _line_numbers(Path(report.root) / memory_dir, {(segment, offset) for _, segment, offset, _, _ in located})
    out = [
        Finding(
            code=code,
            severity=severity,
            path=f"{memory_dir}/{segment}",
            line=lines.get((segment, offset), 0),
            offset=offset,
            message=message,
        )
        for code, segment, offset, message, severity in located
    ]
    out.sort(key=lambda f: (f.path, f.offset, f.code))
    return out + list(report.trust)


def _line_numbers(base: Path, places: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The 1-based line number of each (segment, byte offset), counting newlines before it."""
    by_segment: dict[str, list[int]] = {}
    for segment, offset in places:
        by_segment.setdefault(segment, []).append(offset)
    numbers: dict[tuple[str, int], int] = {}
    for segment, offsets in by_segment.items():
        try:
            fd = os.open(base / segment, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max(offsets))
        for offset in offsets:
            numbers[(segment, offset)] = data.count(b"\n", 0, offset) + 1
    return numbers
