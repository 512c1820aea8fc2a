"""The one segment decoder: a segment's bytes, read in chunks, as events, with every line that is not
one reported (file and byte offset) and skipped, and a torn tail left for the writer to settle."""

from __future__ import annotations

import gc
import io
from collections.abc import Callable
from dataclasses import dataclass, field

from eventmem.core.codec import LineError, UnknownEvent, decode_line, decode_lines
from eventmem.core.errors import InvalidInput, JournalCorrupt
from eventmem.core.events import AnyEvent
from eventmem.core.limits import MAX_LINE_BYTES

__all__ = [
    "CHUNK_BYTES",
    "Decoded",
    "ScanResult",
    "decode_bytes",
    "decode_stream",
    "number_lines",
    "refuse_unreadable",
    "segment_lines",
]

CHUNK_BYTES = 4 * 1_048_576
"""How much of a segment is read at once (below :data:`MAX_LINE_BYTES`, so a chunk's own lines
are never too long; only a line begun in an earlier chunk can be)."""

Decoded = AnyEvent | UnknownEvent


@dataclass(slots=True)
class ScanResult:
    events: list[Decoded] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    """Byte offset of each event's line (only filled when asked for)."""
    end: int = 0
    """Offset just past the last complete line read: where the next scan starts."""
    corrupt: list[JournalCorrupt] = field(default_factory=list)
    torn_tail: int = 0
    """Bytes after ``end`` that do not end in a newline yet (a write in progress or a torn write)."""
    unterminated: bool = False
    """The last event read is a complete line without its newline (``end`` is just past it)."""


def decode_stream(read: Callable[[int], bytes], start: int, label: str, *, with_offsets: bool = False) -> ScanResult:
    """Decode the lines ``read`` gives (a segment's bytes from offset ``start``), in chunks.

    The one segment decoder: a line longer than :data:`MAX_LINE_BYTES` is reported and skipped
    without being held whole; an unterminated last line is an event when it decodes as one."""
    result = ScanResult(end=start)
    position = start  # offset of the first byte not yet consumed (pending starts there)
    pending = b""
    skipping = -1  # where a line too long to read began
    was_enabled = gc.isenabled()
    gc.disable()  # a bulk decode makes many young objects; the cyclic GC would cost 2/3 of it
    try:
        while chunk := read(CHUNK_BYTES):
            if skipping >= 0:
                newline = chunk.find(b"\n")
                if newline < 0:
                    position += len(chunk)
                    continue
                problem = f"a line of {position + newline - skipping:,} bytes is longer than {MAX_LINE_BYTES:,}"
                result.corrupt.append(JournalCorrupt(label, skipping, problem))
                position += newline + 1
                result.end = position
                chunk = chunk[newline + 1 :]
                skipping = -1
            if pending:
                newline = chunk.find(b"\n")
                if newline >= 0:  # the line begun in an earlier chunk ends here
                    _decode_block(pending + chunk[: newline + 1], position, label, with_offsets, result)
                    position += len(pending) + newline + 1
                    result.end = position
                    chunk, pending = chunk[newline + 1 :], b""
            last = chunk.rfind(b"\n")
            if last >= 0:
                _decode_block(chunk[: last + 1], position, label, with_offsets, result)
                position += last + 1
                result.end = position
                chunk = chunk[last + 1 :]
            pending += chunk
            if len(pending) > MAX_LINE_BYTES:
                skipping, position, pending = position, position + len(pending), b""
    finally:
        if was_enabled:
            gc.enable()
    if skipping >= 0:
        result.torn_tail = position - skipping
    elif pending:
        try:
            event = decode_line(pending) if pending.strip() else None
        except LineError:
            event = None
        if event is None:
            result.torn_tail = len(pending)
        else:
            result.events.append(event)
            if with_offsets:
                result.offsets.append(position)
            result.end = position + len(pending)
            result.unterminated = True
    return result


def decode_bytes(data: bytes, name: str, *, with_offsets: bool = False) -> ScanResult:
    """:func:`decode_stream` of a segment's bytes already in memory (from git, or read whole)."""
    result = decode_stream(io.BytesIO(data).read, 0, name, with_offsets=with_offsets)
    if result.corrupt:
        number_lines(io.BytesIO(data).read, result.corrupt)
    return result


def segment_lines(data: bytes, name: str = "") -> list[tuple[bytes, Decoded | None]]:
    """Every non-blank line of a segment's bytes, exactly as written (with its newline when it has
    one), with the event :func:`decode_bytes` made of it: ``None`` for a line it reports as corrupt
    and for a torn tail. For rewriting a segment line by line without a second reading of it."""
    result = decode_bytes(data, name, with_offsets=True)
    places: list[tuple[int, Decoded | None]] = list(zip(result.offsets, result.events, strict=True))
    places += [(problem.offset, None) for problem in result.corrupt]
    if result.torn_tail and data[result.end :].strip():
        places.append((result.end, None))
    places.sort(key=lambda place: place[0])
    lines: list[tuple[bytes, Decoded | None]] = []
    for offset, event in places:
        end = data.find(b"\n", offset)
        lines.append((data[offset : len(data) if end < 0 else end + 1], event))
    return lines


def _decode_block(block: bytes, position: int, label: str, with_offsets: bool, result: ScanResult) -> None:
    """Decode complete lines (``block`` ends with a newline) found at byte ``position``."""
    fast = decode_lines(block) if len(block) <= CHUNK_BYTES else None  # (longer: one line begun earlier)
    if fast is not None and not with_offsets:
        result.events.extend(fast)
        return
    offsets: list[int] = []
    lines: list[bytes] = []
    for line in block.split(b"\n")[:-1]:
        if line.strip():
            offsets.append(position)
            lines.append(line)
        position += len(line) + 1
    if fast is not None and len(fast) == len(lines):
        result.events.extend(fast)
        result.offsets.extend(offsets)
        return
    for line, offset in zip(lines, offsets, strict=True):
        try:
            result.events.append(decode_line(line))
            if with_offsets:
                result.offsets.append(offset)
        except LineError as exc:
            result.corrupt.append(JournalCorrupt(label, offset, str(exc)))


def refuse_unreadable(data: bytes) -> None:
    """Raise :class:`InvalidInput` rather than write a line that readers would report and leave out."""
    if decode_lines(data) is not None:
        return
    for line in data.splitlines():
        try:
            decode_line(line)
        except LineError as exc:
            raise InvalidInput(f"nothing was written: the journal's readers would refuse this event ({exc})") from None


def number_lines(read: Callable[[int], bytes], problems: list[JournalCorrupt]) -> None:
    """Add the line number to each problem's reason (the bytes are read again, in chunks)."""
    wanted = sorted(range(len(problems)), key=lambda i: problems[i].offset)
    lines, position, index = 1, 0, 0
    while index < len(wanted) and (chunk := read(CHUNK_BYTES)):
        while index < len(wanted) and problems[wanted[index]].offset < position + len(chunk):
            problem = problems[wanted[index]]
            number = lines + chunk.count(b"\n", 0, problem.offset - position)
            problems[wanted[index]] = JournalCorrupt(problem.path, problem.offset, f"{problem.reason} (line {number})")
            index += 1
        lines += chunk.count(b"\n")
        position += len(chunk)
