"""Versions 2 and 3 of the built-in embedder: hashed n-grams plus static word-piece vectors distilled
from MiniLM, tokenized in plain Python exactly as the tokenizers library does."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from eventmem.embedders.embedder import STATIC_FILE, STATIC_FILES, TOKENIZER_FILE, HashingEmbedder, WordPiece
from eventmem.embedders.providers import make_embedder_from_spec

TEXTS = [
    "Invoice numbers are allocated with a Postgres sequence per organization (invoice_number_seq_<org_id>).",
    "retrieve_context() in src/retrieveContext.py raised KeyError: 'app.current_org'",
    "Crème brûlée, naïve café — 東京 résumé! ÅNGSTRÖM",
    "tab\there\x00ctrl  émoji 🎉 Ωmega a\u200bb x\ufffdy",
    "x" * 150,
    "",
]


@pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="needs the onnx extra")
def test_word_pieces_match_the_tokenizers_library() -> None:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(TOKENIZER_FILE))
    reference.no_padding()
    reference.no_truncation()
    ours = WordPiece()
    for text in TEXTS:
        assert ours.ids(text) == reference.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("version", [2, 3])
def test_the_distilled_tables_ship_with_the_package(version: int) -> None:
    with np.load(STATIC_FILES[version]) as data:
        assert data["vectors"].shape == (30522, 128) and data["vectors"].dtype == np.int8
        assert data["scale"].shape == (30522,)
    assert STATIC_FILE == STATIC_FILES[3]


def test_the_version_3_table_records_how_it_was_fitted() -> None:
    with np.load(STATIC_FILES[3]) as data:
        assert int(data["sentences"]) > 50_000
        assert len(str(data["corpus_sha256"])) == len(str(data["source_sha256"])) == 64


@pytest.mark.parametrize("version", [2, 3, 4])
def test_paraphrases_come_closer_than_with_the_purely_lexical_version(version: int) -> None:
    pairs = [
        ("customer says they were billed twice", "refund a duplicate charge for the same payment"),
        ("which teammate is responsible for payments", "Payments and Stripe are owned by Marco"),
        ("how long must we keep financial records", "invoices are retained for ten years"),
    ]
    for version_gain in [
        float(v2[0] @ v2[1]) - float(v1[0] @ v1[1])
        for v1, v2 in (
            (HashingEmbedder(version=1).embed(list(pair)), HashingEmbedder(version=version).embed(list(pair)))
            for pair in pairs
        )
    ]:
        assert version_gain > 0.05


@pytest.mark.parametrize("version", [2, 3, 4])
def test_versions_with_static_vectors_keep_identifier_forms_close(version: int) -> None:
    forms = ["retrieveContext", "retrieve_context", "retrieve the context"]
    vectors = HashingEmbedder(version=version).embed([*forms, "the weather in Paris was sunny all afternoon"])
    for i in range(3):
        for j in range(3):
            if i != j:
                assert float(vectors[i] @ vectors[j]) > float(vectors[i] @ vectors[3]) + 0.3


def test_the_spec_chooses_the_version_and_the_default_is_4() -> None:
    assert make_embedder_from_spec("hashing").model_id == "hashing-v4-384"
    assert make_embedder_from_spec("hashing:v4").model_id == "hashing-v4-384"
    assert make_embedder_from_spec("hashing:v3").model_id == "hashing-v3-384"
    assert make_embedder_from_spec("hashing:v2").model_id == "hashing-v2-384"
    assert make_embedder_from_spec("hashing:v1").model_id == "hashing-v1-384"
    with pytest.raises(ValueError, match="version 5"):
        HashingEmbedder(version=5)


def test_small_dimensions_still_split_between_hashed_and_static_parts() -> None:
    vectors = HashingEmbedder(dim=64).embed(["a short text about invoices", ""])
    assert vectors.shape == (2, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)
    assert not vectors[1].any()
