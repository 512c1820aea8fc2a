"""The journal: torn writes, corruption, disk trouble, size limits and line framing."""

from __future__ import annotations

import errno
import os
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import reopen

import eventmem.journal.journal
from eventmem.core.codec import decode_line, encode_event
from eventmem.core.errors import JournalUnwritable
from eventmem.core.events import Event, MemorySaved
from eventmem.journal.decoder import ScanResult
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths
from eventmem.service import MemoryService


def saved(n: int, content: str = "", *, by: str = "tests") -> MemorySaved:
    return MemorySaved(
        id=f"01JT{n:022d}",
        ts=f"2026-04-01T08:00:{n % 60:02d}.{n:06d}Z",
        by=by,
        memory=f"01JTM{n:021d}",
        content=content or f"memory number {n} — with ünïcode",
        tags=("journal", f"n{n}"),
    )


def journal_of(project: Path, **options: Any) -> Journal:
    options.setdefault("durable", False)
    return Journal(ProjectPaths(project), **options)


def segment_path(journal: Journal, name: str) -> Path:
    return journal.paths.base / name


def scan(journal: Journal, name: str, **options: Any) -> ScanResult:
    return Journal.scan(segment_path(journal, name), name=name, **options)


def patch_journal_os(monkeypatch: pytest.MonkeyPatch, **overrides: Callable[..., Any]) -> None:
    """Replace functions of ``os`` as seen by eventmem.journal.journal only (the lock and the rest of
    the process keep the real ones)."""
    proxy = types.ModuleType("os")
    proxy.__dict__.update(os.__dict__)
    proxy.__dict__.update(overrides)
    monkeypatch.setattr(eventmem.journal.journal, "os", proxy)


# -- torn writes --------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 5])
def test_torn_last_line_is_invisible_to_readers_and_cut_by_the_next_append(project: Path, count: int) -> None:
    journal = journal_of(project)
    events = [saved(n) for n in range(count)]
    names = {journal.append([event]) for event in events}
    assert len(names) == 1
    name = names.pop()
    path = segment_path(journal, name)
    full = path.read_bytes()
    last_start = full[:-1].rfind(b"\n") + 1
    assert full[last_start:] == encode_event(events[-1])
    extra = saved(99)

    # every cut inside the last line; one at its newline leaves a complete event, which is kept (below)
    for cut in range(last_start + 1, len(full) - 1):
        path.write_bytes(full[:cut])

        result = scan(journal, name)
        assert result.events == events[:-1], cut
        assert result.corrupt == []
        assert result.torn_tail == cut - last_start
        assert result.end == last_start

        assert journal.append([extra]) == name
        assert path.read_bytes() == full[:last_start] + encode_event(extra)
        result = scan(journal, name)
        assert result.events == [*events[:-1], extra]
        assert (result.corrupt, result.torn_tail, result.end) == ([], 0, path.stat().st_size)


def test_a_complete_last_line_without_its_newline_is_read_and_the_next_append_adds_the_newline(project: Path) -> None:
    journal = journal_of(project)
    events = [saved(1), saved(2)]
    name = journal.append(events)
    path = segment_path(journal, name)
    full = path.read_bytes()
    path.write_bytes(full[:-1])

    result = scan(journal, name)
    assert (result.events, result.corrupt, result.torn_tail) == (events, [], 0)
    assert (result.end, result.unterminated) == (len(full) - 1, True)

    extra = saved(3)
    assert journal.append([extra]) == name
    assert path.read_bytes() == full + encode_event(extra)
    assert scan(journal, name).events == [*events, extra]
    assert not (project / ".eventmem" / "cache" / "quarantine").exists()


def test_a_torn_tail_is_saved_to_the_quarantine_folder_before_it_is_cut(project: Path) -> None:
    journal = journal_of(project)
    name = journal.append([saved(1)])
    path = segment_path(journal, name)
    complete = path.read_bytes()
    torn = encode_event(saved(2))[:-9]
    path.write_bytes(complete + torn)

    assert journal.append([saved(3)]) == name
    assert path.read_bytes() == complete + encode_event(saved(3))
    (kept,) = (project / ".eventmem" / "cache" / "quarantine").iterdir()
    assert kept.name.startswith(f"{path.name}.{len(complete)}.")
    assert kept.read_bytes() == torn
    (note,) = journal.quarantined()
    assert f"{name} at byte {len(complete)}" in note
    assert kept.name in note


