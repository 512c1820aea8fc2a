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

Version 4 (the default) gives nearly the same vectors at ten times the speed, as model2vec-style
embedders do: each distinct word of the text (a raw token as :func:`eventmem.core.words.tokens`
finds them) is looked up once in a per-process table that holds its hashed features and its word
pieces, and a batch is then summed in numpy (one gather and one ``bincount``), with no Python per
feature. A word's features are weighted within the word (not the text), and the word pairs across
words are hashed from the words' codes in numpy rather than from their strings.
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
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

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
STATIC_FILES: Final = {
    2: DATA_DIR / "static-minilm-128.npz",
    3: DATA_DIR / "static-minilm-v3-128.npz",
    4: DATA_DIR / "static-minilm-v3-128.npz",
}
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

    VERSIONS: Final = (1, 2, 3, 4)
    DEFAULT_VERSION: Final = 4
    STATIC_WEIGHTS: Final = {2: 1.5, 3: 2.0, 4: 2.0}
    """How much the semantic part weighs against the hashed part (each is unit length first)."""

    def __init__(self, dim: int = 384, version: int = DEFAULT_VERSION) -> None:
        if version not in self.VERSIONS:
            raise ValueError(f"hashing embedder version {version} does not exist (1, 2, 3 or 4)")
        self._dim = dim
        self.version = version
        self._static_dim = min(128, dim // 3) if version in STATIC_FILES else 0
        self._words: _WordTable | None = None
        self._words_lock = threading.Lock()

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
        if self.version >= 4:
            return self._looked_up(texts)
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

    def _looked_up(self, texts: list[str]) -> Vectors:
        """Version 4: the words' rows of the table, summed per text in numpy (see the module's doc)."""
        hashed_dim = self._dim - self._static_dim
        count = len(texts)
        with self._words_lock:
            if self._words is None or self._words.full():
                self._words = _WordTable(self, hashed_dim)
            words = self._words
            per_text = [words.rows(text) for text in texts]
            per_pair = [words.pairs(rows) for rows in per_text]
            table = words.view()
        pair_lengths = np.fromiter(map(len, per_pair), np.int64, count)
        pair_codes = np.fromiter(itertools.chain.from_iterable(per_pair), np.int64, int(pair_lengths.sum()))
        pair_owner = np.repeat(np.arange(count, dtype=np.int64), pair_lengths)
        lengths = np.fromiter(map(len, per_text), np.int64, count)
        rows = np.fromiter(itertools.chain.from_iterable(per_text), np.int64, int(lengths.sum()))
        owner = np.repeat(np.arange(count, dtype=np.int64), lengths)
        hashed = np.zeros(count * hashed_dim, dtype=np.float64)
        if len(rows):
            size = table.feature_count[rows]
            spread_rows = _expand(table.feature_start[rows], size)
            # as version 3, a feature weighs by the logarithm of its count in the text (features of one
            # kind and sign that share a dimension are counted together): one bin per text, dimension
            # and kind, the table holding each feature's dimension and kind as ``part``
            bins = count * hashed_dim * 4
            slot = np.repeat(owner * (hashed_dim * 4), size) + table.part[spread_rows]
            totals = np.bincount(slot, table.counted[spread_rows], minlength=bins)
            if len(pair_codes):
                hashes = pair_codes >> 1
                pair_part = ((hashes % hashed_dim) << 2) | (pair_codes & 1) | ((hashes >> 30) & 2)
                totals += np.bincount(pair_owner * (hashed_dim * 4) + pair_part, minlength=bins)
            hashed = np.log1p(totals.reshape(-1, 4)) @ _FACTORS64
        out = np.zeros((count, self._dim), dtype=np.float32)
        block = hashed.reshape(count, hashed_dim)
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out[:, :hashed_dim] = block / norms
        if self._static_dim and len(rows):
            at, size = table.piece_start[rows], table.piece_count[rows]
            pieces = table.piece[_expand(at, size)]
            piece_owner = np.repeat(owner, size)
            if len(pieces):
                vectors = table.vectors[pieces]
                starts = np.flatnonzero(np.r_[True, piece_owner[1:] != piece_owner[:-1]])
                sums = np.add.reduceat(vectors, starts, axis=0)
                norms = np.linalg.norm(sums, axis=1, keepdims=True)
                norms[norms == 0] = 1.0
                out[piece_owner[starts], hashed_dim:] = sums / norms * self.STATIC_WEIGHTS[self.version]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out


_FACTORS64: Final = _FACTORS.astype(np.float64)
_RUN: Final = re.compile(r"[\w.\-/]+")
"""A run of the characters a raw token is made of; the token (:data:`eventmem.core.words.TOKEN_PATTERN`) is the run
without its leading and trailing ``._-/`` (one token per run, none if nothing is left)."""


def _expand(start: npt.NDArray[np.int64], size: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The indexes ``start[i] .. start[i] + size[i] - 1`` of every ``i``, in order (CSR rows, flattened)."""
    total = int(size.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(size)
    offsets = np.repeat(start - (ends - size), size)
    out: npt.NDArray[np.int64] = np.arange(total, dtype=np.int64) + offsets
    return out


class _Grown:
    """A numpy array that grows: values are appended to a list and moved into the array, which grows by
    doubling, when it is read (a view taken earlier keeps what it held)."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self.data: npt.NDArray[Any] = np.zeros(1024, dtype=dtype)
        self.stored = 0
        self.pending: list[Any] = []

    @property
    def size(self) -> int:
        return self.stored + len(self.pending)

    def read(self) -> npt.NDArray[Any]:
        if self.pending:
            end = self.size
            if end > len(self.data):
                grown = np.zeros(max(end, 2 * len(self.data)), dtype=self.data.dtype)
                grown[: self.stored] = self.data[: self.stored]
                self.data = grown
            self.data[self.stored : end] = self.pending
            self.stored, self.pending = end, []
        return self.data[: self.stored]


class _TableView(NamedTuple):
    feature_start: npt.NDArray[np.int64]
    feature_count: npt.NDArray[np.int64]
    part: npt.NDArray[np.int64]
    counted: npt.NDArray[np.float64]
    piece_start: npt.NDArray[np.int64]
    piece_count: npt.NDArray[np.int64]
    piece: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]


class _WordTable:
    """Every distinct raw token met so far: its hashed features (dimension and kind, count in the token), the words
    of its first and last word (for word pairs across tokens), and its content word pieces; row 0
    is the empty row of a stop word. Bounded: a full table is replaced by an empty one (a row is a
    pure function of its token, so the vectors do not change)."""

    MAX_ROWS: Final = 200_000

    def __init__(self, embedder: HashingEmbedder, hashed_dim: int) -> None:
        self.embedder = embedder
        self.hashed_dim = hashed_dim
        self.row_of: dict[str, int] = {}
        self.pair_code: dict[tuple[int, int], int] = {}
        self.first_word: list[str] = [""]
        self.last_word: list[str] = [""]
        self.pieces: WordPiece | None = None
        self.vectors: npt.NDArray[np.float32] = np.zeros((1, 0), np.float32)
        if embedder._static_dim:
            self.pieces, table = _Static.get(embedder.version)
            self.vectors = np.ascontiguousarray(table[:, : embedder._static_dim])
        self.feature_start, self.feature_count = _Grown(np.int64), _Grown(np.int64)
        self.part, self.count = _Grown(np.int64), _Grown(np.float64)
        self.piece_start, self.piece_count, self.piece = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        self._add_row([], [], [])

    def full(self) -> bool:
        return len(self.row_of) >= self.MAX_ROWS

    def rows(self, text: str) -> list[int]:
        """The rows of the text's raw tokens that are not stop words, in order (new ones added)."""
        raws = _RUN.findall(text)  # (a raw token is its run without the ends the token pattern leaves out)
        out = list(map(self.row_of.get, raws))
        if None in out:  # (a word new to the table may come several times in the text: one row for it)
            out = [self._row(raw) if row is None else row for raw, row in zip(raws, out, strict=True)]
        if 0 in out:
            out = [row for row in out if row]
        return out  # type: ignore[return-value]

    def pairs(self, rows: list[int]) -> list[int]:
        """The feature codes of the word pairs across the text's consecutive tokens (``b:last first``)."""
        pairs = list(itertools.pairwise(rows))
        out = list(map(self.pair_code.get, pairs))
        if None in out:
            out = [self._pair(pair) if code is None else code for pair, code in zip(pairs, out, strict=True)]
        return out  # type: ignore[return-value]

    def _pair(self, pair: tuple[int, int]) -> int:
        code = self.pair_code.get(pair)
        return self._new_pair(pair) if code is None else code

    def _new_pair(self, pair: tuple[int, int]) -> int:
        code = _feature_code(f"b:{self.last_word[pair[0]]} {self.first_word[pair[1]]}")
        self.pair_code[pair] = code
        return code

    def view(self) -> _TableView:
        return _TableView(
            self.feature_start.read(),
            self.feature_count.read(),
            self.part.read(),
            self.count.read(),
            self.piece_start.read(),
            self.piece_count.read(),
            self.piece.read(),
            self.vectors,
        )

    def _row(self, run: str) -> int:
        row = self.row_of.get(run)
        return self._new(run) if row is None else row

    def _new(self, run: str) -> int:
        raw = run.strip("._-/")
        if raw != run and raw in self.row_of:
            self.row_of[run] = self.row_of[raw]
            return self.row_of[run]
        words = [stem(w) for w in tokens(raw) if w not in STOPWORDS]
        pieces = self.pieces.content_ids(raw) if self.pieces is not None else []
        if not words and not pieces:
            self.row_of[run] = 0
            return 0
        feats: dict[str, int] = {}
        for word in words:
            key = "w:" + word
            feats[key] = feats.get(key, 0) + 2
            if len(word) > 3:
                for gram in _char_ngrams(word):
                    feats[gram] = feats.get(gram, 0) + 1
        for first_word, second_word in itertools.pairwise(words):
            key = f"b:{first_word} {second_word}"
            feats[key] = feats.get(key, 0) + 1
        codes = [_feature_code(feature) for feature in feats]
        row = self._add_row(codes, [float(c) for c in feats.values()], pieces)
        self.first_word.append(words[0] if words else "")
        self.last_word.append(words[-1] if words else "")
        self.row_of[run] = row
        return row

    def _add_row(self, codes: list[int], counts: list[float], pieces: list[int]) -> int:
        row = self.feature_start.size
        self.feature_start.pending.append(self.part.size)
        self.feature_count.pending.append(len(codes))
        dim = self.hashed_dim
        self.part.pending += [(((c >> 1) % dim) << 2) | (c & 1) | (((c >> 1) >> 30) & 2) for c in codes]
        self.count.pending += counts
        self.piece_start.pending.append(self.piece.size)
        self.piece_count.pending.append(len(pieces))
        self.piece.pending += pieces
        return row
