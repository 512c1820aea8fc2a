"""The lines a branch adds to the journal, against its merge base: history may only grow, except by compaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from eventmem.core.codec import LineError, UnknownEvent, decode_line
from eventmem.core.events import AnyEvent, LinkRemoved, MemoryArchived, memory_ids
from eventmem.journal.history import decode_segment
from eventmem.review.audit_report import Finding
from eventmem.review.check_git import SYMLINK, Blob, Line, error_finding, read_blobs

__all__ = ["Decoded", "Segments", "decode_lines", "lines_of", "try_decode"]

Decoded = AnyEvent | UnknownEvent


def lines_of(data: bytes, path: str, start: int = 0) -> Iterator[Line]:
    """The complete, non-blank lines of ``data`` from byte ``start`` (at a line's start) on."""
    number = data.count(b"\n", 0, start) + 1
    offset = start
    while True:
        end = data.find(b"\n", offset)
        if end < 0:
            return
        if data[offset:end].strip():
            yield Line(path, number, offset, data[offset:end])
        number += 1
        offset = end + 1


class Segments:
    """The base's and the branch's segments, and which lines the branch adds."""

    def __init__(
        self, root: Path, memory_dir: str, base: dict[str, Blob], head: dict[str, Blob], findings: list[Finding]
    ) -> None:
        self.findings = findings
        self.journal, self.archive = f"{memory_dir}/journal/", f"{memory_dir}/archive/"

        def segments(tree: dict[str, Blob]) -> dict[str, Blob]:
            return {
                path: blob
                for path, blob in tree.items()
                if path.startswith((self.journal, self.archive))
                and path.endswith(".jsonl")
                and blob.mode != SYMLINK
                and path.count("/") == self.journal.count("/")  # (as the journal reads: no nested folder)
            }

        self.base_blobs, self.head_blobs = segments(base), segments(head)
        changed = {p: b for p, b in self.head_blobs.items() if self.base_blobs.get(p) != b}
        self.base = read_blobs(root, self.base_blobs, findings)
        self.head = read_blobs(root, changed, findings)
        gone = sorted(self.base_blobs.keys() - self.head_blobs.keys())
        removed = "a segment of the base is removed"
        findings.extend(error_finding("rewritten-history", path, 0, -1, removed) for path in gone)

    def base_events(self) -> list[Decoded]:
        events: list[Decoded] = []
        for path in sorted(self.base):  # a line of the base that does not decode is the base's own problem
            try:
                events.extend(entry.event for entry in decode_segment(self.base[path], path)[0])
            except RecursionError:
                events.extend(e for line in lines_of(self.base[path], path) if (e := try_decode(line.data)) is not None)
        return events

    def added_lines(self) -> list[Line]:
        added: list[Line] = []
        moved: dict[str, set[bytes]] = {}  # journal segment to the base lines compaction moved out of it
        for path in sorted(p for p in self.head if p.startswith(self.journal)):
            added.extend(self._journal_lines(path, moved))
        landed: set[bytes] = set()
        every = {line for lines in moved.values() for line in lines}
        for path in sorted(p for p in self.head if p.startswith(self.archive)):
            if path in self.base_blobs:
                self._rewritten(path, "an archive segment is immutable, and the branch changes it")
                kept = {line.data for line in lines_of(self.base.get(path, b""), path)}
                added.extend(line for line in lines_of(self.head[path], path) if line.data not in kept)
                continue
            for line in lines_of(self.head[path], path):
                if line.data in every:
                    landed.add(line.data)
                else:
                    added.append(line)
        for path, lines in sorted(moved.items()):
            if lines - landed:
                self._rewritten(path, "lines of the base are gone, and no new archive segment holds them")
        for path, data in self.head.items():
            if data and not data.endswith(b"\n"):
                tail = data.rfind(b"\n") + 1
                number = data.count(b"\n") + 1
                self.findings.append(error_finding("undecodable", path, number, tail, "an unterminated last line"))
        return added

    def _rewritten(self, path: str, message: str, line: int = 0, offset: int = -1) -> None:
        self.findings.append(error_finding("rewritten-history", path, line, offset, message))

    def _journal_lines(self, path: str, moved: dict[str, set[bytes]]) -> list[Line]:
        data = self.head[path]
        old = self.base.get(path)
        if old is None:
            return list(lines_of(data, path))
        complete = old[: old.rfind(b"\n") + 1]
        if data.startswith(complete):
            return list(lines_of(data, path, len(complete)))
        # not a prefix: only compaction may have moved lines out (into a new archive segment)
        before, after = list(lines_of(complete, path)), list(lines_of(data, path))
        j = 0
        gone: list[Line] = []
        first: Line | None = None  # the branch's line where it first departs from the base
        for old_line in before:
            if j < len(after) and old_line.data == after[j].data:
                j += 1
                continue
            if not gone and j < len(after):
                first = after[j]
            gone.append(old_line)
        rest = after[j:]
        if first is None and not gone and rest:
            first = rest[0]
        if not self._compaction(gone, rest):
            number, offset = (first.number, first.offset) if first else (0, -1)
            self._rewritten(path, "changes or removes lines of the base (history may only grow)", number, offset)
            kept = {line.data for line in before}
            return [line for line in after if line.data not in kept]
        moved[path] = {line.data for line in gone}
        return rest

    def _compaction(self, gone: list[Line], rest: list[Line]) -> bool:
        """``gone`` is what compaction moves: each line about a memory an added ``archived`` event
        names, into a new archive segment (its landing there is checked afterwards)."""
        archived: set[str] = set()
        for line in rest:
            event = try_decode(line.data)
            if isinstance(event, MemoryArchived):
                target = self.journal.removesuffix("journal/") + event.segment
                if target.startswith(self.archive) and target in self.head and target not in self.base_blobs:
                    archived.update(event.memories)
        if not gone or not archived:
            return False
        for line in gone:
            event = try_decode(line.data)
            if event is None or isinstance(event, UnknownEvent):
                return False
            if not isinstance(event, LinkRemoved) and not set(memory_ids(event)) & archived:
                return False
        return True


def decode_one(data: bytes) -> Decoded:
    """:func:`eventmem.core.codec.decode_line`, with a line nested past the parser's depth a ``LineError`` too."""
    try:
        return decode_line(data)
    except RecursionError:
        raise LineError("nested too deep") from None


def try_decode(data: bytes) -> Decoded | None:
    try:
        return decode_one(data)
    except LineError:
        return None


def decode_lines(lines: list[Line], findings: list[Finding]) -> list[tuple[Line, Decoded]]:
    events: list[tuple[Line, Decoded]] = []
    for line in lines:
        try:
            events.append((line, decode_one(line.data)))
        except LineError as exc:
            findings.append(error_finding("undecodable", line.path, line.number, line.offset, f"not an event: {exc}"))
    return events