def test_repair_cuts_a_torn_tail_and_leaves_complete_lines_alone(project: Path) -> None:
    journal = journal_of(project)
    name = journal.append([saved(1), saved(2)])
    path = segment_path(journal, name)
    complete = path.read_bytes()
    assert journal.repair() == []
    path.write_bytes(complete + b'{"type":"saved","id":"01JT')
    assert journal.repair() == [name]
    assert path.read_bytes() == complete


def test_a_torn_tail_is_not_reported_as_corruption_by_the_service(project: Path) -> None:
    svc = reopen(project)
    try:
        first = svc.save("the build uses hatch")
        second = svc.save("tests run with pytest")
    finally:
        svc.close()
    segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 10])  # the second save was torn by a crash

    svc = reopen(project)
    try:
        assert svc.warnings() == []
        assert svc.get(first.id).content == "the build uses hatch"
        assert svc.project.state.visible(second.id) is None
        third = svc.save("lint runs with ruff")
        assert svc.get(third.id).content == "lint runs with ruff"
    finally:
        svc.close()
    svc = reopen(project)
    try:
        (warning,) = svc.warnings()  # not a corrupt line: the cut bytes, saved before the cut
        assert "torn last line" in warning and "quarantine" in warning
        assert svc.project.problems == {}
        assert svc.project.state.visible(first.id) is not None
        assert svc.project.state.visible(third.id) is not None
    finally:
        svc.close()


# -- corruption ---------------------------------------------------------------------------------

BAD_LINES = {
    "garbage": b"\x00\xff\xfe garbage \x13\x37",
    "conflict-marker": b"<<<<<<< HEAD",
    "conflict-separator": b"=======",
    "truncated-json": b'{"type":"saved","id":"01JTX","ts":"2026-04-01T08:00:00.000000Z","memo',
    "missing-field": b'{"type":"saved","id":"01JTX","ts":"2026-04-01T08:00:00.000000Z","memory":"m"}',
}


def write_journal_with_bad_middle_line(journal: Journal, bad: bytes) -> tuple[str, int, list[Event]]:
    before = [saved(1), saved(2)]
    after = [saved(3), saved(4)]
    name = journal.append(before)
    path = segment_path(journal, name)
    offset = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(bad + b"\n")
    assert journal.append(after) == name  # the writer leaves a complete bad line alone
    return name, offset, before + after


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_corrupt_middle_line_is_reported_with_its_segment_and_byte_offset(project: Path, bad: bytes) -> None:
    journal = journal_of(project)
    name, offset, events = write_journal_with_bad_middle_line(journal, bad)

    result = scan(journal, name, with_offsets=True)
    assert result.events == events  # the good lines after it are still read
    assert [(problem.path, problem.offset) for problem in result.corrupt] == [(name, offset)]
    assert f"{name}: corrupt line at byte {offset}:" in str(result.corrupt[0])
    assert result.torn_tail == 0
    data = segment_path(journal, name).read_bytes()
    line_starts = [0] + [index + 1 for index, byte in enumerate(data[:-1]) if byte == ord("\n")]
    assert result.offsets == [start for start in line_starts if start != offset]

    ((segment, whole),) = list(journal.iter_all())
    assert segment.name == name
    assert [(problem.path, problem.offset) for problem in whole.corrupt] == [(name, offset)]


def test_a_corrupt_middle_line_shows_in_store_problems_and_service_warnings(project: Path) -> None:
    journal = journal_of(project)
    name, offset, events = write_journal_with_bad_middle_line(journal, BAD_LINES["conflict-marker"])
    path = segment_path(journal, name)
    original = path.read_bytes()

    for _ in range(2):  # a cold start, then a start from the snapshot the first one left
        svc = reopen(project)
        try:
            assert list(svc.project.problems) == [(name, offset)]
            (warning,) = svc.warnings()
            assert name in warning
            assert f"byte {offset}" in warning
            assert svc.stats()["corrupt_lines"] == [
                {"segment": name, "offset": offset, "reason": svc.project.problems[(name, offset)].reason}
            ]
            for event in events:
                assert svc.get(event.memory).content == event.content
        finally:
            svc.close()
        assert path.read_bytes() == original  # nothing rewrites the file

    svc = reopen(project)
    try:
        svc.save("written after the corruption")
    finally:
        svc.close()
    assert path.read_bytes().startswith(original)
    assert journal.repair() == []
    assert path.read_bytes().startswith(original)


# -- disk trouble -------------------------------------------------------------------------------


