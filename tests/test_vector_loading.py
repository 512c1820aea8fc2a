"""A slow embedding model never blocks: the handshake and the tools answer while it loads, with
keyword results that say so; and a change of model re-embeds everything and drops the old cache."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import Implementation

from eventmem.adapters.mcp.server import build_server
from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.embedders.embedder import HashingEmbedder, Loadable, Vectors
from eventmem.embedders.providers import ProviderError
from eventmem.journal.config import Config
from eventmem.journal.project import ProjectPaths, RootChoice, sanitize
from eventmem.runner.runner import Store
from eventmem.service import MemoryService


class GatedEmbedder:
    """A model that loads only when the test opens the gate, and counts what it embeds."""

    def __init__(self, name: str = "gated", *, open_gate: bool = False) -> None:
        self._inner = HashingEmbedder()
        self.name = name
        self.gate = threading.Event()
        if open_gate:
            self.gate.set()
        self._loaded = False
        self.embedded: list[str] = []
        self.fail_next = False
        self.lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"{self.name}-384"

    @property
    def dim(self) -> int:
        return 384

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        self.gate.wait()
        self._loaded = True

    def embed(self, texts: list[str]) -> Vectors:
        self.load()
        with self.lock:
            if self.fail_next:
                self.fail_next = False
                raise ProviderError("the model server went away")
            self.embedded.extend(texts)
        return self._inner.embed(texts)


def open_with(project: Path, embedder: Any, *, background: bool) -> MemoryService:
    store = Store(ProjectPaths(project), Config(), embedder)
    service = MemoryService(store, root=RootChoice(project, "test"))
    store.open(background_vectors=background)
    return service


def seed(project: Path, count: int) -> list[str]:
    service = open_with(project, HashingEmbedder(), background=False)
    ids = [
        service.save(f"Memory {i}: the payment webhook retries use exponential backoff, case {i}.").id
        for i in range(count)
    ]
    service.save("Blue-green deploys switch traffic in deploy/switch.sh after the smoke tests pass.")
    service.close()
    return ids


@pytest.fixture
def gated() -> Iterator[GatedEmbedder]:
    embedder = GatedEmbedder()
    yield embedder
    embedder.gate.set()  # never leave a worker waiting


def test_the_gated_test_embedder_is_a_loadable_embedder() -> None:
    assert isinstance(GatedEmbedder(), Loadable)


def test_while_the_model_loads_recall_answers_from_keywords_and_says_so(project: Path, gated: GatedEmbedder) -> None:
    seed(project, 3)
    service = open_with(project, gated, background=True)
    try:
        assert service.vector_status() == "loading"
        hits = service.recall("blue-green deploys")
        assert hits and "deploy/switch.sh" in hits[0].summary
        assert hits[0].vector_score == 0.0
        (note,) = service.warnings()
        assert "still loading" in note and "keyword matches only" in note
        gated.gate.set()
        assert service.project.wait_vectors()
        hits = service.recall("blue-green deploys")
        assert hits[0].vector_score > 0
        assert service.warnings() == []
    finally:
        service.close()


def test_a_save_made_while_the_model_loads_is_found_by_keywords_then_by_vectors(
    project: Path, gated: GatedEmbedder
) -> None:
    service = open_with(project, gated, background=True)
    try:
        saved = service.save("Use ruff format, not black, for every Python file.")
        assert [h.id for h in service.recall("ruff format")] == [saved.id]
        gated.gate.set()
        assert service.project.wait_vectors()
        assert service.recall("ruff format", mode="vector")[0].id == saved.id
        assert gated.embedded.count("Use ruff format, not black, for every Python file.") == 1
    finally:
        service.close()


def test_once_ready_a_new_save_is_embedded_within_the_call(project: Path) -> None:
    embedder = GatedEmbedder(open_gate=True)
    service = open_with(project, embedder, background=True)
    try:
        assert service.project.wait_vectors()
        saved = service.save("Pin faiss-cpu below 2 until the IDSelector API settles.")
        assert service.vector_status() == "ready"
        assert service.recall("faiss version pin", mode="vector")[0].id == saved.id
    finally:
        service.close()


def test_a_snapshot_is_not_written_while_vectors_are_missing(project: Path, gated: GatedEmbedder) -> None:
    seed(project, 2)
    snapshot = ProjectPaths(project).cache_dir / "snapshot.bin"
    snapshot.unlink(missing_ok=True)
    service = open_with(project, gated, background=True)
    try:
        assert service.project.save_snapshot() is False
        assert not snapshot.exists()
        gated.gate.set()
        assert service.project.wait_vectors()
    finally:
        service.close()
    assert snapshot.exists()  # written by the worker once done, or at close


def test_an_embedder_failure_leaves_saves_working_and_recall_on_keywords(project: Path) -> None:
    embedder = GatedEmbedder(open_gate=True)
    service = open_with(project, embedder, background=True)
    try:
        assert service.project.wait_vectors()
        embedder.fail_next = True
        saved = service.save("The nightly export job writes to s3://exports/nightly.")
        assert service.vector_status() == "unavailable"
        assert [h.id for h in service.recall("nightly export")] == [saved.id]
        assert "the model server went away" in service.warnings()[0]
    finally:
        service.close()


# -- the MCP server -----------------------------------------------------------------------------


@asynccontextmanager
async def connect(project: Path, embedder: Any) -> AsyncIterator[Client]:
    def opener(root: RootChoice) -> MemoryService:
        return open_with(root.root, embedder, background=True)

    server = build_server(RootChoice(project, "test"), opener=opener)
    async with Client(server, client_info=Implementation(name="pytest", version="1"), mode="legacy") as client:
        yield client


@pytest.mark.anyio
async def test_the_server_answers_initialize_and_tools_while_the_model_is_still_loading(
    project: Path, gated: GatedEmbedder
) -> None:
    seed(project, 2)
    async with connect(project, gated) as client:
        try:
            assert client.server_info is not None and client.server_info.name == "eventmem"
            result = await client.call_tool("retrieve_context", {"query": "blue-green deploys switch"})
            assert not result.is_error
            content = result.structured_content
            assert content is not None
            assert "deploy/switch.sh" in content["results"][0]["summary"]
            assert any("still loading" in w for w in content["warnings"])
        finally:
            gated.gate.set()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a change of model ------------------------------------------------------------------------


def test_changing_the_model_re_embeds_every_memory_once_and_drops_the_old_cache(project: Path) -> None:
    ids = seed(project, 5)
    cache = ProjectPaths(project).cache_dir / "embeddings"
    old = cache / f"{sanitize(HashingEmbedder().model_id)}.bin"
    assert old.exists()
    new_model = GatedEmbedder("new-model", open_gate=True)
    progress: list[tuple[int, int]] = []
    store = Store(ProjectPaths(project), Config(), new_model)
    store.embedding.progress = lambda done, total: progress.append((done, total))
    service = MemoryService(store, root=RootChoice(project, "test"))
    store.open()
    try:
        assert not old.exists()
        assert (cache / "model").read_text() == "new-model-384"
        assert len(new_model.embedded) == len(set(new_model.embedded)) == len(ids) + 1
        assert service.recall("payment webhook backoff", mode="vector")
    finally:
        service.close()
    # the next start uses the snapshot and the new cache: nothing is embedded again
    again = GatedEmbedder("new-model", open_gate=True)
    service = open_with(project, again, background=False)
    service.close()
    assert again.embedded == []


def test_a_rebuild_with_a_large_backlog_reports_embedding_progress(project: Path) -> None:
    seed(project, 300)
    embedder = GatedEmbedder("progress-model", open_gate=True)
    progress: list[tuple[int, int]] = []
    store = Store(ProjectPaths(project), Config(), embedder)
    store.embedding.progress = lambda done, total: progress.append((done, total))
    store.rebuild()
    store.close()
    assert progress[-1] == (301, 301)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)


def test_a_new_model_that_cannot_embed_does_not_cost_the_old_models_cache(project: Path) -> None:
    seed(project, 3)
    cache = ProjectPaths(project).cache_dir / "embeddings"
    old = cache / f"{sanitize(HashingEmbedder().model_id)}.bin"
    broken = GatedEmbedder("unreachable-model", open_gate=True)
    broken.fail_next = True
    service = open_with(project, broken, background=False)
    try:
        assert service.vector_status() == "unavailable"
        assert service.recall("blue-green deploys")  # keywords still answer
    finally:
        service.close()
    assert old.exists()
    assert (cache / "model").read_text() == HashingEmbedder().model_id


@pytest.mark.parametrize("background", [False, True])
def test_memories_with_the_same_text_are_embedded_once(project: Path, background: bool) -> None:
    service = open_with(project, HashingEmbedder(), background=False)
    for _ in range(3):
        service.project.append(
            [
                MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content="Same words, three memories."),
                MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content="Same words, three memories."),
            ]
        )
    service.close()
    embedder = GatedEmbedder("dedup-model", open_gate=True)
    service = open_with(project, embedder, background=background)
    try:
        assert service.project.wait_vectors() or not background
        assert embedder.embedded == ["Same words, three memories."]
        assert len(service.project.derived.vectors) == 6
    finally:
        service.close()
