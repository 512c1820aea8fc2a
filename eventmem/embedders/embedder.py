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
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from eventmem.core.words import STOPWORDS, stem, tokens
from eventmem.embedders.wordtable import PieceVectors, WordTable, char_ngrams, expand, feature_code

__all__ = ["Embedder", "ForgetsWords", "HashingEmbedder", "Loadable", "normalize_rows", "semantic_dims", "tokens"]

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


@runtime_checkable
class ForgetsWords(Protocol):
    """An embedder that keeps what it met (words, a tokenizer) between calls, and can let it go."""

    def forget_words(self) -> None: ...

    def warm(self) -> None: ...


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
        self._digits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
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
        whole = self.vocab.get(word)
        if whole is not None:  # (the longest piece the word begins with: the greedy match's first and last)
            return (whole,)
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

    def alphanumeric_pieces(self, words: list[str]) -> list[tuple[int, ...]]:
        """:meth:`content_word_ids` of each of many words made of letters and digits, not cached (words new to
        the caller, who keeps them); many numbers together in numpy (:meth:`_number_pieces`)."""
        pieces = self._word_ids
        numbers = [i for i, word in enumerate(words) if word.isdigit() and word.isascii() and len(word) <= _DIGITS]
        if len(numbers) < _MANY_NUMBERS:
            return [() if word in STOPWORDS else pieces(word) for word in words]
        found = dict(zip(numbers, self._number_pieces([words[i] for i in numbers]), strict=True))
        return [found.get(i) or (() if word in STOPWORDS else pieces(word)) for i, word in enumerate(words)]

    def _number_pieces(self, numbers: list[str]) -> list[tuple[int, ...]]:
        """:meth:`_word_ids` of many numbers (ASCII digits, up to 24) in numpy: the greedy longest match, each
        step for all numbers at once, the pieces of up to 4 digits looked up in dense tables by length and
        value (every single digit is a piece, first or continuing: no number is unknown)."""
        first, following = self._digit_tables()
        count = len(numbers)
        lengths = np.fromiter(map(len, numbers), np.int64, count)
        digits = np.zeros((count, _DIGITS + 4), np.int64)
        digits.ravel()[expand(np.arange(count, dtype=np.int64) * (_DIGITS + 4), lengths)] = (
            np.frombuffer("".join(numbers).encode("ascii"), np.uint8) - 48
        )
        position = np.zeros(count, np.int64)
        owners, ids = [], []
        table = first
        active = np.arange(count, dtype=np.int64)
        while True:
            active = active[position[active] < lengths[active]]
            if not len(active):
                break
            at, room = position[active], lengths[active] - position[active]
            value = np.zeros(len(active), np.int64)
            best, size = np.zeros(len(active), np.int64), np.zeros(len(active), np.int64)
            for span in range(1, 5):
                value = value * 10 + digits[active, at + span - 1]
                piece = table[span * 10_000 + value]
                hit = (piece >= 0) & (span <= room)
                best, size = np.where(hit, piece, best), np.where(hit, span, size)
            owners.append(active)
            ids.append(best)
            position[active] += size
            table = following
        owner, piece_ids = np.concatenate(owners), np.concatenate(ids)
        order = np.argsort(owner, kind="stable")
        sizes = np.bincount(owner, minlength=count)
        flat = piece_ids[order].tolist()
        ends = np.cumsum(sizes).tolist()
        return [tuple(flat[end - size : end]) for end, size in zip(ends, sizes.tolist(), strict=True)]

    def _digit_tables(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The id of each piece of up to 4 digits at ``length * 10_000 + value`` (-1: none): first pieces, then
        the pieces that continue a word."""
        if self._digits is None:
            tables = []
            for pieces in (self.vocab, self.following):
                table = np.full(5 * 10_000, -1, np.int64)
                for key, i in pieces.items():
                    if len(key) <= 4 and key.isascii() and key.isdigit():
                        table[len(key) * 10_000 + int(key)] = i
                tables.append(table)
            self._digits = (tables[0], tables[1])
        return self._digits

    def _content_word_ids(self, word: str) -> tuple[int, ...]:
        if word in STOPWORDS or not (word.isalnum() or any(c.isalnum() for c in word)):
            return ()
        return self.word_ids(word)


_DIGITS: Final = 24
"""Numbers of up to this many digits are split into pieces in numpy."""
_MANY_NUMBERS: Final = 256
"""From this many new numbers in a call, their pieces are found in numpy."""


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
    _tables: dict[int, PieceVectors] = {}  # noqa: RUF012 (one per process, behind the lock)

    @classmethod
    def forget_pieces(cls) -> None:
        """Let the tokenizer go (a caller holding it keeps its own): the next :meth:`get` reads it again."""
        with cls._lock:
            cls._pieces = None

    @classmethod
    def get(cls, version: int) -> tuple[WordPiece, PieceVectors]:
        with cls._lock:
            if cls._pieces is None:
                cls._pieces = WordPiece()
            table = cls._tables.get(version)
            if table is None:
                with np.load(STATIC_FILES[version]) as data:
                    table = PieceVectors(data["vectors"], data["scale"].astype(np.float32, copy=False))
                cls._tables[version] = table
            return cls._pieces, table


_FACTORS: Final = np.array([0.5, 2.0, -0.5, -2.0], np.float32)
"""A feature's weight factor by its kind and sign (index: 1 for a word or word-pair feature, plus 2 for
a hash with its top bit set): word features weigh more than the many n-grams of the same word.
Powers of two, so one product is the same float32 as a weighting and a sign applied one after the other."""


def _static_dims(version: int, dim: int) -> int:
    """The dimensions of the semantic part of a vector of the hashing embedder of this version and size."""
    return min(128, dim // 3) if version in STATIC_FILES else 0


_HASHING_ID = re.compile(r"^hashing-v(\d+)-(\d+)$")


def semantic_dims(model_id: str) -> int:
    """How many of the last dimensions of a vector of the embedder ``model_id`` (its ``model_id``)
    hold the built-in embedder's semantic part, its static word-piece vectors (0 for any other
    embedder). That part weighs twice the hashed part's (both of unit length first), so it makes four
    fifths of a cosine's spread, and the nearest memories by it hold the nearest by the whole vector:
    measured at 20,000 memories of the benchmark's corpus (``hashing-v4-384``, 40 queries), the exact
    top 500 by these 128 dimensions held every one of the exact top 50 by all 384."""
    match = _HASHING_ID.match(model_id)
    return _static_dims(int(match.group(1)), int(match.group(2))) if match else 0


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
        self._static_dim = _static_dims(version, dim)
        self._words: WordTable | None = None
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
                feats.update(char_ngrams(word))
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

    def forget_words(self) -> None:
        """Drop the words met so far (made again as texts are embedded: a word's row depends on the
        word alone) and the word-piece table's tokenizer, loaded again by :meth:`warm`."""
        with self._words_lock:
            self._words = None
        _Static.forget_pieces()

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
                vector = np.ascontiguousarray(table.take(ids)[:, : self._static_dim]).sum(axis=0)
                out[row] = vector / _norms(vector[np.newaxis])[0]  # (numpy's own sum: no BLAS kernel's)
        return out

    def _hashed(self, texts: list[str], dim: int) -> Vectors:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            feats = self.features(text)
            if not feats:
                continue
            codes = np.fromiter(map(feature_code, feats), dtype=np.int64, count=len(feats))
            hashes = codes >> 1  # (a CRC-32: its top bit gives the sign)
            weights = np.log1p(np.fromiter(feats.values(), dtype=np.float32, count=len(feats)))
            weights *= _FACTORS[(codes & 1) | ((hashes >> 30) & 2)]
            np.add.at(out[row], hashes % dim, weights)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def _new_table(self, hashed_dim: int) -> WordTable:
        if not self._static_dim:
            return WordTable(hashed_dim, None, PieceVectors(np.zeros((1, 0), np.int8), np.zeros(1, np.float32)))
        pieces, table = _Static.get(self.version)
        return WordTable(hashed_dim, pieces, table.narrowed(self._static_dim))

    def _looked_up(self, texts: list[str]) -> Vectors:
        """Version 4: the words' rows of the table, summed per text in numpy (see the module's doc)."""
        hashed_dim = self._dim - self._static_dim
        count = len(texts)
        if count == 1:
            return self._looked_up_one(texts[0], hashed_dim)
        with self._words_lock:
            if self._words is None or self._words.full():
                self._words = self._new_table(hashed_dim)
            words = self._words
            rows, owner = words.batch_rows(texts)
            table = words.view()
        content = rows != 0  # (row 0: a stop word, left out, also from the word pairs)
        rows, owner = rows[content], owner[content]
        hashed = np.zeros(count * hashed_dim, dtype=np.float64)
        if len(rows):
            size = table.feature_count[rows]
            spread_rows = expand(table.feature_start[rows], size)
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
            hashed = _weighted_kinds(_log1p_of_counts(totals))
        out = np.zeros((count, self._dim), dtype=np.float32)
        block = hashed.reshape(count, hashed_dim)
        out[:, :hashed_dim] = block / _norms(block)
        if self._static_dim and len(rows):
            at, size = table.piece_start[rows], table.piece_count[rows]
            pieces = table.piece[expand(at, size)]
            if len(pieces):
                # each text's pieces summed (the texts with pieces: where their pieces start)
                per_text = np.bincount(owner, size, minlength=count).astype(np.int64)
                some = np.flatnonzero(per_text)
                ends = np.cumsum(per_text)[some]
                sums = _piece_sums(table.vectors, pieces, ends - per_text[some], ends)
                out[some, hashed_dim:] = sums / _norms(sums) * self.STATIC_WEIGHTS[self.version]
        out /= _norms(out)
        return out

    def _looked_up_one(self, text: str, hashed_dim: int) -> Vectors:
        """One text (a save, a question): :meth:`_looked_up`'s numbers for a batch of one, in fewer numpy calls
        (the word pairs hashed in zlib, the norms as :func:`numpy.linalg.norm` computes them)."""
        with self._words_lock:
            if self._words is None or self._words.full():
                self._words = self._new_table(hashed_dim)
            words = self._words
            found = [row for row in words.rows([text])[0] if row]  # (row 0: a stop word, left out)
            table = words.view()
        out = np.zeros((1, self._dim), dtype=np.float32)
        if not found:
            return out
        rows = np.array(found, np.int64)
        size = table.feature_count[rows]
        spread = expand(table.feature_start[rows], size)
        totals = np.bincount(table.part[spread], table.counted[spread], minlength=hashed_dim * 4).astype(
            np.float64, copy=False
        )
        if len(found) > 1:  # the word pairs across consecutive tokens (``b:last first``), as WordTable.pair_crcs
            first_word = words.first_word
            for last, row in zip(table.last_crc[rows[:-1]].tolist(), found[1:], strict=True):
                hashed = zlib.crc32(f" {first_word[row]}".encode(), last)
                totals[((hashed % hashed_dim) << 2) | 1 | ((hashed >> 30) & 2)] += 1.0
        block = _weighted_kinds(_log1p_of_counts(totals)).reshape(1, hashed_dim)
        out[:, :hashed_dim] = block / _norms(block)
        if self._static_dim:
            pieces = table.piece[expand(table.piece_start[rows], table.piece_count[rows])]
            if len(pieces):
                sums = np.add.reduceat(table.vectors.take(pieces), _FIRST, axis=0)
                out[:, hashed_dim:] = sums / _norms(sums) * self.STATIC_WEIGHTS[self.version]
        out /= _norms(out)
        return out


