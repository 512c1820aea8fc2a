"""A project whose vectors came from an earlier version of the built-in embedder keeps working when a
new version is the default: the server answers from keywords, and says so, while it embeds every
memory again in the background; then it answers with the new vectors and the old cache is gone."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from conftest import eventmem_command, wait_until, write_events
from mcp_client import assert_clean_stderr, call, serve, server_env

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.journal.project import ProjectPaths, sanitize

pytestmark = pytest.mark.anyio

MEMORIES = 3000
"""Enough that embedding them all takes the new version many batches (a question comes first)."""
SUBJECTS = "invoice webhook queue cache deploy schema token cursor backup migration".split()
VERBS = "retries expires rotates drops splits renames pins throttles".split()


def seed(project: Path) -> str:
    """Memories in the journal, as another process of this clone wrote them; the id of the one about
    the nightly backup."""
    rng = random.Random(33)
    events = [
        MemorySaved(
            id=new_id(),
            ts=now_iso(),
            memory=new_id(),
            content=f"The {rng.choice(SUBJECTS)} {rng.choice(VERBS)} after {rng.randrange(2, 90)} seconds, case {n}.",
        )
        for n in range(MEMORIES)
    ]
    backup = MemorySaved(
        id=new_id(), ts=now_iso(), memory=new_id(), content="Nightly backups of the orders database go to cold storage."
    )
    write_events(project, [*events, backup])
    return backup.memory


async def test_a_project_embedded_by_the_previous_version_answers_from_keywords_while_it_is_embedded_again(
    project: Path, tmp_path: Path
) -> None:
    backup = seed(project)
    old = HashingEmbedder(version=3).model_id
    # an install of the previous version embeds every memory (its cache and snapshot hold v3 vectors)
    subprocess.run(
        eventmem_command("search", "nightly backups"),
        cwd=project,
        env=server_env(EVENTMEM_EMBEDDER="hashing:v3"),
        check=True,
        capture_output=True,
    )
    embeddings = ProjectPaths(project).cache_dir / "embeddings"
    assert (embeddings / "model").read_text() == old
    new = HashingEmbedder().model_id
    assert new != old
    errlog = tmp_path / "serve.log"
    async with serve(project, server_env(), errlog, args=["--tools", "core,memory"]) as session:
        await session.initialize()
        first = await call(session, "retrieve_context", query="nightly backups orders database", limit=3)
        assert first["results"][0]["id"] == backup  # keyword matches answer at once
        (warning,) = first["warnings"]
        assert f"still being embedded with {new}" in warning and "keyword matches only" in warning
        await wait_until(
            lambda: (embeddings / "model").read_text() == new,
            embeddings,
            lambda: f"the new version never finished: {sorted(p.name for p in embeddings.iterdir())}",
        )
        done = await call(session, "retrieve_context", query="nightly backups orders database", limit=3)
        assert "warnings" not in done
        assert done["results"][0]["id"] == backup
        found = await call(session, "search_memories", query="backups of the orders database", mode="vector", limit=3)
        assert "warnings" not in found  # (the vector index answered, not the keyword fallback)
        assert found["results"][0]["id"] == backup
        assert not (embeddings / f"{sanitize(old)}.bin").exists()
    assert_clean_stderr(errlog)
