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
        # the longest piece that begins with each three characters, for a word's first piece and for the
        # pieces that continue it (the greedy match below tries no longer one: the same pieces, sooner)
        self.following = {key[len(self.prefix) :]: i for key, i in self.vocab.items() if key.startswith(self.prefix)}
        """The pieces that continue a word, without their prefix."""
        self.longest_first: dict[str, int] = {}
        self.longest_next: dict[str, int] = {}
        for key in self.vocab:
            if len(key) >= 3:
                self.longest_first[key[:3]] = max(self.longest_first.get(key[:3], 0), len(key))
            within = key[len(self.prefix) :]
            if key.startswith(self.prefix) and len(within) >= 3:
                self.longest_next[within[:3]] = max(self.longest_next.get(within[:3], 0), len(within))
        self.word_ids = lru_cache(maxsize=65536)(self._word_ids)
        self.content_word_ids = lru_cache(maxsize=65536)(self._content_word_ids)

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
        first, following = self.vocab.get, self.following.get
        start, size = 0, len(word)
        while start < size:
            bound = (self.longest_next if start else self.longest_first).get(word[start : start + 3], 2)
            lookup = following if start else first
            end = min(size, start + bound)
            found = None
            while start < end:
                found = lookup(word[start:end])
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
        return [i for word in self.words(text) for i in self.content_word_ids(word)]

    def _content_word_ids(self, word: str) -> tuple[int, ...]:
        if word in STOPWORDS or not any(c.isalnum() for c in word):
            return ()
        return self.word_ids(word)


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
            per_text = words.rows(texts)
            table = words.view()
        lengths = np.fromiter(map(len, per_text), np.int64, count)
        rows = np.fromiter(itertools.chain.from_iterable(per_text), np.int64, int(lengths.sum()))
        owner = np.repeat(np.arange(count, dtype=np.int64), lengths)
        content = rows != 0  # (row 0: a stop word, left out, also from the word pairs)
        rows, owner = rows[content], owner[content]
        hashed = np.zeros(count * hashed_dim, dtype=np.float64)
        if len(rows):
            size = table.feature_count[rows]
            spread_rows = _expand(table.feature_start[rows], size)
            # as version 3, a feature weighs by the logarithm of its count in the text (features of one
            # kind and sign that share a dimension are counted together): one bin per text, dimension
            # and kind, the table holding each feature's dimension and kind as ``part`` (the counts are
            # whole numbers, so their float64 sums do not depend on the order they are added in)
            bins = count * hashed_dim * 4
            slot = np.repeat(owner * (hashed_dim * 4), size) + table.part[spread_rows]
            totals = np.bincount(slot, table.counted[spread_rows], minlength=bins).astype(np.float64, copy=False)
            # the word pairs across consecutive tokens of a text (``b:last first``), hashed in numpy
            same = owner[1:] == owner[:-1]
            if same.any():
                hashes = words.pair_crcs(table, rows[:-1][same], rows[1:][same])
                pair_part = ((hashes % hashed_dim) << 2) | 1 | ((hashes >> 30) & 2)
                totals += np.bincount(owner[1:][same] * (hashed_dim * 4) + pair_part, minlength=bins)
            hashed = _log1p_of_counts(totals).reshape(-1, 4) @ _FACTORS64
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
_LOG1P_TABLE: Final = 1 << 16


@lru_cache(maxsize=1)
def _log1p_table() -> npt.NDArray[np.float64]:
    return np.log1p(np.arange(_LOG1P_TABLE, dtype=np.float64))


