"""A writer killed between writing a file and renaming it into place leaves its temp file behind.

A snapshot's temp file is as large as the snapshot (hundreds of MB at 100k memories): a few servers
killed while writing one would fill a disk. A segment rewrite's sits in the tracked journal folder,
where ``git add`` would take it. The next writer of the same files, holding the same lock, removes
them; ``.eventmem/.gitignore`` keeps git away from them meanwhile. These tests kill real processes
(``SIGKILL``) and run the real command line and git.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import msgspec
import pytest
from cli_runner import ok_json
from conftest import ProcessGroup, eventmem_command, git, old_memory, write_events

from eventmem.core.events import MemoryDeleted, MemorySaved
from eventmem.core.ids import new_id
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.journal.usage import Access
from eventmem.service import open_service

pytestmark = pytest.mark.slow

WORDS = "cache retry parser socket schema index deploy token rollback shard queue lease".split()


def many_memories(project: Path, count: int) -> None:
    """``count`` memories in the journal, their embeddings cached and a snapshot written."""
    events = [
        MemorySaved(
            id=new_id(),
            ts="2026-11-01T10:00:00.000000Z",
            memory=new_id(),
            content=" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) + f" note {i}",
        )
        for i in range(count)
    ]
    write_events(project, events)
    open_service(RootChoice(project, "test")).close()


def snapshot_temp_files(cache: Path) -> list[Path]:
    return [
        path
        for path in cache.iterdir()
        if path.name.endswith(".tmp") and path.name.startswith((".snapshot.bin.", ".vectors-"))
    ]


def test_a_snapshot_writer_killed_mid_write_leaves_no_temp_file_once_the_next_snapshot_is_written(
    project: Path, processes: ProcessGroup
) -> None:
    many_memories(project, 3000)
    cache = project / ".eventmem" / "cache"
    snapshot = cache / "snapshot.bin"
    left: list[Path] = []
    for _attempt in range(40):
        # the next command writes one as it closes (none if the try before was killed after its vectors'
        # temp file was seen but before it wrote the snapshot's)
        snapshot.unlink(missing_ok=True)
        proc = processes.spawn(
            [*eventmem_command("stats"), "--root", str(project)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        seen: list[Path] = []
        while proc.poll() is None and not seen:
            seen = snapshot_temp_files(cache)
        if seen:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            left = snapshot_temp_files(cache)
            if left:
                break
        proc.wait()
    assert left, "no snapshot write was caught in progress in 40 tries"
    assert not snapshot.exists()
    other = cache / ".other.bin.abcdefgh.tmp"  # not a snapshot writer's: it stays
    other.write_bytes(b"not ours")

    ok_json(project, "stats")

    assert snapshot.is_file()
    assert snapshot_temp_files(cache) == []
    assert other.read_bytes() == b"not ours"
    found = ok_json(project, "search", "rollback shard queue")
    assert found["results"] and "rollback" in json.dumps(found)


def test_a_segment_rewrite_killed_mid_write_is_ignored_by_git_and_removed_by_the_next_compaction(
    project: Path,
) -> None:
    git(project, "init", "-q")
    gone = MemorySaved(id=new_id(), ts="2026-09-01T10:00:00.000000Z", memory=new_id(), content="Use Jenkins for CI.")
    write_events(
        project,
        [
            gone,
            MemoryDeleted(id=new_id(), ts="2026-09-02T10:00:00.000000Z", memory=gone.memory),
            old_memory("CI runs on GitHub Actions.", days=1, ttl=None),
        ],
    )
    paths = ProjectPaths(project)
    segment = paths.journal_dir / paths.segment_name()
    # what a compaction killed after writing its temp file leaves: the segment's lines, renamed never
    leftover = paths.journal_dir / f".{segment.name}.k1ll3d_x.tmp"
    leftover.write_bytes(segment.read_bytes())
    ok_json(project, "stats")  # (writes .eventmem/.gitignore on a first open, if the save did not)

    untracked = git(project, "status", "--porcelain", "--untracked-files=all")
    assert ".eventmem/journal/" in untracked and leftover.name not in untracked

    report = ok_json(project, "compact")
    assert report["archived"][0]["memories"] == 1  # (the rewrite ran)
    assert not leftover.exists()
    assert segment.is_file() and [p.name for p in paths.journal_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_a_usage_rewrite_killed_mid_write_leaves_no_temp_file_once_the_next_compaction_runs(project: Path) -> None:
    kept = MemorySaved(id=new_id(), ts="2026-11-01T10:00:00.000000Z", memory=new_id(), content="Deploys on Tuesdays.")
    write_events(project, [kept])
    local = ProjectPaths(project).local_dir
    local.mkdir(parents=True, exist_ok=True)
    usage = local / "usage.jsonl"
    line = msgspec.json.encode(Access(memory=kept.memory, ts="2026-11-02T10:00:00.000000Z")) + b"\n"
    usage.write_bytes(line * (2 * 1024 * 1024 // len(line)))  # past the size that compaction rewrites
    leftover = local / ".usage.jsonl.a1b2c3d4.tmp"  # what a rewrite killed before its rename leaves
    leftover.write_bytes(usage.read_bytes()[:100_000])

    report = ok_json(project, "compact")

    assert report["usage_compacted"], report
    assert not leftover.exists()
    shown = ok_json(project, "show", kept.memory)
    assert shown["memory"]["access_count"] == 2 * 1024 * 1024 // len(line)
