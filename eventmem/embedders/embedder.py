"""Embedders turn text into unit vectors. The built-in one needs no model and no network.

An :class:`Embedder` has a ``model_id`` that keys the embedding cache (a change of model re-embeds
everything), a ``dim``, and ``embed`` for a batch. The default, :class:`HashingEmbedder`, hashes
word, word-pair and character n-gram features into a fixed-size vector (the "hashing trick"):
deterministic, offline, a few thousand texts a second, and better than keywords alone at
morphology and identifiers (``retrieveContext`` ~ ``retrieve_context`` ~ "retrieve the context").

Version 2 added a small semantic part: static word-piece vectors distilled once from the
all-MiniLM-L6-v2 sentence model (``tools/distill_static.py``, shipped as a 4 MB int8 table), averaged
over the text's word pieces. It knows that "billed twice" is near "duplicate charge" a little, at
the cost of a table lookup: still numpy only, offline, deterministic. Version 3 (the default) keeps
the same design with a better table: fitted so that the mean of a sentence's word-piece vectors
comes close to MiniLM's own vector of the sentence, over some 90,000 sentences of Python
documentation (model2vec's "tokenlearn"), and weighted a little more against the hashed part.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import unicodedata
import zlib
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from eventmem.core.words import STOPWORDS, stem, tokens

__all__ = ["Embedder", "HashingEmbedder", "Loadable", "normalize_rows", "tokens"]

Vectors = npt.NDArray[np.float32]


def normalize_rows(matrix: Vectors) -> Vectors:
    """Each row scaled to length 1 (an all-zero row stays zero), as float32."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return out


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised float32 row per text."""
        ...


@runtime_checkable
class Loadable(Protocol):
    """An embedder whose model takes a while to get ready (a model file, a server to reach).

    The store calls :meth:`load` in the background and answers with keyword search until it
    returns; ``embed`` on an embedder that is not loaded loads it first.
    """

    @property
    def loaded(self) -> bool: ...

    def load(self) -> None: ...


DATA_DIR: Final = Path(__file__).parent.parent / "data"
STATIC_FILES: Final = {2: DATA_DIR / "static-minilm-128.npz", 3: DATA_DIR / "static-minilm-v3-128.npz"}
"""The distilled word-piece table of each version that has one (``tools/distill_static.py --recipe``)."""
STATIC_FILE: Final = STATIC_FILES[3]
TOKENIZER_FILE: Final = DATA_DIR / "all-MiniLM-L6-v2.tokenizer.json"


class WordPiece:
    """BERT's uncased tokenization (normalise, split on spaces and punctuation, greedy longest-match
    word pieces) in plain Python: enough to look up the static vectors without the tokenizers
    library. Ids match ``tokenizers`` on the same tokenizer.json."""

    def __init__(self, path: Path = TOKENIZER_FILE) -> None:
        spec = json.loads(path.read_text(encoding="utf-8"))
        model = spec["model"]
        self.vocab: dict[str, int] = model["vocab"]
        self.prefix: str = model.get("continuing_subword_prefix", "##")
        self.max_chars: int = model.get("max_input_chars_per_word", 100)
        self.unknown = self.vocab.get(model.get("unk_token", "[UNK]"), 100)
        self.word_ids = lru_cache(maxsize=65536)(self._word_ids)

    @staticmethod
    def words(text: str) -> list[str]:
        if text.isascii():  # the common case, in one regex: same result as the loop below
            return _ASCII_WORD.findall(_ASCII_CONTROL.sub("", text.lower()))
        text = unicodedata.normalize("NFD", text.lower())
        out: list[str] = []
        current: list[str] = []
        for char in text:
            category = unicodedata.category(char)
            if category == "Mn" or (category.startswith("C") and not char.isspace()) or char == "\ufffd":
                continue  # accents (stripped as BERT uncased does) and control characters
            if char.isspace():
                if current:
                    out.append("".join(current))
                    current = []
            elif category.startswith("P") or (char.isascii() and not char.isalnum()) or _is_cjk(char):
                if current:
                    out.append("".join(current))
                    current = []
                out.append(char)
            else:
                current.append(char)
        if current:
            out.append("".join(current))
        return out

    def _word_ids(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_chars:
            return (self.unknown,)
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unknown,)
            ids.append(found)
            start = end
        return tuple(ids)

    def ids(self, text: str) -> list[int]:
        return [i for word in self.words(text) for i in self.word_ids(word)]

    def content_ids(self, text: str) -> list[int]:
        """The word pieces of the text's words that are neither stop words nor punctuation."""
        return [
            i
            for word in self.words(text)
            if word not in STOPWORDS and any(c.isalnum() for c in word)
            for i in self.word_ids(word)
        ]


# For ASCII text BERT's basic tokenization is: drop control characters, split on white space, and
# make every other non-alphanumeric character a word of its own.
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")
_ASCII_WORD = re.compile(r"[a-z0-9]+|[^a-z0-9\s]")