def failing_write(error: int, *, after_bytes: int, failing: list[bool]) -> Callable[[int, Any], int]:
    """``os.write`` that writes ``after_bytes`` of the first call, then raises ``error``."""
    written = [0]

    def write(fd: int, data: Any) -> int:
        if not failing[0]:
            return os.write(fd, data)
        if written[0] < after_bytes:
            chunk = bytes(data[: after_bytes - written[0]])
            written[0] += os.write(fd, chunk)
            return len(chunk)
        raise OSError(error, os.strerror(error))

    return write


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EDQUOT, "the disk quota is exhausted"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EIO, os.strerror(errno.EIO)),
    ],
)
@pytest.mark.parametrize("after_bytes", [0, 1, 37])
def test_a_write_that_fails_part_way_leaves_the_segment_exactly_as_it_was(
    project: Path, monkeypatch: pytest.MonkeyPatch, error: int, words: str, after_bytes: int
) -> None:
    journal = journal_of(project, durable=True)
    name = journal.append([saved(1)])
    path = segment_path(journal, name)
    before = path.read_bytes()
    failing = [True]
    patch_journal_os(monkeypatch, write=failing_write(error, after_bytes=after_bytes, failing=failing))

    with pytest.raises(JournalUnwritable) as caught:
        journal.append([saved(2), saved(3)])
    message = str(caught.value)
    assert words in message
    assert "Nothing was saved" in message
    assert path.stat().st_size == len(before)
    assert path.read_bytes() == before

    failing[0] = False
    journal.append([saved(4)])
    result = scan(journal, name)
    assert result.events == [saved(1), saved(4)]
    assert (result.corrupt, result.torn_tail) == ([], 0)


@pytest.mark.parametrize(
    ("error", "words"),
    [(errno.EACCES, "permission denied"), (errno.EPERM, "permission denied"), (errno.EROFS, "read-only")],
)
def test_a_segment_that_cannot_be_opened_for_writing_gives_a_clear_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, error: int, words: str
) -> None:
    journal = journal_of(project)
    name = journal.append([saved(1)])
    path = segment_path(journal, name)
    before = path.read_bytes()

    def refuse(file: Any, *args: Any, **kwargs: Any) -> int:
        if str(file).endswith(".jsonl"):
            raise OSError(error, os.strerror(error), str(file))
        return os.open(file, *args, **kwargs)

    patch_journal_os(monkeypatch, open=refuse)
    with pytest.raises(JournalUnwritable, match=words) as caught:
        journal.append([saved(2)])
    assert path.name in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions; the injected errors cover this")
def test_a_read_only_segment_file_is_refused_with_permission_denied(service: MemoryService) -> None:
    kept = service.save("kept before the file became read-only")
    segment = next((service.project.paths.journal_dir).glob("*.jsonl"))
    before = segment.read_bytes()
    segment.chmod(0o444)
    try:
        with pytest.raises(JournalUnwritable, match="permission denied"):
            service.save("refused")
        assert segment.read_bytes() == before
        assert service.get(kept.id).content == kept.content
    finally:
        segment.chmod(0o644)


