"""Version 4 of the built-in embedder gives the same vectors bit for bit, whatever its code becomes.

Every project's embedding cache is keyed by ``hashing-v4-384``: a change in the vectors without a new
version would mix two kinds of vectors in one index. The digests below were computed on the code that
introduced version 4 (the hand-picked texts' digests again when one of them was replaced, on code that
reproduced every other digest); a faster implementation must reproduce them, or the version must change."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from eventmem.embedders.embedder import HashingEmbedder

CASES = [
    "how do we retry the postgres pool timeout",
    "retry retry retry the pool pool timeout: counts above one weigh by their logarithm",
    "retrieveContext retrieve_context src/eventmem/runner/embedding.py",
    "HTTPServer parseJSONResponse XMLHttpRequest getHTTPResponseCode IOError",
    "__init__ _private __dunder__ a_b_c --flag -x ./run.sh ../up/one .hidden trailing. ...dots...",
    "v1.2.3 3.14159 10_000 0x1F 2026-12-02 12:30:45 #42 @user user@example.org",
    "https://example.org/path/to/page?query=1&other=two#frag",
    "Ünïcödé naïve café 日本語のテキスト 😀 Straße ÆØÅ Ελληνικά русский текст",
    "ﬁne ligatures ① ② Ⅻ ½ ² ³ ‰ ™ — – … “quotes” ‘single’ «guillemets»",
    "tab\tseparated\nnew line\r\ncarriage \x00 null \x07 bell \x1b escape \x7f del",
    "the of and a",
    "",
    "   ",
    "...,,,;;;!!!???",
    "._-/ _ - . / __ -- .. //",
    "x" * 3000,
    "supercalifragilisticexpialidocious" * 4,
    "a" * 101 + " " + "b" * 99,
    "ends with stop word the",
    "Marisol joined the GPU reading club last night and it was so inspiring",
    "The invoice numbers are allocated per tenant, sequentially, without gaps!",
    "running runs ran runner quickly quietly boxes boxed boxing",
    "ÀÉÎÕÜ àéîõü ÇÑ çñ İı ǅ ǲ",
    "emoji🙂inside words and 👍🏽 modifiers and 🇫🇷 flags",
    "mixed123numbers456and789letters abc123 123abc a1b2c3",
    "CamelCase_with_snake-and-kebab/and/path.ext",
    "word. word, word; word: word! word? (word) [word] {word} <word> 'word' \"word\"",
]

WORDS = (
    "memory journal snapshot index vector keyword recall search merge branch commit event project "
    "retry timeout pool postgres invoice tenant allocate support group went yesterday powerful the of "
    "and a to in is it that was for on are with as I his they be at one have this from or had by"
).split()
PIECES = [*WORDS, "café", "naïve", "日本", "Ωμέγα", "über", "Σ", "ß", "İ", "🙂", "x_y", "aB", "HTTP", "2026", "v2"]
JOINERS = [" ", " ", " ", ", ", ". ", "_", "-", "/", ".", "", "\n", "  ", ": ", "!", "(", ")", "'"]


def generated(count: int, seed: int) -> list[str]:
    """Texts of random words, identifiers, numbers and scripts, glued by spaces and punctuation."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(0, 60)):
            kind = rng.randrange(4)
            if kind == 0:
                parts.append(rng.choice(PIECES))
            elif kind == 1:
                parts.append(
                    "".join(
                        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789éß_")
                        for _ in range(rng.randrange(1, 14))
                    )
                )
            else:
                parts.append(rng.choice(WORDS))
            parts.append(rng.choice(JOINERS))
        out.append("".join(parts))
    return out


def digest(vectors: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(vectors, dtype=np.float32).tobytes()).hexdigest()


PINNED = {
    384: (
        "88ed809a2f74e94399ec7c1567e17d28ee10e1c6699e0ff087001ef143f20a06",
        "af0e11575751e76ac3831e68b6326f5982d31920ae6d7fb6c720f714c0c21f87",
    ),
    96: (
        "45cb5b0841451e5d750fa82dda7fd60bdd604aafd1edb031cc1f2f854ff0e954",
        "834b927d87701355238e4844431109726d90daad410bc042211b4a90384a1d70",
    ),
}


@pytest.mark.parametrize("dim", sorted(PINNED))
def test_version_4_vectors_are_bit_for_bit_those_it_was_released_with(dim: int) -> None:
    cases, random_texts = PINNED[dim]
    embedder = HashingEmbedder(dim=dim, version=4)
    assert embedder.model_id == f"hashing-v4-{dim}"
    assert digest(embedder.embed(CASES)) == cases
    assert digest(embedder.embed(generated(400, seed=dim))) == random_texts


