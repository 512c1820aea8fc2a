"""Version 4 of the built-in embedder gives the same vectors bit for bit, whatever its code becomes.

Every project's embedding cache is keyed by ``hashing-v4-384``: a change in the vectors without a new
version would mix two kinds of vectors in one index. The digests below were computed on the code that
introduced version 4 (the hand-picked texts' digests again when one of them was replaced, on code that
reproduced every other digest); a faster implementation must reproduce them, or the version must change."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

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
        "4c228335fba16b6577f743afba254164fab7514600353e994c7451ca325934b7",
        "e49531d9913a67622544fe883a928ff76e6d5e8e11b66a4bf337c56aca712405",
    ),
    (2, 96): (
        "7a800b1f9ef44cf0b778008ff0ec79c17a2e3344366b0754672bdb9b3238d62e",
        "b510e315e5221573723d4fa756cbe69238ea47c561369b87cb80551af11c5430",
    ),
    (3, 384): (
        "16e16a03ac7e030a6dd24b6950fd10d75c0123ad0fd706cd2a61b191d5fa15ad",
        "d478abd9da65e2a4dbfade5382e26cdced6db706d5e7666fcf7a777ff6426ac4",
    ),
    (3, 96): (
        "1eab975706c37e03ca0c620f009526d0d9ba20a8947470f01e06ea35b0f63d2f",
        "3f06b7bdaddac497f7ba576322394efe609415ef26f0cee6ca1a403b78951e1c",
    ),
}
"""Versions 2 and 3 (a project's cache may still be keyed by them), computed on the code that holds the
word pieces' table as shipped (int8 codes and a scale a piece), which made the float32 table's vectors
bit for bit, once the semantic part's length was summed by numpy instead of the BLAS library (whose
kernel, chosen for the processor at run time, changed up to 4 units in the last place of a vector's
values from one machine to another)."""


@pytest.mark.parametrize(("version", "dim"), sorted(EARLIER_VERSIONS))
def test_versions_2_and_3_vectors_are_bit_for_bit_those_pinned(version: int, dim: int) -> None:
    cases, random_texts = EARLIER_VERSIONS[(version, dim)]
    embedder = HashingEmbedder(dim=dim, version=version)
    assert digest(embedder.embed(CASES)) == cases
    assert digest(embedder.embed(generated(200, seed=dim + version))) == random_texts


BLAS_KERNELS = ["Haswell", "SkylakeX", "Sandybridge", "Zen", "Prescott"]
"""Kernels of numpy's OpenBLAS a machine may be given at run time (``OPENBLAS_CORETYPE`` picks one); each
adds a dot product's terms in an order of its own."""

DIGESTS_OF_EVERY_VERSION = """
import sys
import numpy as np
from eventmem.embedders.embedder import HashingEmbedder
sys.path.insert(0, sys.argv[1])
from test_embedder_pinned import CASES, digest, generated
for version, dim in [(4, 384), (4, 96), (3, 384), (2, 384)]:
    embedder = HashingEmbedder(dim=dim, version=version)
    print(digest(embedder.embed(CASES)), digest(embedder.embed(generated(100, seed=7))),
          digest(np.vstack([embedder.embed([text]) for text in CASES[:8]])))
"""


def test_the_vectors_do_not_depend_on_the_processors_blas_kernel() -> None:
    """A machine whose BLAS library runs another kernel embeds the same texts to the same bits (a cache or
    a database made on one machine is read on another)."""
    tests = str(Path(__file__).parent)
    printed = {
        kernel: subprocess.run(
            [sys.executable, "-c", DIGESTS_OF_EVERY_VERSION, tests],
            env={**os.environ, "OPENBLAS_CORETYPE": kernel},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for kernel in BLAS_KERNELS
    }
    assert len(printed["Haswell"].splitlines()) == 4
    assert len(set(printed.values())) == 1, printed
