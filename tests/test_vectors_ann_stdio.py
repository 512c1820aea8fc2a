"""The approximate vector index end to end: ``eventmem serve`` over stdio with ``EVENTMEM_ANN_FROM``
lowered answers like a server that scans exactly, keeps a deleted memory out of every answer, and a
rebuild of the cache from the journal answers alike."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem
from conftest import eventmem_command, wait_until, write_events
from mcp import ClientSession
from mcp_client import assert_clean_stderr, call, serve, server_env, vectors_ready

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso

pytestmark = pytest.mark.anyio

MEMORIES = 600
ANN_FROM = "200"
TOPICS = (
    "postgres pool timeout retry",
    "celery queue worker deploy",
    "react hydration bundle vite",
    "terraform staging vpc subnet",
    "pytest fixture flaky ci",
    "auth token refresh cookie",
    "kafka consumer lag partition",
    "docker image layer cache",
)
FILLER = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega rust go java kotlin swift".split()
QUERIES = ("pool timeout", "queue worker", "hydration bundle", "staging subnet", "flaky fixture", "token cookie")


def seed(project: Path) -> None:
    """Memories written to the journal as another process of this clone would."""
    rng = random.Random(17)
    events = []
    for number in range(MEMORIES):
        topic = rng.randrange(len(TOPICS))
        words = rng.sample(TOPICS[topic].split(), 3) + rng.sample(FILLER, 4) + [f"item{number}"]
        rng.shuffle(words)
        content = " ".join(words)
        events.append(MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=content, tags=(f"t{topic}",)))
    write_events(project, events)


async def answers(session: ClientSession) -> list[list[tuple[str, float]]]:
    """Hybrid and vector-only answers to each query, unfiltered and filtered by a tag (an eighth of the memories)."""
    out = []
    for number, query in enumerate(QUERIES):
        for arguments in ({"mode": "hybrid"}, {"mode": "vector"}, {"mode": "vector", "tags": f"t{number + 1}"}):
            found = await call(session, "search_memories", query=query, limit=10, **arguments)
            out.append([(hit["id"], hit["score"]) for hit in found["results"]])
    return out


def same(found: list[list[tuple[str, float]]], expected: list[list[tuple[str, float]]]) -> bool:
    """The same memories in the same order, with the same scores but for float rounding (the paths
    sum a cosine's products in different orders). Scores are shown to four places, and a hybrid
    score's recency moves a little between two servers asked minutes apart on a busy machine, so two
    equal answers may differ by one in the last place shown (seen: 0.5834 and 0.5835)."""
    ids = [[memory_id for memory_id, _ in answer] for answer in found]
    assert ids == [[memory_id for memory_id, _ in answer] for answer in expected]
    scores = [score for answer in found for _, score in answer]
    assert scores == pytest.approx([score for answer in expected for _, score in answer], abs=1.01e-4)
    return True


async def served_answers(project: Path, errlog: Path, ann_from: str, *, delete: str | None = None) -> Any:
    """The answers of a fresh server (its approximate index built first when ``ann_from`` is low)."""
    env = server_env(EVENTMEM_ANN_FROM=ann_from, EVENTMEM_LOG_LEVEL="INFO")
    async with serve(project, env, errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        await call(session, "retrieve_context", query="warm up")  # (the store opens on the first call)
        await vectors_ready(session)  # (a fresh start embeds its memories in the background)
        if int(ann_from) <= MEMORIES:
            await wait_until(
                lambda: "approximate vector index of" in errlog.read_text(encoding="utf-8"),
                errlog,
                lambda: f"no approximate index was built: {errlog.read_text(encoding='utf-8')}",
            )
        if delete is not None:
            await call(session, "delete_memory", memory_id=delete)
        found = await answers(session)
    assert_clean_stderr(errlog)
    return found


@pytest.mark.slow  # many real processes: .ci/run's slow step
async def test_a_server_above_the_lowered_threshold_answers_like_the_exact_scan_and_like_a_rebuild(
    project: Path, tmp_path: Path
) -> None:
    seed(project)
    exact = await served_answers(project, tmp_path / "exact.log", "1000000")
    approximate = await served_answers(project, tmp_path / "ann.log", ANN_FROM)
    assert same(approximate, exact)
    assert sum(len(found) for found in exact) > 10 * len(exact) // 2

    gone = exact[1][0][0]  # (the best vector-only answer to the first query)
    after_delete = await served_answers(project, tmp_path / "delete.log", ANN_FROM, delete=gone)
    assert all(gone not in {memory_id for memory_id, _ in found} for found in after_delete)

    rebuilt = subprocess.run(
        eventmem_command("rebuild"), cwd=project, env=server_env(EVENTMEM_ANN_FROM=ANN_FROM), capture_output=True
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert same(await served_answers(project, tmp_path / "rebuilt.log", ANN_FROM), after_delete)
    assert same(await served_answers(project, tmp_path / "exact-after.log", "1000000"), after_delete)


@pytest.mark.slow  # many real processes: .ci/run's slow step
async def test_a_restarted_server_reads_its_approximate_index_from_the_snapshot_and_answers_alike(
    project: Path, tmp_path: Path
) -> None:
    seed(project)
    first = await served_answers(project, tmp_path / "first.log", ANN_FROM)
    assert "approximate vector index of" in (tmp_path / "first.log").read_text(encoding="utf-8")
    again = await served_answers(project, tmp_path / "again.log", ANN_FROM)
    said = (tmp_path / "again.log").read_text(encoding="utf-8")
    assert f"approximate vector index of {MEMORIES} read from the snapshot" in said
    assert re.search(r"approximate vector index of \d+ built", said) is None  # (nothing built)
    assert same(again, first)


@pytest.mark.parametrize("value", ["many", "-5", "0", "1e9", "99999999999999999999", "\x1b[2J"])
def test_an_invalid_ann_threshold_in_the_environment_is_reported_in_one_line_and_the_default_used(
    project: Path, value: str
) -> None:
    seed(project)
    env = server_env(EVENTMEM_ANN_FROM=value)
    found = eventmem(project, "search", "pool timeout", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip()
    warnings = [line for line in found.stderr.splitlines() if "EVENTMEM_ANN_FROM" in line]
    assert len(warnings) == 1, found.stderr
    assert "\x1b" not in found.stderr