def test_the_service_keeps_answering_reads_after_the_disk_refuses_a_save(
    service: MemoryService, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = service.save("the deploy script lives in ops/deploy.sh", title="deploy script", tags=["ops"])
    failing = [True]
    patch_journal_os(monkeypatch, write=failing_write(errno.ENOSPC, after_bytes=20, failing=failing))

    with pytest.raises(JournalUnwritable, match="the disk is full"):
        service.save("this one does not fit on the disk")
    with pytest.raises(JournalUnwritable, match="the disk is full"):
        service.update(kept.id, content="an edit that does not fit either")

    assert service.get(kept.id).content == "the deploy script lives in ops/deploy.sh"
    hits = service.recall("deploy script")
    assert [hit.id for hit in hits] == [kept.id]
    assert service.stats()["memories"] == 1
    assert service.warnings() == []

    failing[0] = False
    later = service.save("saved once the disk had room again")
    other = reopen(project)
    try:
        assert other.warnings() == []
        assert other.stats()["memories"] == 2
        assert other.get(kept.id).content == "the deploy script lives in ops/deploy.sh"
        assert other.get(later.id).content == "saved once the disk had room again"
    finally:
        other.close()


# -- size limit ---------------------------------------------------------------------------------


def test_a_full_segment_rolls_over_to_the_next_and_a_batch_larger_than_a_segment_is_split(project: Path) -> None:
    first, second, third = saved(1), saved(2), saved(3)
    size_one = len(encode_event(first))
    exact = size_one + len(encode_event(second))
    name = journal_of(project).append([first])
    path = segment_path(journal_of(project), name)

    journal_of(project, max_segment_bytes=exact).append([second])  # exactly at the limit is fine
    assert path.stat().st_size == exact
    rolled = journal_of(project, max_segment_bytes=exact).append([third])
    assert rolled == name.removesuffix(".jsonl") + ".2.jsonl"
    assert scan(journal_of(project), name).events == [first, second]
    assert scan(journal_of(project), rolled).events == [third]

    batch = [saved(n) for n in range(4, 12)]
    journal = journal_of(project, max_segment_bytes=2 * size_one + 10)
    journal.append(batch)  # larger than a segment: split between lines, two to a segment
    names = sorted((s.name for s in journal.segments()), key=lambda n: (len(n), n))
    assert len(names) == 2 + 4
    read = [event for n in names for event in scan(journal, n).events]
    assert read == [first, second, third, *batch]
    assert all(segment_path(journal, n).stat().st_size <= 2 * size_one + 10 for n in names[1:])


# -- framing ------------------------------------------------------------------------------------


def test_each_event_is_one_line_ending_in_a_newline(project: Path) -> None:
    journal = journal_of(project)
    events = [saved(n, content=f"line one\nline two\r\n\ttabbed {n}\u2028") for n in range(5)]
    name = journal.append(events[:2])
    journal.append(events[2:])
    data = segment_path(journal, name).read_bytes()
    lines = data.splitlines(keepends=True)
    assert len(lines) == data.count(b"\n") == len(events)
    assert all(line.endswith(b"\n") for line in lines)
    assert [decode_line(line[:-1]) for line in lines] == events


@pytest.mark.parametrize("durable", [True, False])
def test_a_durable_append_syncs_its_segment_before_it_returns_and_a_flush_one_does_not(
    project: Path, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    journal = journal_of(project, durable=durable)
    synced: list[tuple[int, int]] = []  # (inode, size) of the file each sync was asked for

    def sync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_ino, st.st_size))

    patch_journal_os(monkeypatch, fdatasync=sync, fsync=sync)
    name = journal.append([saved(0)])
    journal.append([saved(1), saved(2)])
    st = segment_path(journal, name).stat()
    if durable:
        assert len(synced) == 2 and synced[-1] == (st.st_ino, st.st_size)  # after the whole write
    else:
        assert synced == []


def test_appending_nothing_writes_nothing(project: Path) -> None:
    journal = journal_of(project)
    assert journal.append([]) == ""
    assert journal.segments() == []


def test_two_journals_appending_alternately_never_interleave_lines(project: Path) -> None:
    one, two = journal_of(project), journal_of(project)
    expected: list[Event] = []
    for n in range(12):
        batch = [saved(n * 10 + k, by="one" if n % 2 else "two") for k in range(3)]
        name = (one if n % 2 else two).append(batch)
        expected.extend(batch)
    data = segment_path(one, name).read_bytes()
    assert data == b"".join(encode_event(event) for event in expected)
    assert scan(one, name).events == expected


def test_two_journals_appending_at_once_never_interleave_lines(project: Path) -> None:
    journals = [journal_of(project), journal_of(project)]
    name = journals[0].append([saved(0)])  # the segment and the writer id exist before the race
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    big = "y" * 20_000  # lines larger than a pipe buffer or a page

    def writer(index: int) -> None:
        try:
            start.wait()
            for n in range(30):
                first = 1000 * (index + 1) + n * 4
                journals[index].append([saved(first + k, content=f"{index}:{n}:{k} {big}") for k in range(4)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    result = scan(journals[0], name)
    assert (result.corrupt, result.torn_tail) == ([], 0)
    assert len(result.events) == 1 + 2 * 30 * 4
    bodies = [event.content.split(" ")[0] for event in result.events[1:] if isinstance(event, MemorySaved)]
    # every batch of four is contiguous and in order
    for start_index in range(0, len(bodies), 4):
        batch = bodies[start_index : start_index + 4]
        writer_index, batch_number, _ = batch[0].split(":")
        assert batch == [f"{writer_index}:{batch_number}:{k}" for k in range(4)]
    for index in range(2):
        mine = [body for body in bodies if body.startswith(f"{index}:")]
        assert mine == [f"{index}:{n}:{k}" for n in range(30) for k in range(4)]
