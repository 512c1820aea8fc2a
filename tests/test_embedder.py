"""The built-in hashing embedder: deterministic, offline, unit vectors that see identifiers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from eventmem.core.words import tokens
from eventmem.embedders.embedder import Embedder, HashingEmbedder


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_the_same_text_always_gives_the_same_vector() -> None:
    texts = ["retrieve the context before answering", "FAISS index with IDSelectorBitmap"]
    first = HashingEmbedder().embed(texts)
    second = HashingEmbedder().embed(list(reversed(texts)))[::-1]
    np.testing.assert_array_equal(first, second)


def test_vectors_are_unit_length_float32_rows_of_dimension_384() -> None:
    vectors = HashingEmbedder().embed(["one short text", "another, longer text about journals and snapshots"])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_the_model_id_is_stable_and_names_the_version_and_dimension() -> None:
    assert HashingEmbedder().model_id == HashingEmbedder().model_id == "hashing-v4-384"
    assert HashingEmbedder(version=3).model_id == "hashing-v3-384"
    assert HashingEmbedder(version=2).model_id == "hashing-v2-384"
    assert HashingEmbedder(version=1).model_id == "hashing-v1-384"
    assert HashingEmbedder().dim == 384
    small = HashingEmbedder(dim=64)
    assert small.model_id != HashingEmbedder().model_id
    assert small.embed(["x y z"]).shape == (1, 64)


def test_it_satisfies_the_embedder_protocol() -> None:
    assert isinstance(HashingEmbedder(), Embedder)


def test_identifier_forms_are_closer_to_each_other_than_to_an_unrelated_sentence() -> None:
    forms = ["retrieveContext", "retrieve_context", "retrieve the context"]
    unrelated = "the weather in Paris was sunny all afternoon"
    vectors = HashingEmbedder().embed([*forms, unrelated])
    other = vectors[3]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert cosine(vectors[i], vectors[j]) > cosine(vectors[i], other) + 0.3


def test_related_texts_score_higher_than_unrelated_ones() -> None:
    query, near, far = HashingEmbedder().embed(
        ["how do we rebuild the vector index", "the vector index is rebuilt from the journal", "lunch was pasta"]
    )
    assert cosine(query, near) > cosine(query, far)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "the of and a", "!!! ??? ..."])
def test_text_without_features_gives_a_zero_vector_without_error(text: str) -> None:
    vectors = HashingEmbedder().embed([text, "real words here"])
    assert not vectors[0].any()
    assert np.isfinite(vectors).all()
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-5)


def test_an_empty_batch_gives_an_empty_matrix() -> None:
    assert HashingEmbedder().embed([]).shape == (0, 384)


def test_tokens_split_camel_case_keeping_the_whole_identifier() -> None:
    assert tokens("retrieveContext") == ["retrievecontext", "retrieve", "context"]
    assert tokens("HTTPServer") == ["httpserver", "http", "server"]


def test_tokens_split_snake_case() -> None:
    assert tokens("retrieve_context") == ["retrieve_context", "retrieve", "context"]


def test_tokens_split_paths_into_their_parts() -> None:
    assert tokens("src/retrieveContext.py") == ["src/retrievecontext.py", "src", "retrieve", "context", "py"]


def test_tokens_lower_case_plain_words_and_drop_punctuation() -> None:
    assert tokens("Hello, World! (again)") == ["hello", "world", "again"]


@pytest.mark.parametrize("version", HashingEmbedder.VERSIONS)
def test_a_text_embedded_alone_is_bit_for_bit_its_row_of_a_batch(version: int) -> None:
    """A query is embedded alone; the memories it is compared with were embedded in batches."""
    texts = [
        "how do we retry the postgres pool timeout",
        "retry retry retry the pool pool timeout: counts above one weigh by their logarithm",
        "retrieveContext retrieve_context src/eventmem/runner/embedding.py",
        "Ünïcödé naïve café 日本語のテキスト 😀",
        "the of and a",
        "",
        "x" * 3000,
    ]
    embedder = HashingEmbedder(version=version)
    batch = embedder.embed(texts)
    for row, text in enumerate(texts):
        alone = embedder.embed([text])
        assert alone.dtype == np.float32
        assert alone[0].tobytes() == batch[row].tobytes()


def test_version_4_gives_nearly_the_vectors_of_version_3_from_a_table_of_words() -> None:
    """Version 4 looks each distinct word up once and sums a batch in numpy; its vectors stay within
    a few degrees of version 3's (the features are weighted within a word, not across the text)."""
    texts = [
        "how do we retry the postgres pool timeout",
        "retrieveContext retrieve_context src/eventmem/runner/embedding.py",
        "Marisol joined the GPU reading club last night and it was so inspiring",
        "Ünïcödé naïve café 日本語のテキスト 😀",
    ]
    old, new = HashingEmbedder(version=3).embed(texts), HashingEmbedder(version=4).embed(texts)
    assert all(float(a @ b) > 0.9 for a, b in zip(old, new, strict=True))


def test_version_4_answers_the_same_after_its_word_table_is_replaced() -> None:
    """The table of words is bounded: a full one is dropped and refilled, and a word's row is a pure
    function of the word, so the vectors do not change."""
    texts = ["the invoice numbers are allocated per tenant", "retry the pool timeout twice"]
    embedder = HashingEmbedder(version=4)
    before = embedder.embed(texts)
    embedder.embed([f"word{i} token{i}" for i in range(500)])  # many new words in between
    fresh = HashingEmbedder(version=4)
    assert embedder.embed(texts).tobytes() == before.tobytes() == fresh.embed(texts).tobytes()


def test_a_process_that_embeds_holds_the_word_piece_table_at_a_quarter_of_its_float32_size() -> None:
    """Every eventmem server embeds, one per agent: the table of MiniLM's 30,522 word pieces is held
    as shipped (int8 codes and a scale a piece: 3.9 MB), not as float32 (15.6 MB); with its tokenizer's
    vocabulary and the words of two texts, about 10 MB traced in a fresh process (22 MB with the
    float32 table)."""
    code = (
        "import gc, tracemalloc\n"
        "from eventmem.embedders.embedder import HashingEmbedder\n"
        "embedder = HashingEmbedder()\n"
        "tracemalloc.start()\n"
        "embedder.embed(['the retry of the pool timeout', 'parse_config in settings.py'])\n"
        "gc.collect()\n"
        "print(tracemalloc.get_traced_memory()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert int(done.stdout.split()[-1]) < 14 * 2**20