def _log1p_of_counts(totals: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``np.log1p(totals)`` of whole numbers, looked up (the same values, a third of the time)."""
    if not len(totals) or totals.max() >= _LOG1P_TABLE:
        out: npt.NDArray[np.float64] = np.log1p(totals)
        return out
    looked: npt.NDArray[np.float64] = _log1p_table()[totals.astype(np.int64)]
    return looked


_RUN: Final = re.compile(r"[\w.\-/]+")
"""A run of the characters a raw token is made of; the token (:data:`eventmem.core.words.TOKEN_PATTERN`) is the run
without its leading and trailing ``._-/`` (one token per run, none if nothing is left)."""


_RUN_BYTES: Final = bytes(c if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_.-/") else 32 for c in range(256))
"""Each byte of an ASCII text a run is made of kept, every other one a space."""


def _ascii_runs(text: str) -> list[str]:
    """``_RUN.findall(text)`` of an ASCII text, a third of the time (the runs split at what is not in one)."""
    return text.encode("ascii").translate(_RUN_BYTES).decode("ascii").split()


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
    """A numpy array that grows: chunks are appended to a list and moved into the array, which grows by
    doubling, when it is read (a view taken earlier keeps what it held)."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self.data: npt.NDArray[Any] = np.zeros(1024, dtype=dtype)
        self.stored = 0
        self.pending: list[npt.NDArray[Any] | list[Any]] = []
        self.pending_size = 0

    @property
    def size(self) -> int:
        return self.stored + self.pending_size

    def extend(self, values: npt.NDArray[Any] | list[Any]) -> None:
        """Append an array or a list (a few values: a list is cheaper than an array)."""
        if isinstance(values, list) and self.pending and isinstance(self.pending[-1], list):
            self.pending[-1] += values
        else:
            self.pending.append(values)
        self.pending_size += len(values)

    def read(self) -> npt.NDArray[Any]:
        if self.pending:
            end = self.size
            if end > len(self.data):
                grown = np.zeros(max(end, 2 * len(self.data)), dtype=self.data.dtype)
                grown[: self.stored] = self.data[: self.stored]
                self.data = grown
            if len(self.pending) == 1:
                self.data[self.stored : end] = self.pending[0]
            else:
                self.data[self.stored : end] = np.concatenate([np.asarray(c, self.data.dtype) for c in self.pending])
            self.stored, self.pending, self.pending_size = end, [], 0
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
    last_crc: npt.NDArray[np.int64]
    first_crc: npt.NDArray[np.int64]
    first_length: npt.NDArray[np.int64]


def _crc_table() -> npt.NDArray[np.int64]:
    """CRC-32's table of one byte (zlib's polynomial, reflected)."""
    out = np.zeros(256, np.int64)
    for value in range(256):
        crc = value
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
        out[value] = crc
    return out


_CRC_BYTE: Final = _crc_table()
_FEW_ROWS: Final = 8
"""Up to this many new rows in a call are made one by one in Python, more together in numpy."""
_SHIFT_MAX: Final = 64
"""Word pairs whose second part (a space and the word, UTF-8) is longer than this are hashed in Python."""


@lru_cache(maxsize=1)
def _shift_tables() -> npt.NDArray[np.int64]:
    """``T[n, j, v]`` (flattened): how the byte ``v`` at place ``j`` of a CRC-32 is carried over ``n`` more bytes.

    CRC-32 is linear: ``crc32(a + b) == shift(crc32(a), len(b)) ^ crc32(b)`` where ``shift(c, n)`` is
    ``T[n, 0, c & 255] ^ T[n, 1, c >> 8 & 255] ^ T[n, 2, c >> 16 & 255] ^ T[n, 3, c >> 24]`` (zlib's
    ``crc32_combine``), so a word pair's code comes from its two words' codes in numpy."""
    basis = np.array(
        [[zlib.crc32(bytes(n), 1 << bit) ^ zlib.crc32(bytes(n)) for bit in range(32)] for n in range(_SHIFT_MAX + 1)],
        np.int64,
    ).reshape(_SHIFT_MAX + 1, 4, 1, 8)
    bits = (np.arange(256, dtype=np.int64)[:, None] >> np.arange(8, dtype=np.int64)) & 1
    out: npt.NDArray[np.int64] = np.bitwise_xor.reduce(np.where(bits == 1, basis, 0), axis=-1).ravel()
    return out


def _ascii_ngram_codes(words: list[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The CRC-32 of every 3- and 4-gram of ``<word>`` of each (ASCII) word, in numpy, and the index of
    the word each belongs to (the same codes as :func:`_feature_code` of :func:`_char_ngrams`, halved)."""
    marked = np.frombuffer("".join(f"<{word}>" for word in words).encode("ascii"), np.uint8).astype(np.int64)
    length = np.fromiter(map(len, words), np.int64, len(words)) + 2
    offset = np.cumsum(length) - length
    codes, owners = [], []
    for n in (3, 4):
        grams = length - n + 1
        start = _expand(offset, grams)
        crc = np.full(len(start), 0xFFFFFFFF, np.int64)
        for k in range(n):
            crc = _CRC_BYTE[(crc ^ marked[start + k]) & 0xFF] ^ (crc >> 8)
        codes.append(crc ^ 0xFFFFFFFF)
        owners.append(np.repeat(np.arange(len(words), dtype=np.int64), grams))
    return np.concatenate(codes), np.concatenate(owners)


class _WordTable:
    """Every distinct raw token met so far: its hashed features (dimension and kind, count in the token), the codes
    of its first and last word (for word pairs across tokens), and its content word pieces; row 0
    is the empty row of a stop word. The new tokens of a call are added together, their words' features
    computed once per word (character n-grams hashed in numpy). Bounded: a full table is replaced by an
    empty one (a row is a pure function of its token, so the vectors do not change)."""

    MAX_ROWS: Final = 200_000

    def __init__(self, embedder: HashingEmbedder, hashed_dim: int) -> None:
        self.embedder = embedder
        self.hashed_dim = hashed_dim
        self.row_of: dict[str, int] = {}
        self.rows_added = 1
        self.first_word: list[str] = [""]
        self.pieces: WordPiece | None = None
        self.vectors: npt.NDArray[np.float32] = np.zeros((1, 0), np.float32)
        if embedder._static_dim:
            self.pieces, table = _Static.get(embedder.version)
            self.vectors = np.ascontiguousarray(table[:, : embedder._static_dim])
        self.feature_start, self.feature_count = _Grown(np.int64), _Grown(np.int64)
        self.part, self.count = _Grown(np.int64), _Grown(np.float64)
        self.piece_start, self.piece_count, self.piece = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        self.last_crc, self.first_crc, self.first_length = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        # the features of each word met (its ``w:`` feature and its character n-grams), by word
        self.word_index: dict[str, int] = {}
        self.word_start, self.word_count = _Grown(np.int64), _Grown(np.int64)
        self.word_part, self.word_counted = _Grown(np.int64), _Grown(np.float64)
        for grown, value in (
            (self.feature_start, 0),
            (self.feature_count, 0),
            (self.piece_start, 0),
            (self.piece_count, 0),
            (self.last_crc, zlib.crc32(b"b:")),
            (self.first_crc, zlib.crc32(b" ")),
            (self.first_length, 1),
        ):
            grown.extend([value])

    def full(self) -> bool:
        return len(self.row_of) >= self.MAX_ROWS

    def rows(self, texts: list[str]) -> list[list[int]]:
        """The rows of each text's raw tokens, in order (new ones added; 0 for a stop word)."""
        # (a raw token is its run without the ends the token pattern leaves out)
        runs = [_ascii_runs(text) if text.isascii() else _RUN.findall(text) for text in texts]
        get = self.row_of.get
        out: list[list[int | None]] = [list(map(get, text_runs)) for text_runs in runs]
        new = [i for i, text_rows in enumerate(out) if None in text_rows]
        if new:  # (a token new to the table may come several times in the batch: one row for it)
            self._add(
                list(dict.fromkeys(run for i in new for run, row in zip(runs[i], out[i], strict=True) if row is None))
            )
            for i in new:
                out[i] = list(map(get, runs[i]))
        return out  # type: ignore[return-value]

    def pair_crcs(
        self, view: _TableView, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The CRC-32 of ``b:{last word of left} {first word of right}`` for each pair of rows."""
        crc = view.last_crc[left]
        length = view.first_length[right]
        long = length > _SHIFT_MAX
        shift, at = _shift_tables(), np.minimum(length, _SHIFT_MAX) << 10  # (each length's table: 4 x 256)
        out: npt.NDArray[np.int64] = (
            shift[at | (crc & 0xFF)]
            ^ shift[at | 256 | ((crc >> 8) & 0xFF)]
            ^ shift[at | 512 | ((crc >> 16) & 0xFF)]
            ^ shift[at | 768 | (crc >> 24)]
            ^ view.first_crc[right]
        )
        if long.any():
            first = self.first_word
            for i in np.flatnonzero(long).tolist():
                out[i] = zlib.crc32(f" {first[int(right[i])]}".encode(), int(crc[i]))
        return out

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
            self.last_crc.read(),
            self.first_crc.read(),
            self.first_length.read(),
        )

    def _add(self, runs: list[str]) -> None:
        """Rows for the runs (each new to the table): their words and pieces here, their features in numpy."""
        row_words: list[list[str]] = []
        row_pieces: list[list[int]] = []
        row_of = self.row_of
        content_ids = self.pieces.content_ids if self.pieces is not None else None
        word_ids = self.pieces.content_word_ids if self.pieces is not None else None
        for run in runs:
            raw = run.strip("._-/")
            if raw != run:
                known = row_of.get(raw)
                if known is not None:
                    row_of[run] = known
                    continue
            if raw.isascii() and raw.isalnum():  # (most tokens: what tokens() and WordPiece.words() make of them)
                lower = raw.lower()
                if raw.isdigit() or (raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower())):
                    words = [] if lower in STOPWORDS else [stem(lower)]  # (one part: no camelCase, no digits)
                else:
                    words = [stem(w) for w in tokens(raw) if w not in STOPWORDS]
                pieces = list(word_ids(lower)) if word_ids is not None else []  # (one BERT word)
            else:
                words = [stem(w) for w in tokens(raw) if w not in STOPWORDS]
                pieces = content_ids(raw) if content_ids is not None else []
            if not words and not pieces:
                row_of[run] = 0
                continue
            row_of[run] = self.rows_added + len(row_words)
            row_words.append(words)
            row_pieces.append(pieces)
        if len(row_words) > _FEW_ROWS:
            self._add_rows(row_words, row_pieces)
        elif row_words:
            for words, pieces in zip(row_words, row_pieces, strict=True):
                self._add_row(words, pieces)

    def _add_row(self, words: list[str], pieces: list[int]) -> None:
        """One row in Python (cheaper than numpy for a few: a question's new words); the same row as
        :meth:`_add_rows` makes, with each feature's counts summed."""
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
        dim = self.hashed_dim
        codes = [_feature_code(feature) for feature in feats]
        self.feature_start.extend([self.part.size])
        self.feature_count.extend([len(codes)])
        self.part.extend([(((c >> 1) % dim) << 2) | (c & 1) | ((c >> 31) & 2) for c in codes])
        self.count.extend([float(c) for c in feats.values()])
        self.piece_start.extend([self.piece.size])
        self.piece_count.extend([len(pieces)])
        self.piece.extend(pieces)
        first = f" {words[0]}".encode() if words else b" "
        self.first_word.append(words[0] if words else "")
        self.first_crc.extend([zlib.crc32(first)])
        self.first_length.extend([len(first)])
        self.last_crc.extend([zlib.crc32(f"b:{words[-1]}".encode() if words else b"b:")])
        self.rows_added += 1

    def _add_rows(self, row_words: list[list[str]], row_pieces: list[list[int]]) -> None:
        added = len(row_words)
        index = self.word_index
        unknown = [word for word in dict.fromkeys(itertools.chain.from_iterable(row_words)) if word not in index]
        if unknown:
            self._add_words(unknown)
        # a row's features: those of each of its words (as often as the word comes), and its word pairs
        word_lengths = np.fromiter(map(len, row_words), np.int64, added)
        word_ids = np.fromiter(
            (index[word] for words in row_words for word in words), np.int64, int(word_lengths.sum())
        )
        word_start, word_count = self.word_start.read(), self.word_count.read()
        size = word_count[word_ids]
        spread = _expand(word_start[word_ids], size)
        owners = [np.repeat(np.repeat(np.arange(added, dtype=np.int64), word_lengths), size)]
        parts = [self.word_part.read()[spread]]
        counts = [self.word_counted.read()[spread]]
        inner = [(row, f"b:{a} {b}") for row, words in enumerate(row_words) for a, b in itertools.pairwise(words)]
        if inner:
            owners.append(np.fromiter((row for row, _ in inner), np.int64, len(inner)))
            parts.append(self._parts(np.fromiter((_feature_code(pair) for _, pair in inner), np.int64, len(inner))))
            counts.append(np.ones(len(inner), np.float64))
        owner = np.concatenate(owners)
        order = np.argsort(owner, kind="stable")
        sizes = np.bincount(owner, minlength=added)
        self.feature_start.extend(self.part.size + np.cumsum(sizes) - sizes)
        self.feature_count.extend(sizes)
        self.part.extend(np.concatenate(parts)[order])
        self.count.extend(np.concatenate(counts)[order])
        piece_sizes = np.fromiter(map(len, row_pieces), np.int64, added)
        self.piece_start.extend(self.piece.size + np.cumsum(piece_sizes) - piece_sizes)
        self.piece_count.extend(piece_sizes)
        self.piece.extend(np.fromiter(itertools.chain.from_iterable(row_pieces), np.int64, int(piece_sizes.sum())))
        firsts = [f" {words[0]}".encode() if words else b" " for words in row_words]
        self.first_word += [words[0] if words else "" for words in row_words]
        self.first_crc.extend([zlib.crc32(first) for first in firsts])
        self.first_length.extend(list(map(len, firsts)))
        self.last_crc.extend([zlib.crc32(f"b:{words[-1]}".encode() if words else b"b:") for words in row_words])
        self.rows_added += added

    def _add_words(self, words: list[str]) -> None:
        """Each word's features: ``w:word`` (counted twice) and, for a word of more than three characters,
        the 3- and 4-grams of ``<word>`` (once each)."""
        first = len(self.word_index)
        count = len(words)
        owners = [np.arange(count, dtype=np.int64)]
        codes = [np.fromiter((zlib.crc32(f"w:{word}".encode()) * 2 + 1 for word in words), np.int64, count)]
        counts = [np.full(count, 2.0)]
        long = [i for i, word in enumerate(words) if len(word) > 3]
        plain = [i for i in long if words[i].isascii()]
        if plain:
            hashes, at = _ascii_ngram_codes([words[i] for i in plain])
            owners.append(np.asarray(plain, np.int64)[at])
            codes.append(hashes * 2)  # (a gram of a word never has ":" second: words are made of [\w.\-/])
            counts.append(np.ones(len(hashes)))
        for i in long:
            if not words[i].isascii():
                grams = _char_ngrams(words[i])
                owners.append(np.full(len(grams), i, np.int64))
                codes.append(np.fromiter(map(_feature_code, grams), np.int64, len(grams)))
                counts.append(np.ones(len(grams)))
        owner = np.concatenate(owners)
        order = np.argsort(owner, kind="stable")
        sizes = np.bincount(owner, minlength=count)
        self.word_start.extend(self.word_part.size + np.cumsum(sizes) - sizes)
        self.word_count.extend(sizes)
        self.word_part.extend(self._parts(np.concatenate(codes)[order]))
        self.word_counted.extend(np.concatenate(counts)[order])
        self.word_index.update(zip(words, range(first, first + count), strict=True))

    def _parts(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """A feature code's dimension and kind (see :data:`_FACTORS`): ``dimension << 2 | kind``."""
        hashes = codes >> 1
        out: npt.NDArray[np.int64] = ((hashes % self.hashed_dim) << 2) | (codes & 1) | ((hashes >> 30) & 2)
        return out
