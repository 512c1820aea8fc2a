"""Keyword ranking from in-memory postings end to end: ``eventmem serve`` over stdio with
``EVENTMEM_POSTINGS_FROM`` lowered answers exactly like a server that ranks with FTS5, before and
after a save, an update and a delete made through it, and a rebuild of the cache answers alike
(a delete gives the later memories other slots in a rebuild: nothing may depend on them)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem
from conftest import ago, eventmem_command, wait_until, write_events
from mcp import ClientSession
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso

pytestmark = pytest.mark.anyio

MEMORIES = 400
WORDS = (
    "pool timeout retry celery queue worker hydration bundle staging subnet fixture flaky token cookie "
    "parse_config load_settings x86_64 Café naïve Straße ERR_CONN_RESET k8s v2 deploy deployment deployed"
).split()
QUERIES = ("pool timeout", "parse_config retry", "café deploy", "Straße", "ERR_CONN_RESET k8s", "deployed worker")


def seed(project: Path) -> None:
    rng = random.Random(23)
    events = [
        MemorySaved(
            id=new_id(),
            # (saved long ago: their recency boost no longer moves between two servers' answers, which
            # the scores compared to their last shown place would otherwise see when a run is slow)
            ts=ago(days=2000),
            memory=new_id(),
            title=" ".join(rng.sample(WORDS, 2)),
            content=" ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 30))),
            tags=(f"t{number % 5}",),
        )
        for number in range(MEMORIES)
    ]
    write_events(project, events)


async def answers(session: ClientSession) -> list[list[tuple[str, float]]]:
    """Keyword-only and hybrid answers to each query, unfiltered and filtered by a tag."""
    out = []
    for query in QUERIES:
        for arguments in ({"mode": "keyword"}, {"mode": "hybrid"}, {"mode": "keyword", "tags": "t2"}):
            found = await call(session, "search_memories", query=query, limit=10, **arguments)
            out.append([(hit["id"], hit["score"]) for hit in found["results"]])
    return out


def same(found: list[list[tuple[str, float]]], expected: list[list[tuple[str, float]]]) -> bool:
    """Keyword answers equal, bit for bit as shown; hybrid answers (every third, see :func:`answers`)
    the same memories in the same order, their scores equal but for the last place shown: the vector
    side's cosines come from the embedding cache in one server and from the embedder in the other."""
    assert len(found) == len(expected)
    for index, (one, other) in enumerate(zip(found, expected, strict=True)):
        if index % 3 != 1:
            assert one == other, index
            continue
        assert [memory_id for memory_id, _ in one] == [memory_id for memory_id, _ in other], index
        assert [score for _, score in one] == pytest.approx([score for _, score in other], abs=1.01e-4), index
    return True


