"""Hostile journal lines, as a merge or a hand edit can bring them: each is reported with its file
and byte offset and left out, and no process crashes (a fresh CLI, a running server whose watcher
catches up, a rebuild). A complete last line that lost its newline is kept; a torn tail is
quarantined before it is cut."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem, ok_json, only_segment, save
from conftest import journal_bytes, reopen, wait_until
from mcp_client import assert_clean_stderr, call, serve, server_env

from eventmem.core.codec import LineError, decode_line, decode_lines, encode_event
from eventmem.core.errors import InvalidInput
from eventmem.core.events import MemorySaved
from eventmem.core.limits import MAX_LINE_BYTES, MAX_NESTING
from eventmem.journal.history import decode_segment
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths
from eventmem.service.lifecycle import split_lines

TS = "2026-04-01T08:00:00.000000Z"


def saved_line(**fields: Any) -> bytes:
    """A saved event's line (no newline), valid unless ``fields`` make it otherwise."""
    line = {"type": "saved", "id": "01JTH00000000000000000000A", "ts": TS, "memory": "01JTHM0000000000000000000A"}
    line.update({"content": "a line from a teammate's branch", **fields})
    return json.dumps(line, separators=(",", ":")).encode()


HOSTILE: dict[str, tuple[bytes, str]] = {
    "deep-nesting": (b'{"type":"saved","x":' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper"),
    "non-iso-ts": (saved_line(ts="~~~~"), "ts '~~~~' is not an ISO-8601 UTC time"),
    "not-a-calendar-day": (saved_line(ts="2026-02-30T08:00:00Z"), "is not an ISO-8601 UTC time"),
    "importance-out-of-range": (saved_line(importance=7), "importance"),
    "ttl-out-of-range": (saved_line(ttl_seconds=10**15), "ttl_seconds"),
    "nan": (saved_line()[:-1] + b',"importance":NaN}', "not JSON"),
    "unknown-kind": (saved_line(kind="weird"), "kind 'weird' is not a known kind"),
    "oversized-title": (saved_line(title="t" * 201), "title"),
    "too-many-metadata-entries": (saved_line(metadata={f"k{n}": "v" for n in range(65)}), "metadata"),
    "oversized-metadata-value": (saved_line(metadata={"note": "v" * 4097}), "metadata[...]"),
    "bad-metadata-key": (saved_line(metadata={"../x": "v"}), "$.metadata"),
    "oversized-source": (saved_line(source="s" * 513), "source"),
    "bad-memory-id": (saved_line(memory="../../etc"), "is not a memory id"),
    "non-object": (b'["saved", 1]', "not a JSON object"),
    "invalid-utf8": (saved_line(content="X").replace(b'"X"', b'"\xff\xfe"'), "UTF-8"),
    "json-not-an-event": (b'{"hello":"world"}', "no 'type' field"),
    "unknown-type-with-bad-ts": (b'{"type":"pinned","id":"e1","ts":"yesterday"}', "unknown type"),
}
LONG_LINE = saved_line(content="x" * (MAX_LINE_BYTES + 1024))


def append_raw(segment: Path, data: bytes) -> int:
    """Append bytes as another process would; returns where they begin."""
    with open(segment, "ab") as handle:
        offset = handle.seek(0, 2)
        handle.write(data)
    return offset


def hostile_project(project: Path, lines: dict[str, bytes]) -> tuple[list[str], dict[str, int]]:
    """Two memories saved by the CLI, the hostile lines, then a third memory: (ids, offset of each line)."""
    first = save(project, "The build uses hatch and pytest.")["id"]
    second = save(project, "Deployments go through the staging cluster first.")["id"]
    segment = only_segment(project)
    offsets = {name: append_raw(segment, line + b"\n") for name, line in lines.items()}
    third = save(project, "Lint runs with ruff before every commit.")["id"]
    return [first, second, third], offsets


def doctor_reports(project: Path, offsets: dict[str, int], reasons: dict[str, str]) -> None:
    result = eventmem(project, "doctor", "--json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    segment = f"journal/{only_segment(project).name}"
    found = {problem["offset"]: problem for problem in report["corrupt_lines"]}
    assert set(found) == set(offsets.values())
    for name, offset in offsets.items():
        assert found[offset]["segment"] == segment
        assert reasons[name] in found[offset]["reason"], (name, found[offset]["reason"])
    assert report["healthy"] is False


def answers(project: Path, ids: list[str]) -> list[Any]:
    """What the CLI answers about the good memories (show of each, a search)."""
    shown = [ok_json(project, "show", memory_id)["memory"]["content"] for memory_id in ids]
    hits = ok_json(project, "search", "staging cluster deployments", "--limit", "10")["results"]
    return [shown, sorted(hit["id"] for hit in hits)]


@pytest.mark.parametrize("name", HOSTILE)
def test_the_fast_path_refuses_every_line_the_line_decoder_refuses(name: str) -> None:
    line, reason = HOSTILE[name]
    with pytest.raises(LineError) as refused:
        decode_line(line)
    assert reason in str(refused.value)
    good = encode_event(MemorySaved(id="e1", ts=TS, memory="m1", content="fine"))
    assert decode_lines(good + line + b"\n" + good) is None
    assert decode_lines(good + good) is not None


@pytest.mark.parametrize("name", HOSTILE)
def test_history_and_compaction_decode_a_segment_with_the_journal_decoder(name: str, tmp_path: Path) -> None:
    good = encode_event(MemorySaved(id="e1", ts=TS, memory="m1", content="fine"))
    data = good + HOSTILE[name][0] + b"\n" + good.replace(b'"e1"', b'"e2"')
    path = tmp_path / "segment.jsonl"
    path.write_bytes(data)
    scanned = Journal.scan(path, name="journal/s.jsonl")
    entries, problems = decode_segment(data, "journal/s.jsonl")
    assert [entry.event for entry in entries] == scanned.events
    assert [(p.offset, p.reason) for p in problems] == [(p.offset, p.reason) for p in scanned.corrupt]
    assert [p.offset for p in problems] == [len(good)]
    kept, moved, memories = split_lines(data, {"m1"}, set())
    assert kept == [HOSTILE[name][0] + b"\n"] and len(moved) == 2 and memories == {"m1"}


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_reading_in_chunks_finds_the_same_lines_wherever_the_chunks_end(
    chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        encode_event(MemorySaved(id=f"e{n}", ts=TS, memory=f"m{n}", content="x" * (n * 37 % 300))) for n in range(40)
    ]
    lines[17] = HOSTILE["non-iso-ts"][0] + b"\n"
    lines[30] = b"\n"
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b"".join(lines) + lines[5][:-1])  # and a complete last line without its newline
    whole = Journal.scan(path, with_offsets=True)
    monkeypatch.setattr("eventmem.journal.decoder.CHUNK_BYTES", chunk)
    chunked = Journal.scan(path, with_offsets=True)
    assert (chunked.events, chunked.offsets, chunked.end) == (whole.events, whole.offsets, whole.end)
    assert [(p.offset, p.reason) for p in chunked.corrupt] == [(p.offset, p.reason) for p in whole.corrupt]
    assert len(whole.events) == 39 and whole.unterminated and whole.end == path.stat().st_size
    assert [p.offset for p in whole.corrupt] == [len(b"".join(lines[:17]))]


def test_each_hostile_line_is_reported_by_doctor_and_the_good_memories_stay_readable(project: Path) -> None:
    lines = {name: line for name, (line, _) in HOSTILE.items()} | {"over-8-mib": LONG_LINE}
    reasons = {name: reason for name, (_, reason) in HOSTILE.items()} | {"over-8-mib": "longer than"}
    ids, offsets = hostile_project(project, lines)
    original = journal_bytes(project)

    doctor_reports(project, offsets, reasons)
    before = answers(project, ids)
    assert before[0] == [
        "The build uses hatch and pytest.",
        "Deployments go through the staging cluster first.",
        "Lint runs with ruff before every commit.",
    ]
    assert ids[1] in before[1]
    assert "01JTHM0000000000000000000A" not in before[1]

    rebuilt = eventmem(project, "rebuild", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "Traceback" not in rebuilt.stderr
    assert answers(project, ids) == before
    doctor_reports(project, offsets, reasons)
    assert journal_bytes(project) == original  # nothing rewrote the reported lines


def test_a_reported_line_names_its_line_number_and_a_short_reason(project: Path) -> None:
    ids, offsets = hostile_project(project, {"non-iso-ts": HOSTILE["non-iso-ts"][0]})
    segment = only_segment(project)
    (problem,) = Journal.scan(segment, name="journal/x.jsonl").corrupt
    assert problem.offset == offsets["non-iso-ts"]
    assert str(problem) == (
        f"journal/x.jsonl: corrupt line at byte {problem.offset}: ts '~~~~' is not an ISO-8601 UTC time "
        "(a calendar day in the years 1970 to 9899) (line 3)"
    )
    assert len(ids) == 3


def test_nesting_is_measured_without_recursion_and_strings_do_not_count(project: Path) -> None:
    brackets = "[" * 50 + "{" * 50
    ids, offsets = hostile_project(
        project,
        {
            "nested-in-a-string": saved_line(content=brackets, title="[[[[{{{{"),
            "one-level-too-deep": saved_line(extra=json.loads("[" * MAX_NESTING + "]" * MAX_NESTING)),
        },
    )
    result = Journal.scan(only_segment(project))
    assert [problem.offset for problem in result.corrupt] == [offsets["one-level-too-deep"]]
    assert f"nested deeper than {MAX_NESTING} levels" in result.corrupt[0].reason
    assert ok_json(project, "show", "01JTHM0000000000000000000A")["memory"]["content"] == brackets
    assert len(ids) == 3


@pytest.mark.anyio
async def test_a_running_server_reports_hostile_lines_another_process_appended_and_keeps_answering(
    project: Path, tmp_path: Path
) -> None:
    first = save(project, "The build uses hatch and pytest.")["id"]
    errlog = tmp_path / "serve.log"
    async with serve(project, server_env(), errlog) as session:
        await session.initialize()
        assert (await call(session, "get_memory", memory_id=first))["memory"]["content"].startswith("The build")

        segment = only_segment(project)
        lines = {name: line for name, (line, _) in HOSTILE.items()} | {"over-8-mib": LONG_LINE}
        offsets = {name: append_raw(segment, line + b"\n") for name, line in lines.items()}
        later = save(project, "Written by another process after the hostile lines.")["id"]

        def unreported() -> set[int]:
            text = errlog.read_text(encoding="utf-8")
            return {offset for offset in offsets.values() if f"corrupt line at byte {offset}:" not in text}

        # the watcher's catch-up logs each problem
        await wait_until(
            lambda: not unreported(), errlog, lambda: f"the server did not report bytes {sorted(unreported())}"
        )

        got = await call(session, "get_memory", memory_id=later)
        assert got["memory"]["content"] == "Written by another process after the hostile lines."
        recalled = await call(session, "recall_memories", query="hatch pytest build")
        assert first in [hit["id"] for hit in recalled["results"]]
    assert_clean_stderr(errlog)


def test_the_writer_refuses_an_event_its_readers_would_refuse_and_writes_nothing(project: Path) -> None:
    journal = Journal(ProjectPaths(project))
    good = MemorySaved(id="e1", ts=TS, memory="m1", content="fine")
    with pytest.raises(InvalidInput, match="by: expected `str` of length <= 128"):
        journal.append([good, MemorySaved(id="e2", ts=TS, by="b" * 129, memory="m2", content="x")])
    with pytest.raises(InvalidInput, match="ts 'yesterday' is not an ISO-8601 UTC time"):
        journal.append([MemorySaved(id="e3", ts="yesterday", memory="m3", content="x")])
    assert list((project / ".eventmem" / "journal").glob("*.jsonl")) == []
    journal.append([good])
    assert Journal.scan(next((project / ".eventmem" / "journal").glob("*.jsonl"))).events == [good]


def test_a_complete_last_line_without_its_newline_is_kept_and_the_next_save_adds_the_newline(project: Path) -> None:
    first = save(project, "The build uses hatch and pytest.")["id"]
    second = save(project, "A memory whose line an editor left without its newline.")["id"]
    segment = only_segment(project)
    data = segment.read_bytes()
    segment.write_bytes(data[:-1])

    assert ok_json(project, "show", second)["memory"]["content"].startswith("A memory whose line")
    doctor = ok_json(project, "doctor")
    assert (doctor["corrupt_lines"], doctor["torn_tails"], doctor["quarantined"]) == ([], [], [])

    third = save(project, "Saved after the unterminated line.")["id"]
    assert segment.read_bytes().startswith(data)  # the newline is back, nothing was cut
    for memory_id in (first, second, third):
        assert ok_json(project, "show", memory_id)["memory"]["id"] == memory_id
    assert not (project / ".eventmem" / "cache" / "quarantine").exists()


def test_a_torn_tail_is_quarantined_with_its_exact_bytes_and_doctor_warns(project: Path) -> None:
    first = save(project, "The build uses hatch and pytest.")["id"]
    save(project, "A save a crash tore in the middle of its line.")
    segment = only_segment(project)
    data = segment.read_bytes()
    start = data[:-1].rfind(b"\n") + 1
    segment.write_bytes(data[:-12])

    torn = ok_json(project, "doctor")["torn_tails"]
    assert torn == [{"segment": f"journal/{segment.name}", "bytes": len(data) - 12 - start}]
    save(project, "Saved after the crash.")
    (kept,) = (project / ".eventmem" / "cache" / "quarantine").iterdir()
    assert kept.name.startswith(f"{segment.name}.{start}.") and kept.name.endswith("Z.bin")
    assert kept.read_bytes() == data[start:-12]

    result = eventmem(project, "doctor")
    assert result.returncode == 0, result.stdout  # a warning, not corruption: nothing is left unread
    assert f"WARNING:     a torn last line of journal/{segment.name} at byte {start}" in result.stdout
    assert kept.name in result.stdout
    assert ok_json(project, "show", first)["memory"]["id"] == first


def test_a_reader_that_folded_an_unterminated_line_does_not_fold_it_again_when_the_newline_arrives(
    project: Path,
) -> None:
    save(project, "The build uses hatch and pytest.")
    segment = only_segment(project)
    unterminated = saved_line(memory="01JTHM0000000000000000000B", id="01JTH00000000000000000000B")
    append_raw(segment, unterminated)

    live = reopen(project)  # a reader that stays open while another process writes
    try:
        assert live.project.derived.state.visible("01JTHM0000000000000000000B") is not None
        live.project.save_snapshot()
        for text in ("Saved by another process: the newline comes first.", "And one more."):
            writer = reopen(project)
            try:
                writer.save(text)
            finally:
                writer.close()
            rebuilds = live.project.rebuilds
            assert live.project.catch_up() == 1  # the new line only
            assert live.project.rebuilds == rebuilds
        assert segment.read_bytes().count(unterminated + b"\n") == 1
        assert len(live.search(limit=10)) == 4
    finally:
        live.close()


def test_the_warning_about_a_corrupt_line_names_a_command_an_installed_eventmem_has(project: Path) -> None:
    hostile_project(project, {"non-array": HOSTILE["non-object"][0]})
    search = eventmem(project, "search", "staging cluster")
    (warning,) = [line for line in search.stderr.splitlines() if line.startswith("eventmem: warning:")]
    command = warning.rsplit("Run `", 1)[1].split("`", 1)[0]
    assert command == "eventmem replay audit"
    audit = eventmem(project, *command.split()[1:])
    assert audit.returncode == 1 and "not a JSON object" in audit.stdout + audit.stderr