def test_version_4_vectors_do_not_depend_on_the_batch_or_on_words_met_before() -> None:
    """A cold table (every word new), a warm one, one text at a time or all at once: the same bytes."""
    texts = CASES + generated(200, seed=1)
    cold = HashingEmbedder().embed(texts)
    warm = HashingEmbedder()
    warm.embed(generated(300, seed=2))
    assert warm.embed(texts).tobytes() == cold.tobytes()
    alone = HashingEmbedder()
    rows = np.vstack([alone.embed([text]) for text in reversed(texts)])[::-1]
    assert rows.tobytes() == cold.tobytes()
    halves = HashingEmbedder()
    split = len(texts) // 3
    assert np.vstack([halves.embed(texts[split:]), halves.embed(texts[:split])][::-1]).tobytes() == cold.tobytes()


def long_texts() -> list[str]:
    """Texts whose word pieces number around where numpy's pairwise sums change their way (8 and 128 values)."""
    rng = random.Random(11)
    sizes = [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 130, 131, 200, 257, 300, 520]
    return [" ".join(rng.choice(WORDS + PIECES) for _ in range(size)) for size in sizes]


LONG_PINNED = "cc45124cd9e6dee166d6c1591bc369eb5bec84851cf1f0d3a207ddbd44a520bc"
"""Of :func:`long_texts` and ``generated(60, seed=5)`` at 384 dimensions, computed on version 4's code before its
batches summed word pieces in blocks."""


def test_version_4_vectors_of_long_texts_are_bit_for_bit_the_same_in_a_batch_and_alone() -> None:
    texts = long_texts() + generated(60, seed=5)
    batch = HashingEmbedder().embed(texts)
    assert digest(batch) == LONG_PINNED
    alone = HashingEmbedder()
    assert np.vstack([alone.embed([text]) for text in texts]).tobytes() == batch.tobytes()


def test_a_text_holding_control_characters_has_the_same_vector_in_a_batch_and_alone() -> None:
    texts = ["one \x01 two", "three\x01four five", "\x01", "six seven", "eight \x01", *generated(20, seed=9)]
    batch = HashingEmbedder().embed(texts)
    alone = HashingEmbedder()
    assert np.vstack([alone.embed([text]) for text in texts]).tobytes() == batch.tobytes()
    assert batch[:2].any()


def test_many_new_numbers_in_one_batch_have_the_same_vectors_as_each_alone() -> None:
    """Numbers new to the table, hundreds in one call (their word pieces found together), as one by one."""
    rng = random.Random(12)
    texts = [
        f"note {rng.randrange(10 ** rng.randrange(1, 25))} case {rng.randrange(10**6):07d} v{rng.randrange(99)}"
        for _ in range(300)
    ]
    batch = HashingEmbedder().embed(texts)
    alone = HashingEmbedder()
    assert np.vstack([alone.embed([text]) for text in texts]).tobytes() == batch.tobytes()


EARLIER_VERSIONS = {
    (2, 384): (
        "3098eb2c7dcf3c665a79b048131c6e64546c02dee17c3af473c3b78fc441d6c4",
        "6884a80f97ced99de741a8a6e99d56fd536c2d78d9fe320a081dfca358160c67",
    ),
    (2, 96): (
        "31940f9276a87ca3bae1391dd77d9aad8217e13f2af7d22033699f1668fd6284",
        "57dc63b3df3a081a67be541d6e660c9ff295f3039ad49baee45dfd5473fab9b9",
    ),
    (3, 384): (
        "b0610b2e1d4f78f25e9ee491bb41a970b244aa556c99301efb82cdc435016eec",
        "a5e33b30e7041b81289e963f67d3cfb5221e67d8c5cecf6c560043b6225637b7",
    ),
    (3, 96): (
        "e9fddb8ec2069d175db07530cdbce9b1dfdcb6eef49b074452654c660df76c33",
        "3917912cb4a6057b7c59e21b69e29ebe3f2c959b56d116c4fd7b0be0f68d2e19",
    ),
}
"""Versions 2 and 3 (a project's cache may still be keyed by them), computed on the code that held the
word pieces' table as float32, before it was held as shipped (int8 codes and a scale a piece)."""


@pytest.mark.parametrize(("version", "dim"), sorted(EARLIER_VERSIONS))
def test_versions_2_and_3_vectors_are_bit_for_bit_those_of_the_float32_table(version: int, dim: int) -> None:
    cases, random_texts = EARLIER_VERSIONS[(version, dim)]
    embedder = HashingEmbedder(dim=dim, version=version)
    assert digest(embedder.embed(CASES)) == cases
    assert digest(embedder.embed(generated(200, seed=dim + version))) == random_texts
