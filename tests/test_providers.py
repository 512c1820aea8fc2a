"""Embedding providers: specs, the real ONNX model shipped by a PyPI package, and the HTTP providers
against local stand-ins that speak Ollama's and OpenAI's documented APIs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from embedding_standins import StandIn, closed_port, serve

from eventmem.core.errors import InvalidInput
from eventmem.embedders.providers import (
    EmbedderUnavailable,
    OllamaEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    ProviderError,
    make_embedder_from_spec,
    parse_spec,
)
from eventmem.journal.project import RootChoice
from eventmem.service import open_service

no_sleep: list[float] = []


def record_sleep(seconds: float) -> None:
    no_sleep.append(seconds)


# -- specs --------------------------------------------------------------------------------------


def test_a_spec_names_the_provider_the_model_the_address_and_options() -> None:
    spec = parse_spec("ollama:nomic-embed-text:latest@http://10.0.0.5:11434?batch=8&dim=768")
    assert (spec.kind, spec.model, spec.url) == ("ollama", "nomic-embed-text:latest", "http://10.0.0.5:11434")
    assert spec.options == {"batch": "8", "dim": "768"}
    assert parse_spec("onnx:minilm") == parse_spec(" onnx:minilm ")
    assert parse_spec("hashing").kind == "hashing"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bert:base", "unknown embedder"),
        ("ollama:", "names no model"),
        ("ollama:x@ftp://host", "must start with http"),
        ("ollama:nomic-embed-text?colour=blue", "colour=blue"),
        ("ollama:nomic-embed-text?batch=zero", "whole number"),
        ("ollama:my-own-model", "?dim="),
        ("onnx:gigantic", "unknown ONNX model"),
    ],
)
def test_a_bad_spec_is_refused_with_a_message_that_says_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("?", r"\?")):
        make_embedder_from_spec(spec)


def test_the_openai_provider_needs_a_key_for_the_real_service_but_not_for_a_local_server() -> None:
    with pytest.raises(InvalidInput, match="OPENAI_API_KEY"):
        OpenAIEmbedder.from_spec(parse_spec("openai:text-embedding-3-small"), environ={})
    local = OpenAIEmbedder.from_spec(parse_spec("openai:text-embedding-3-small@http://127.0.0.1:9/v1"), environ={})
    assert local.api_key is None and local.endpoint == "http://127.0.0.1:9/v1/embeddings"
    keyed = OpenAIEmbedder.from_spec(parse_spec("openai:text-embedding-3-large"), environ={"OPENAI_API_KEY": "sk-1"})
    assert keyed.api_key == "sk-1" and keyed.dim == 3072


def test_model_ids_name_the_model_and_size_but_not_the_address() -> None:
    here = make_embedder_from_spec("ollama:nomic-embed-text@http://127.0.0.1:1")
    there = make_embedder_from_spec("ollama:nomic-embed-text:latest@http://127.0.0.1:2")
    assert here.model_id == there.model_id == "ollama-nomic-embed-text:latest-768"
    assert make_embedder_from_spec("onnx:minilm").model_id == "onnx-all-MiniLM-L6-v2-int8-384"
    assert make_embedder_from_spec("ollama:nomic-embed-text?dim=512").model_id.endswith("-512")


def test_reading_the_config_loads_no_model() -> None:
    embedder = make_embedder_from_spec("onnx:minilm")
    assert isinstance(embedder, OnnxEmbedder) and not embedder.loaded


# -- ONNX ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[OnnxEmbedder]:
    embedder = OnnxEmbedder("minilm")
    embedder.load()
    yield embedder


def test_the_onnx_model_loads_from_the_package_and_gives_unit_vectors(minilm: OnnxEmbedder) -> None:
    vectors = minilm.embed(["The journal is the source of truth.", "", "x" * 5000])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_the_onnx_model_puts_paraphrases_closer_than_unrelated_sentences(minilm: OnnxEmbedder) -> None:
    pairs = [
        ("How do I make the flaky test pass reliably?", "The test fails intermittently because of a race."),
        ("Where do we keep database credentials?", "Secrets for Postgres live in the vault, not in the repo."),
        ("A man is eating food.", "A man is eating a piece of bread."),
    ]
    unrelated = "The quarterly marketing offsite is in Lisbon."
    for left, right in pairs:
        a, b, c = minilm.embed([left, right, unrelated])
        assert float(a @ b) > float(a @ c) + 0.2


def test_batching_and_length_sorting_do_not_change_the_vectors(minilm: OnnxEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about snapshots", "mid length text", "another one"]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_a_model_file_that_does_not_match_the_pinned_sha256_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    embedder = OnnxEmbedder("minilm")
    monkeypatch.setattr(embedder, "weights_path", lambda: fake)
    with pytest.raises(EmbedderUnavailable, match="sha256"):
        embedder.load()
    assert not embedder.loaded


# -- Ollama -------------------------------------------------------------------------------------


@pytest.fixture
def standin() -> Iterator[StandIn]:
    no_sleep.clear()
    with serve() as running:
        yield running


def ollama(standin: StandIn, **kwargs: object) -> OllamaEmbedder:
    options: dict[str, object] = {"url": standin.url, "dim": 768, "backoff": 0.01, "sleep": record_sleep}
    options.update(kwargs)
    return OllamaEmbedder("nomic-embed-text", **options)  # type: ignore[arg-type]


def test_ollama_texts_are_sent_in_batches_in_the_documented_request_format(standin: StandIn) -> None:
    texts = [f"memory {i} about the scheduler" for i in range(5)]
    vectors = ollama(standin, batch=2).embed(texts)
    assert [len(r["input"]) for r in standin.requests] == [2, 2, 1]
    assert all(r["model"] == "nomic-embed-text" for r in standin.requests)
    assert [t for r in standin.requests for t in r["input"]] == texts
    np.testing.assert_allclose(vectors, standin.embedder.embed(texts), atol=1e-6)


def test_ollama_server_errors_are_retried_with_backoff(standin: StandIn) -> None:
    standin.fail_with = [503, 500]
    vectors = ollama(standin, retries=3).embed(["retry me"])
    assert vectors.shape == (1, 768)
    assert len(standin.requests) == 3
    assert no_sleep == [0.01, 0.02]


def test_ollama_gives_up_after_the_retries_with_the_last_error(standin: StandIn) -> None:
    standin.fail_with = [503] * 5
    with pytest.raises(ProviderError, match=r"failed 3 times.*503"):
        ollama(standin, retries=2).embed(["x"])


def test_an_unknown_ollama_model_says_to_pull_it_and_is_not_retried(standin: StandIn) -> None:
    embedder = OllamaEmbedder("llama-embed", url=standin.url, dim=768, sleep=record_sleep)
    with pytest.raises(ProviderError, match="ollama pull llama-embed"):
        embedder.embed(["x"])
    assert len(standin.requests) == 1


def test_when_ollama_is_not_running_the_error_says_how_to_start_it() -> None:
    embedder = OllamaEmbedder(
        "nomic-embed-text", url=f"http://127.0.0.1:{closed_port()}", dim=768, retries=1, sleep=record_sleep
    )
    with pytest.raises(EmbedderUnavailable, match=r"Is it running.*ollama serve"):
        embedder.load()
    assert not embedder.loaded


def test_vectors_of_the_wrong_size_are_refused_with_the_size_to_configure(standin: StandIn) -> None:
    with pytest.raises(ProviderError, match=r"768-dimensional.*\?dim=768"):
        ollama(standin, dim=384).embed(["x"])


# -- OpenAI-compatible --------------------------------------------------------------------------


def test_openai_requests_carry_the_key_and_vectors_are_put_back_in_input_order(standin: StandIn) -> None:
    standin.api_key = "sk-test"
    standin.shuffle = True
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", url=standin.url + "/v1", dim=768, api_key="sk-test", batch=3, sleep=record_sleep
    )
    texts = [f"text number {i}" for i in range(4)]
    vectors = embedder.embed(texts)
    np.testing.assert_allclose(vectors, standin.embedder.embed(texts), atol=1e-6)
    assert standin.headers[0]["Authorization"] == "Bearer sk-test"
    assert standin.requests[0] == {"model": "text-embedding-3-small", "input": texts[:3], "encoding_format": "float"}


def test_openai_a_wrong_key_is_a_clear_error_and_not_retried(standin: StandIn) -> None:
    standin.api_key = "sk-right"
    embedder = OpenAIEmbedder("text-embedding-3-small", url=standin.url + "/v1", dim=768, api_key="sk-wrong")
    with pytest.raises(ProviderError, match=r"HTTP 401.*Incorrect API key"):
        embedder.embed(["x"])
    assert len(standin.requests) == 1


def test_openai_rate_limits_are_retried_after_the_time_the_server_asks(standin: StandIn) -> None:
    standin.fail_with = [429]
    standin.retry_after = "0.25"
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", url=standin.url + "/v1", dim=768, backoff=5.0, sleep=record_sleep
    )
    assert embedder.embed(["x"]).shape == (1, 768)
    assert no_sleep == [0.25]


def test_openai_dimensions_are_requested_when_the_spec_asks_for_shorter_vectors(standin: StandIn) -> None:
    embedder = OpenAIEmbedder.from_spec(
        parse_spec(f"openai:text-embedding-3-small@{standin.url}/v1?dimensions=256"), environ={}
    )
    vectors = embedder.embed(["short vectors please"])
    assert vectors.shape == (1, 256)
    assert standin.requests[0]["dimensions"] == 256
    np.testing.assert_allclose(np.linalg.norm(vectors), 1.0, atol=1e-5)


def test_an_unreachable_openai_compatible_endpoint_names_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    embedder = OpenAIEmbedder("text-embedding-3-small", url=url, dim=768, retries=0)
    with pytest.raises(EmbedderUnavailable, match=f"{url}/embeddings"):
        embedder.embed(["x"])


# -- through the service ------------------------------------------------------------------------


def test_a_project_configured_for_ollama_saves_and_recalls_with_its_vectors(standin: StandIn, project: Path) -> None:
    config = project / ".eventmem" / "config.local.toml"  # a remote embedder is the user's choice, never the repo's
    config.parent.mkdir()
    config.write_text(f'embedder = "ollama:nomic-embed-text@{standin.url}"\n')
    service = open_service(RootChoice(project, "test"))
    try:
        service.save("The scheduler retries failed jobs three times with jitter.", tags=["scheduler"])
        hits = service.recall("how often are failed jobs retried", mode="vector")
        assert hits and hits[0].vector_score > 0
        assert service.project.embedder.model_id == "ollama-nomic-embed-text:latest-768"
        assert service.warnings() == []
    finally:
        service.close()
    assert any(r["input"] == ["how often are failed jobs retried"] for r in standin.requests)


def test_when_the_embedding_server_is_down_saves_still_work_and_recall_falls_back_to_keywords(project: Path) -> None:
    env = {"EVENTMEM_EMBEDDER": f"ollama:nomic-embed-text@http://127.0.0.1:{closed_port()}?retries=0"}
    service = open_service(RootChoice(project, "test"), environ=env)
    try:
        saved = service.save("Deploys go through the blue-green switch in deploy/switch.sh.")
        hits = service.recall("blue-green deploys")
        assert [h.id for h in hits] == [saved.id]
        assert service.vector_status() == "unavailable"
        (note,) = service.search_notes()
        assert "cannot reach Ollama" in note and "keyword matches only" in note
    finally:
        service.close()


def test_search_shares_recalls_query_path_and_says_so_when_it_falls_back_to_keywords(project: Path) -> None:
    env = {"EVENTMEM_EMBEDDER": f"ollama:nomic-embed-text@http://127.0.0.1:{closed_port()}?retries=0"}
    service = open_service(RootChoice(project, "test"), environ=env)
    try:
        saved = service.save("Deploys go through the blue-green switch in deploy/switch.sh.")
        hits = service.search("blue-green deploys")
        assert [h.id for h in hits] == [h.id for h in service.recall("blue-green deploys")] == [saved.id]
        (note,) = service.search_notes()
        assert "cannot reach Ollama" in note and "keyword matches only" in note
    finally:
        service.close()


def test_a_question_asked_again_is_not_sent_to_the_embedding_server_again(standin: StandIn, project: Path) -> None:
    env = {"EVENTMEM_EMBEDDER": f"ollama:nomic-embed-text@{standin.url}"}
    service = open_service(RootChoice(project, "test"), environ=env)
    try:
        service.save("The scheduler retries failed jobs three times with jitter.", tags=["scheduler"])
        first = service.recall("how often are failed jobs retried", mode="vector")
        again = service.recall("how often are failed jobs retried", mode="vector")
        other = service.recall("which jobs does the scheduler run", mode="vector")
    finally:
        service.close()
    assert first and [h.id for h in again] == [h.id for h in first] and other
    asked = [r["input"] for r in standin.requests]
    assert asked.count(["how often are failed jobs retried"]) == 1
    assert asked.count(["which jobs does the scheduler run"]) == 1


def test_a_local_model_runs_on_one_thread_unless_a_batch_job_gives_it_its_cores_or_its_spec_names_them() -> None:
    """(a server shares the machine with its agent; ``eventmem sync`` embeds a whole journal, and gives
    a model the cores it may use)"""
    assert isinstance(server := make_embedder_from_spec("onnx:minilm"), OnnxEmbedder) and server.threads == 1
    assert isinstance(batch := make_embedder_from_spec("onnx:minilm", threads=4), OnnxEmbedder) and batch.threads == 4
    named = make_embedder_from_spec("onnx:minilm?threads=2", threads=4)
    assert isinstance(named, OnnxEmbedder) and named.threads == 2
    assert make_embedder_from_spec("onnx:minilm", threads=4).model_id == server.model_id  # (the same vectors)