async def served_answers(project: Path, errlog: Path, postings_from: str, *, change: bool = False) -> Any:
    """A fresh server's answers (after its postings are made, when ``postings_from`` is low); with
    ``change``, after a save, an update and a delete made through it."""
    env = server_env(EVENTMEM_POSTINGS_FROM=postings_from, EVENTMEM_LOG_LEVEL="INFO")
    async with serve(project, env, errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        await call(session, "retrieve_context", query="warm up")  # (the store opens on the first call)
        await vectors_ready(session)  # (a fresh start embeds its memories in the background)
        if int(postings_from) <= MEMORIES:
            await wait_until(
                lambda: "keyword postings of" in errlog.read_text(encoding="utf-8"),
                errlog,
                lambda: f"no keyword postings were made: {errlog.read_text(encoding='utf-8')}",
            )
        if change:
            saved = await call(session, "store_memory", content="parse_config fails on a Straße with ERR_CONN_RESET")
            first = (await call(session, "search_memories", query="pool timeout", limit=2, mode="keyword"))["results"]
            await call(session, "update_memory", memory_id=first[0]["id"], content="now about deployed k8s workers")
            await call(session, "delete_memory", memory_id=first[1]["id"])
            assert saved["memory"]["id"]
        found = await answers(session)
    assert_clean_stderr(errlog)
    return found


@pytest.mark.slow  # many real processes: .ci/run's slow step
async def test_a_server_ranking_from_postings_answers_exactly_like_fts5_before_and_after_changes(
    project: Path, tmp_path: Path
) -> None:
    seed(project)
    fts5 = await served_answers(project, tmp_path / "fts5.log", "1000000")
    postings = await served_answers(project, tmp_path / "postings.log", "1")
    assert same(postings, fts5)
    assert sum(len(found) for found in fts5) > 5 * len(fts5)

    changed = await served_answers(project, tmp_path / "changed.log", "1", change=True)
    assert changed != fts5
    assert same(await served_answers(project, tmp_path / "fts5-after.log", "1000000"), changed)
    rebuilt = subprocess.run(
        eventmem_command("rebuild"), cwd=project, env=server_env(EVENTMEM_POSTINGS_FROM="1"), capture_output=True
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert same(await served_answers(project, tmp_path / "rebuilt.log", "1"), changed)
    assert same(await served_answers(project, tmp_path / "rebuilt-fts5.log", "1000000"), changed)


@pytest.mark.parametrize("value", ["many", "0", "-1", "\x1b[2J"])
def test_an_invalid_postings_threshold_in_the_environment_is_reported_in_one_line_and_the_default_used(
    project: Path, value: str
) -> None:
    seed(project)
    found = eventmem(project, "search", "pool timeout", "--json", env=server_env(EVENTMEM_POSTINGS_FROM=value))
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip()
    warnings = [line for line in found.stderr.splitlines() if "EVENTMEM_POSTINGS_FROM" in line]
    assert len(warnings) == 1, found.stderr
    assert "\x1b" not in found.stderr


@pytest.mark.slow  # many real processes: .ci/run's slow step
def test_a_command_that_ends_while_its_postings_are_being_made_exits_cleanly(project: Path) -> None:
    # a one-shot command starts the postings' thread and is done long before it: its exit used to
    # close the thread's tokenizer under it (a segmentation fault, two runs in three)
    rng = random.Random(5)
    events = [
        MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=" ".join(rng.choices(WORDS, k=40)))
        for _ in range(3000)
    ]
    write_events(project, events)
    env = server_env(EVENTMEM_POSTINGS_FROM="1")
    for _ in range(5):
        subprocess.run(["rm", "-rf", str(project / ".eventmem" / "cache")], check=True)  # (no postings kept)
        command = " ".join([*eventmem_command("log", "--limit", "10000"), "--root", str(project)])
        piped = ["bash", "-c", f"set -o pipefail; {command} | head -1"]
        ended = subprocess.run(piped, env=env, capture_output=True, text=True, timeout=120)
        assert ended.returncode == 0, ended.stderr[-2000:]
        assert "Fatal Python error" not in ended.stderr
        assert len(ended.stdout.splitlines()) == 1


async def test_a_rebuild_command_keeps_the_postings_and_approximate_index_a_server_then_reads_not_makes(
    project: Path, tmp_path: Path
) -> None:
    # a server closed by its client within seconds does not get to keep what it made in a snapshot:
    # the command's snapshot must hold them, or every server started from it makes them again
    seed(project)
    env = server_env(EVENTMEM_POSTINGS_FROM="100", EVENTMEM_ANN_FROM="300", EVENTMEM_LOG_LEVEL="INFO")
    rebuilt = subprocess.run(eventmem_command("rebuild"), cwd=project, env=env, capture_output=True, text=True)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "keyword postings of 400 memories made" in rebuilt.stderr
    assert "approximate vector index of 400 built" in rebuilt.stderr
    await assert_a_server_reads_both_from_the_snapshot(project, env, tmp_path / "served.log")


async def test_an_import_command_keeps_the_postings_and_approximate_index_a_server_then_reads_not_makes(
    project: Path, tmp_path: Path
) -> None:
    # an import's snapshot held the postings but not the approximate index (not built by the import,
    # or still being built when the snapshot was taken): every server started from it built it again
    seed(project)
    env = server_env(EVENTMEM_POSTINGS_FROM="100", EVENTMEM_ANN_FROM="300", EVENTMEM_LOG_LEVEL="INFO")
    dump = tmp_path / "dump.json"
    exported = subprocess.run(eventmem_command("export", "json", str(dump)), cwd=project, env=env, capture_output=True)
    assert exported.returncode == 0, exported.stderr
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    imported = subprocess.run(
        eventmem_command("import", "json", str(dump)), cwd=other, env=env, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    assert "400 added" in imported.stdout
    assert "approximate vector index of 400 built" in imported.stderr
    await assert_a_server_reads_both_from_the_snapshot(other, env, tmp_path / "served.log")


async def assert_a_server_reads_both_from_the_snapshot(project: Path, env: dict[str, str], errlog: Path) -> None:
    """A server started on ``project`` answers, and its log says it read the keyword postings and the
    approximate vector index of the 400 memories from the snapshot and made neither."""
    async with serve(project, env, errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        found = await call(session, "search_memories", query="pool timeout", limit=3, mode="hybrid")
        assert found["results"]
        await wait_until(
            lambda: "keyword postings of" in errlog.read_text(encoding="utf-8"),
            errlog,
            lambda: f"no keyword postings: {errlog.read_text(encoding='utf-8')}",
        )
    log = errlog.read_text(encoding="utf-8")
    assert "keyword postings of 400 memories read from the snapshot" in log
    assert "approximate vector index of 400 read from the snapshot" in log
    assert " made in " not in log and " built in " not in log
    assert_clean_stderr(errlog)