def _is_cjk(char: str) -> bool:
    """CJK ideographs are words of their own in BERT's tokenization."""
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


class _Static:
    """The distilled word-piece table, loaded once per process on first use."""

    _lock = threading.Lock()
    _pieces: WordPiece | None = None
    _tables: dict[int, npt.NDArray[np.float32]] = {}  # noqa: RUF012 (one per process, behind the lock)

    @classmethod
    def get(cls, version: int) -> tuple[WordPiece, npt.NDArray[np.float32]]:
        with cls._lock:
            if cls._pieces is None:
                cls._pieces = WordPiece()
            table = cls._tables.get(version)
            if table is None:
                with np.load(STATIC_FILES[version]) as data:
                    table = (data["vectors"].astype(np.float32) * data["scale"][:, None]).astype(np.float32)
                cls._tables[version] = table
            return cls._pieces, table


@lru_cache(maxsize=65536)
def _char_ngrams(word: str) -> tuple[str, ...]:
    """The 3- and 4-grams of ``<word>`` (a word's own boundary marks included), in order."""
    marked = f"<{word}>"
    return tuple(marked[i : i + n] for n in (3, 4) for i in range(len(marked) - n + 1))


@lru_cache(maxsize=262144)
def _feature_code(feature: str) -> int:
    """The feature's CRC-32 times two, plus one for a word or word-pair feature (``w:``/``b:``)."""
    return zlib.crc32(feature.encode()) * 2 + (feature[1] == ":")


_FACTORS: Final = np.array([0.5, 2.0, -0.5, -2.0], np.float32)
"""A feature's weight factor by its kind and sign (index: 1 for a word or word-pair feature, plus 2 for
a hash with its top bit set): word features weigh more than the many n-grams of the same word.
Powers of two, so one product is the same float32 as a weighting and a sign applied one after the other."""


class HashingEmbedder:
    """Feature-hashed words, word pairs and character n-grams, L2-normalised (numpy only); versions 2
    and 3 (the default) also average static word-piece vectors distilled from MiniLM into a third of
    the dimensions."""

    VERSIONS: Final = (1, 2, 3)
    DEFAULT_VERSION: Final = 3
    STATIC_WEIGHTS: Final = {2: 1.5, 3: 2.0}
    """How much the semantic part weighs against the hashed part (each is unit length first)."""

    def __init__(self, dim: int = 384, version: int = DEFAULT_VERSION) -> None:
        if version not in self.VERSIONS:
            raise ValueError(f"hashing embedder version {version} does not exist (1, 2 or 3)")
        self._dim = dim
        self.version = version
        self._static_dim = min(128, dim // 3) if version in STATIC_FILES else 0

    @property
    def model_id(self) -> str:
        return f"hashing-v{self.version}-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def features(self, text: str) -> Counter[str]:
        words = [stem(w) for w in tokens(text) if w not in STOPWORDS]
        feats: Counter[str] = Counter()
        for word in words:
            feats["w:" + word] += 2
            if len(word) > 3:
                feats.update(_char_ngrams(word))
        feats.update(f"b:{first} {second}" for first, second in itertools.pairwise(words))
        return feats

    def embed(self, texts: list[str]) -> Vectors:
        if not self._static_dim:
            return self._hashed(texts, self._dim)
        hashed = self._hashed(texts, self._dim - self._static_dim)
        semantic = self._semantic(texts) * self.STATIC_WEIGHTS[self.version]
        out = np.hstack([hashed, semantic])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: Vectors = (out / norms).astype(np.float32, copy=False)
        return result

    def warm(self) -> None:
        """Load the word-piece table now (it is otherwise loaded by the first text embedded)."""
        if self._static_dim:
            _Static.get(self.version)

    def _semantic(self, texts: list[str]) -> Vectors:
        """Mean of the text's content word pieces' static vectors, unit length (zero if none)."""
        pieces, table = _Static.get(self.version)
        out = np.zeros((len(texts), self._static_dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = pieces.content_ids(text)
            if ids:
                vector = table[ids, : self._static_dim].sum(axis=0)
                norm = float(np.linalg.norm(vector))
                if norm > 0:
                    out[row] = vector / norm
        return out

    def _hashed(self, texts: list[str], dim: int) -> Vectors:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            feats = self.features(text)
            if not feats:
                continue
            codes = np.fromiter(map(_feature_code, feats), dtype=np.int64, count=len(feats))
            hashes = codes >> 1  # (a CRC-32: its top bit gives the sign)
            weights = np.log1p(np.fromiter(feats.values(), dtype=np.float32, count=len(feats)))
            weights *= _FACTORS[(codes & 1) | ((hashes >> 30) & 2)]
            np.add.at(out[row], hashes % dim, weights)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out