_FIRST: Final = np.zeros(1, np.int64)
_BLOCK: Final = 128
"""numpy's pairwise sums add up to this many values in 8 running sums, more in two halves."""
_EIGHT: Final = np.arange(8, dtype=np.int64)


def _piece_sums(
    table: PieceVectors, pieces: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> Vectors:
    """``np.add.reduceat(table[pieces], starts, axis=0)`` where each segment ends at the next's start, the same
    float32 sums: reduceat adds a segment's first row to the pairwise sum of the rest, column by column
    (numpy's pairwise_sum: fewer than 8 values one after the other, up to 128 in 8 running sums of every
    8th value, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest one by one). Done
    here for all segments at once, a block of 8 rows at a time, whole rows (reduceat walks a column at a
    time, which is slower); a segment of more than 129 rows by reduceat itself."""
    count, dim = len(starts), table.dim
    rest = ends - starts - 1
    big = rest > _BLOCK
    blocks = np.where(big, 0, rest // 8)
    tail = np.where(big, 0, rest % 8)
    total = np.full((count, dim), -0.0, np.float32)  # (pairwise_sum starts at -0.0: x + -0.0 is x)
    with_blocks = np.flatnonzero(blocks)
    if len(with_blocks):
        order = with_blocks[np.argsort(-blocks[with_blocks], kind="stable")]
        size = blocks[order]
        first = starts[order] + 1
        running = table.take(pieces[(first[:, None] + _EIGHT).ravel()]).reshape(len(order), 8, dim)
        for block in range(1, int(size[0])):
            active = int(np.count_nonzero(size > block))
            at = (first[:active, None] + (8 * block + _EIGHT)).ravel()
            running[:active] += table.take(pieces[at]).reshape(active, 8, dim)
        r = running.transpose(1, 0, 2)
        total[order] = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    after = starts + 1 + 8 * blocks
    for step in range(7):
        active_rows = np.flatnonzero(tail > step)
        if not len(active_rows):
            break
        total[active_rows] += table.take(pieces[after[active_rows] + step])
    out: Vectors = table.take(pieces[starts]) + total
    for i in np.flatnonzero(big).tolist():
        out[i] = np.add.reduceat(table.take(pieces[starts[i] : ends[i]]), _FIRST, axis=0)[0]
    return out


def _norms(matrix: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.floating[Any]]:
    """``np.linalg.norm(matrix, axis=1, keepdims=True)`` as it computes it (the same values), a zero norm made 1."""
    norms: npt.NDArray[np.floating[Any]] = np.sqrt(np.add.reduce(matrix * matrix, axis=1, keepdims=True))
    norms[norms == 0] = 1.0
    return norms


def _weighted_kinds(weights: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each run of four (a dimension's kinds and signs) weighed by ``_FACTORS`` and summed, in one fixed order.

    ``weights.reshape(-1, 4) @ _FACTORS`` would hand the sum to the BLAS library, whose kernel is chosen
    for the processor at run time and adds in an order of its own: the Haswell and SkylakeX kernels add
    the products ``p = w * f`` as ``(p0 + p2) + (p1 + p3)``, which this computes on every machine (the
    same float64 values where those kernels run, and so the pinned vectors), the Sandybridge kernel one
    after the other. The products are exact (powers of two), and each pair's factors are opposite, so
    ``w0 * f0 + w2 * -f0`` is ``(w0 - w2) * f0`` to the bit: two subtractions and two scalings instead
    of four products."""
    kinds = weights.reshape(-1, 4)
    summed: npt.NDArray[np.float64] = (kinds[:, 0] - kinds[:, 2]) * _FACTORS64[0] + (
        kinds[:, 1] - kinds[:, 3]
    ) * _FACTORS64[1]
    return summed


_FACTORS64: Final = _FACTORS.astype(np.float64)
assert _FACTORS64[2] == -_FACTORS64[0] and _FACTORS64[3] == -_FACTORS64[1]  # (what _weighted_kinds relies on)
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
