"""The built-in embedder's table of words (version 4): every distinct raw token met, with its hashed
features, the codes its word pairs are hashed from, and its word pieces, so that a batch of texts is
summed in numpy (see :mod:`eventmem.embedders.embedder`). New tokens of a call are added together:
each word's features once, character n-grams hashed with a CRC-32 in numpy, and word pairs across
tokens from their words' CRCs (CRC-32 is linear), with the same codes as :func:`feature_code` of
their strings."""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from eventmem.core.words import STOPWORDS, raw_token_words, stem

__all__ = ["PieceVectors", "Pieces", "TableView", "WordTable", "char_ngrams", "expand", "feature_code"]


class Pieces(Protocol):
    """The word pieces of a text (:class:`eventmem.embedders.embedder.WordPiece`)."""

    def content_ids(self, text: str) -> list[int]: ...

    def alphanumeric_pieces(self, words: list[str]) -> list[tuple[int, ...]]: ...

    @property
    def content_word_ids(self) -> Callable[[str], tuple[int, ...]]: ...


class PieceVectors:
    """The word pieces' static vectors as shipped: int8 codes and a float32 scale a piece, a quarter of
    the memory of the float32 table (3.9 MB instead of 15.6 for MiniLM's 30,522 pieces, in every
    process that embeds). A row is made when taken, with the same float32 values as the whole table's
    ``codes.astype(float32) * scale[:, None]`` (one float32 product an element, whenever it is made)."""

    def __init__(self, codes: npt.NDArray[np.int8], scale: npt.NDArray[np.float32]) -> None:
        self.codes = codes
        self.scale = scale

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1])

    def take(self, pieces: npt.NDArray[np.int64] | list[int]) -> npt.NDArray[np.float32]:
        """The float32 rows of these pieces, in their order."""
        rows = self.codes.take(pieces, axis=0).astype(np.float32)
        rows *= self.scale.take(pieces)[:, None]
        return rows

    def narrowed(self, dim: int) -> PieceVectors:
        """The first ``dim`` dimensions of every piece's vector."""
        if dim == self.dim:
            return self
        return PieceVectors(np.ascontiguousarray(self.codes[:, :dim]), self.scale)


@lru_cache(maxsize=65536)
def char_ngrams(word: str) -> tuple[str, ...]:
    """The 3- and 4-grams of ``<word>`` (a word's own boundary marks included), in order."""
    marked = f"<{word}>"
    return tuple(marked[i : i + n] for n in (3, 4) for i in range(len(marked) - n + 1))


@lru_cache(maxsize=262144)
def feature_code(feature: str) -> int:
    """The feature's CRC-32 times two, plus one for a word or word-pair feature (``w:``/``b:``)."""
    return zlib.crc32(feature.encode()) * 2 + (feature[1] == ":")


_RUN: Final = re.compile(r"[\w.\-/]+")
"""A run of the characters a raw token is made of; the token (:data:`eventmem.core.words.TOKEN_PATTERN`) is the run
without its leading and trailing ``._-/`` (one token per run, none if nothing is left)."""


_RUN_BYTES: Final = bytes(c if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_.-/") else 32 for c in range(256))
"""Each byte of an ASCII text a run is made of kept, every other one a space."""


def _ascii_runs(text: str) -> list[str]:
    """``_RUN.findall(text)`` of an ASCII text, a third of the time (the runs split at what is not in one)."""
    return text.encode("ascii").translate(_RUN_BYTES).decode("ascii").split()


_MARK: Final = "\x01"
"""Between two texts of a batch split in one pass (a text that holds it is split alone)."""
_MARK_ROW: Final = -1
_NEW_ROW: Final = -2
_ASCII_RUNS_MARKED: Final = bytes(c if c == 1 else b for c, b in enumerate(_RUN_BYTES))
_ASCII_PARTS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+| ")
""":data:`eventmem.core.words` ``_PARTS`` of ASCII text (its last alternative matches no ASCII), and the space
between two runs."""
_PUNCTUATION_SPACES: Final = bytes.maketrans(b"._-/", b"    ")
"""The punctuation of ASCII raw tokens made spaces: what is left are their BERT words that can have pieces."""
_STEM: Final = re.compile(r"(?<=[^ ]{4})(?:ing|ed|es|s|ly)(?= |$)")
""":func:`eventmem.core.words.stem` of each space-separated word: the first of its suffixes that ends the word
with at least four characters before it."""


def batch_runs(texts: list[str]) -> list[str]:
    """The runs of every text, in order, with :data:`_MARK` between two texts."""
    if len(texts) == 1:
        return _ascii_runs(texts[0]) if texts[0].isascii() else _RUN.findall(texts[0])
    joined = f" {_MARK} ".join(texts)
    if joined.isascii() and joined.count(_MARK) == len(texts) - 1:
        return joined.encode("ascii").translate(_ASCII_RUNS_MARKED).decode("ascii").split()
    out: list[str] = []  # (a text that is not ASCII: the regex, 3 times slower, for it alone)
    for i, text in enumerate(texts):
        if i:
            out.append(_MARK)
        out += _ascii_runs(text) if text.isascii() else _RUN.findall(text)
    return out


def stems(words: list[str]) -> list[str]:
    """:func:`eventmem.core.words.stem` of each word (words without spaces), in one pass."""
    if not words:
        return []
    return _STEM.sub("", " ".join(words)).split(" ")


def _separated(
    tokens: list[str], between: str, count: int
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The tokens of ``count`` runs found in one pass with the token ``between`` between two runs: the tokens
    without it, the run each belongs to, and how many each run has."""
    mark = np.fromiter(map(between.__eq__, tokens), bool, len(tokens))
    kept = ~mark
    owner = np.cumsum(mark)[kept]
    return list(itertools.compress(tokens, kept.tolist())), owner, np.bincount(owner, minlength=count)


def expand(start: npt.NDArray[np.int64], size: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
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
        if not isinstance(values, list):
            self.pending.append(values)
        elif self.pending and isinstance(self.pending[-1], list):
            self.pending[-1] += values
        else:
            self.pending.append(list(values))  # (a copy of its own: later lists are added to it)
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


class TableView(NamedTuple):
    feature_start: npt.NDArray[np.int64]
    feature_count: npt.NDArray[np.int64]
    part: npt.NDArray[np.int64]
    counted: npt.NDArray[np.float64]
    piece_start: npt.NDArray[np.int64]
    piece_count: npt.NDArray[np.int64]
    piece: npt.NDArray[np.int64]
    vectors: PieceVectors
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
_SPACE_CRC: Final = zlib.crc32(b" ")
_PAIR_CRC: Final = zlib.crc32(b"b:")
_WORD_CRC: Final = zlib.crc32(b"w:")
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
    the word each belongs to (the same codes as :func:`feature_code` of :func:`char_ngrams`, halved)."""
    marked = np.frombuffer(f"<{'><'.join(words)}>".encode("ascii"), np.uint8).astype(np.int64)
    length = np.fromiter(map(len, words), np.int64, len(words)) + 2
    offset = np.cumsum(length) - length
    codes, owners = [], []
    for n in (3, 4):
        grams = length - n + 1
        start = expand(offset, grams)
        crc = np.full(len(start), 0xFFFFFFFF, np.int64)
        for k in range(n):
            crc = _CRC_BYTE[(crc ^ marked[start + k]) & 0xFF] ^ (crc >> 8)
        codes.append(crc ^ 0xFFFFFFFF)
        owners.append(np.repeat(np.arange(len(words), dtype=np.int64), grams))
    return np.concatenate(codes), np.concatenate(owners)


def _joined_crcs(
    crc: npt.NDArray[np.int64],
    then_crc: npt.NDArray[np.int64],
    then_length: npt.NDArray[np.int64],
    words: list[str],
    then: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """The CRC-32 of ``a + b`` from ``crc32(a)``, ``crc32(b)`` and ``len(b)`` for each pair (see
    :func:`_shift_tables`); where ``b`` is longer than the tables, from `` {words[then]}`` in zlib."""
    shift, at = _shift_tables(), np.minimum(then_length, _SHIFT_MAX) << 10  # (each length's table: 4 x 256)
    out: npt.NDArray[np.int64] = (
        shift[at | (crc & 0xFF)]
        ^ shift[at | 256 | ((crc >> 8) & 0xFF)]
        ^ shift[at | 512 | ((crc >> 16) & 0xFF)]
        ^ shift[at | 768 | (crc >> 24)]
        ^ then_crc
    )
    long = then_length > _SHIFT_MAX
    if long.any():
        for i in np.flatnonzero(long).tolist():
            out[i] = zlib.crc32(f" {words[int(then[i])]}".encode(), int(crc[i]))
    return out


class WordTable:
    """Every distinct raw token met so far: its hashed features (dimension and kind, count in the token), the codes
    of its first and last word (for word pairs across tokens), and its content word pieces; row 0
    is the empty row of a stop word. The new tokens of a call are added together, their words' features
    computed once per word (character n-grams hashed in numpy). Bounded: a full table is replaced by an
    empty one (a row is a pure function of its token, so the vectors do not change)."""

    MAX_ROWS: Final = 200_000

    def __init__(self, hashed_dim: int, pieces: Pieces | None, vectors: PieceVectors) -> None:
        self.hashed_dim = hashed_dim
        self.row_of: dict[str, int] = {}
        self.rows_added = 1
        self.first_word: list[str] = [""]
        self.pieces = pieces
        self.vectors = vectors
        self.feature_start, self.feature_count = _Grown(np.int64), _Grown(np.int64)
        self.part, self.count = _Grown(np.int64), _Grown(np.float64)
        self.piece_start, self.piece_count, self.piece = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        self.last_crc, self.first_crc, self.first_length = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        # the features of each word met (its ``w:`` feature and its character n-grams), by word
        self.word_index: dict[str, int] = {}
        self.word_start, self.word_count = _Grown(np.int64), _Grown(np.int64)
        self.word_part, self.word_counted = _Grown(np.int64), _Grown(np.float64)
        # and the CRCs a word pair is hashed from: of ``b:word`` (the pair's first word) and of `` word``
        self.words: list[str] = []
        self.word_last_crc, self.word_first_crc = _Grown(np.int64), _Grown(np.int64)
        self.word_first_length = _Grown(np.int64)
        # the content word pieces of each BERT word met in a batch (its lower-case letters and digits)
        self.chunk_index: dict[str, int] = {}
        self.chunk_start, self.chunk_count, self.chunk_piece = _Grown(np.int64), _Grown(np.int64), _Grown(np.int64)
        self.row_of[_MARK] = _MARK_ROW
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

    def batch_rows(self, texts: list[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows of the texts' raw tokens, all in order (new ones added; 0 for a stop word), and the
        text each belongs to."""
        runs = batch_runs(texts)
        get = self.row_of.get
        rows = np.fromiter(map(get, runs, itertools.repeat(_NEW_ROW)), np.int64, len(runs))
        new = np.flatnonzero(rows == _NEW_ROW)
        if len(new):  # (a token new to the table may come several times in the batch: one row for it)
            new_runs = list(map(runs.__getitem__, new.tolist()))
            self._add(list(dict.fromkeys(new_runs)))
            rows[new] = np.fromiter(map(get, new_runs), np.int64, len(new))
        if len(texts) == 1:
            return rows, np.zeros(len(rows), np.int64)
        mark = rows == _MARK_ROW
        kept = ~mark
        return rows[kept], np.cumsum(mark)[kept]

    def pair_crcs(
        self, view: TableView, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The CRC-32 of ``b:{last word of left} {first word of right}`` for each pair of rows."""
        return _joined_crcs(
            view.last_crc[left], view.first_crc[right], view.first_length[right], self.first_word, right
        )

    def view(self) -> TableView:
        return TableView(
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
        """Rows for the runs (each new to the table): a few one by one in Python, more together (see
        :meth:`_add_ascii`)."""
        if len(runs) > _FEW_ROWS:
            if "".join(runs).isascii():
                self._add_ascii(runs)
                return
            plain = [run for run in runs if run.isascii()]
            if len(plain) > _FEW_ROWS:
                self._add_ascii(plain)
                runs = [run for run in runs if not run.isascii()]
        row_words: list[list[str]] = []
        row_pieces: list[list[int]] = []
        for run in runs:
            made = self._made(run)
            if isinstance(made, int):
                self.row_of[run] = made
                continue
            self.row_of[run] = self.rows_added + len(row_words)
            row_words.append(made[0])
            row_pieces.append(made[1])
        if len(row_words) > _FEW_ROWS:
            self._add_listed(row_words, row_pieces)
        elif row_words:
            for words, pieces in zip(row_words, row_pieces, strict=True):
                self._add_row(words, pieces)

    def _made(self, run: str) -> int | tuple[list[str], list[int]]:
        """A new run's words and content word pieces, or its row if it has one (the row of its raw token, or
        0 if it has neither words nor pieces)."""
        raw = run.strip("._-/")
        if raw != run:
            known = self.row_of.get(raw)
            if known is not None:
                return known
        if raw.isascii() and raw.isalnum():  # (most tokens: what tokens() and WordPiece.words() make of them)
            lower = raw.lower()
            if raw.isdigit() or (raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower())):
                words = [] if lower in STOPWORDS else [stem(lower)]  # (one part: no camelCase, no digits)
            else:
                words = [stem(w) for w in raw_token_words(raw) if w not in STOPWORDS]
            pieces = list(self.pieces.content_word_ids(lower)) if self.pieces is not None else []  # (one BERT word)
        else:  # (a run without its ends is one raw token, or nothing)
            words = [stem(w) for w in raw_token_words(raw) if w not in STOPWORDS] if raw else []
            pieces = self.pieces.content_ids(raw) if self.pieces is not None and raw else []
        if not words and not pieces:
            return 0
        return words, pieces

    def _add_ascii(self, runs: list[str]) -> None:
        """Rows for many new ASCII runs, each step one pass over all of them:
        their raw tokens (the ends stripped), their parts, the words' stems, and their BERT words' pieces
        (the same words and pieces as :meth:`_made`)."""
        count = len(runs)
        raws = list(map(str.strip, runs, itertools.repeat("._-/")))
        row = np.full(count, _NEW_ROW, np.int64)
        raw_sizes = np.fromiter(map(len, raws), np.int64, count)
        row[raw_sizes == 0] = 0
        stripped = np.flatnonzero((raw_sizes != np.fromiter(map(len, runs), np.int64, count)) & (raw_sizes > 0))
        for i in stripped.tolist():  # (a run with ends takes its raw token's row if it has one)
            known = self.row_of.get(raws[i])
            if known is not None:
                row[i] = known
        todo = row == _NEW_ROW
        unique = list(dict.fromkeys(itertools.compress(raws, todo.tolist())))
        if unique:
            where = dict(zip(unique, range(len(unique)), strict=True))
            made = self._ascii_rows(unique)
            row[todo] = made[np.fromiter(map(where.__getitem__, itertools.compress(raws, todo.tolist())), np.int64)]
        self.row_of.update(zip(runs, row.tolist(), strict=True))

    def _ascii_rows(self, raws: list[str]) -> npt.NDArray[np.int64]:
        """Rows for distinct non-empty ASCII raw tokens: the row of each (0 for one without words or pieces)."""
        count = len(raws)
        joined = " ".join(raws)
        lower = joined.lower()
        # the words: each raw token's lower case, then its parts if it has several (raw_token_words), no stop words
        parts, part_owner, part_count = _separated(_ASCII_PARTS.findall(joined), " ", count)
        several = (part_count > 1)[part_owner]
        items = lower.split(" ") + "\x00".join(itertools.compress(parts, several.tolist())).lower().split("\x00")
        owner = np.concatenate([np.arange(count, dtype=np.int64), part_owner[several]])
        order = np.argsort(owner, kind="stable")
        words = list(map(items.__getitem__, order.tolist()))
        content = ~np.fromiter(map(STOPWORDS.__contains__, words), bool, len(words))
        words = stems(list(itertools.compress(words, content.tolist())))
        word_owner = owner[order][content]
        word_sizes = np.bincount(word_owner, minlength=count)
        index = self.word_index
        unknown = list(itertools.filterfalse(index.__contains__, dict.fromkeys(words)))
        if unknown:
            self._add_words(unknown)
        word_ids = np.fromiter(map(index.__getitem__, words), np.int64, len(words))
        # the pieces: those of each BERT word (letters and digits) of the lower case, in order
        if self.pieces is not None:
            split = f" {_MARK} ".join(raws).lower().encode("ascii").translate(_PUNCTUATION_SPACES).decode("ascii")
            chunks, chunk_owner, _ = _separated(split.split(), _MARK, count)
            ids = self._chunk_ids(chunks)
            size = self.chunk_count.read()[ids]
            pieces = self.chunk_piece.read()[expand(self.chunk_start.read()[ids], size)]
            piece_sizes = np.bincount(np.repeat(chunk_owner, size), minlength=count)
        else:
            pieces, piece_sizes = np.zeros(0, np.int64), np.zeros(count, np.int64)
        made = (word_sizes > 0) | (piece_sizes > 0)
        out = np.zeros(count, np.int64)
        out[made] = self.rows_added + np.arange(int(made.sum()), dtype=np.int64)
        if not made.all():
            word_ids = word_ids[made[word_owner]]
            pieces = pieces[np.repeat(made, piece_sizes)]
            word_sizes, piece_sizes = word_sizes[made], piece_sizes[made]
        if len(word_sizes):
            self._add_rows(word_ids, word_sizes, pieces, piece_sizes)
        return out

    def _chunk_ids(self, chunks: list[str]) -> npt.NDArray[np.int64]:
        """Each BERT word's index in the table of their pieces (new ones added: their pieces found together)."""
        index = self.chunk_index
        unknown = list(itertools.filterfalse(index.__contains__, dict.fromkeys(chunks)))
        if unknown and self.pieces is not None:
            found = self.pieces.alphanumeric_pieces(unknown)
            sizes = np.fromiter(map(len, found), np.int64, len(found))
            self.chunk_start.extend(self.chunk_piece.size + np.cumsum(sizes) - sizes)
            self.chunk_count.extend(sizes)
            self.chunk_piece.extend(np.fromiter(itertools.chain.from_iterable(found), np.int64, int(sizes.sum())))
            index.update(zip(unknown, range(len(index), len(index) + len(unknown)), strict=True))
        return np.fromiter(map(index.__getitem__, chunks), np.int64, len(chunks))

    def _add_listed(self, row_words: list[list[str]], row_pieces: list[list[int]]) -> None:
        """Rows of the words and pieces listed (see :meth:`_add_rows`)."""
        index = self.word_index
        unknown = [word for word in dict.fromkeys(itertools.chain.from_iterable(row_words)) if word not in index]
        if unknown:
            self._add_words(unknown)
        word_sizes = np.fromiter(map(len, row_words), np.int64, len(row_words))
        word_ids = np.fromiter(
            map(index.__getitem__, itertools.chain.from_iterable(row_words)), np.int64, int(word_sizes.sum())
        )
        piece_sizes = np.fromiter(map(len, row_pieces), np.int64, len(row_pieces))
        pieces = np.fromiter(itertools.chain.from_iterable(row_pieces), np.int64, int(piece_sizes.sum()))
        self._add_rows(word_ids, word_sizes, pieces, piece_sizes)

    def _add_row(self, words: list[str], pieces: list[int]) -> None:
        """One row in Python (cheaper than numpy for a few: a question's new words); the same row as
        :meth:`_add_rows` makes, with each feature's counts summed."""
        feats: dict[str, int] = {}
        for word in words:
            key = "w:" + word
            feats[key] = feats.get(key, 0) + 2
            if len(word) > 3:
                for gram in char_ngrams(word):
                    feats[gram] = feats.get(gram, 0) + 1
        for first_word, second_word in itertools.pairwise(words):
            key = f"b:{first_word} {second_word}"
            feats[key] = feats.get(key, 0) + 1
        dim = self.hashed_dim
        codes = [feature_code(feature) for feature in feats]
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

    def _add_rows(
        self,
        word_ids: npt.NDArray[np.int64],
        word_lengths: npt.NDArray[np.int64],
        pieces: npt.NDArray[np.int64],
        piece_sizes: npt.NDArray[np.int64],
    ) -> None:
        """New rows: each of its words (by index, all known: ``word_lengths`` a row) and its pieces."""
        added = len(word_lengths)
        word_start, word_count = self.word_start.read(), self.word_count.read()
        size = word_count[word_ids]
        spread = expand(word_start[word_ids], size)
        owners = [np.repeat(np.repeat(np.arange(added, dtype=np.int64), word_lengths), size)]
        parts = [self.word_part.read()[spread]]
        counts = [self.word_counted.read()[spread]]
        word_owner = np.repeat(np.arange(added, dtype=np.int64), word_lengths)
        last_crc, first_crc = self.word_last_crc.read(), self.word_first_crc.read()
        first_length = self.word_first_length.read()
        inner = word_owner[1:] == word_owner[:-1]  # (the word pairs within a token: ``b:a b``)
        if inner.any():
            left, right = word_ids[:-1][inner], word_ids[1:][inner]
            crcs = _joined_crcs(last_crc[left], first_crc[right], first_length[right], self.words, right)
            owners.append(word_owner[1:][inner])
            parts.append(self._parts(crcs * 2 + 1))
            counts.append(np.ones(len(crcs), np.float64))
        owner = np.concatenate(owners)
        order = np.argsort(owner, kind="stable")
        sizes = np.bincount(owner, minlength=added)
        self.feature_start.extend(self.part.size + np.cumsum(sizes) - sizes)
        self.feature_count.extend(sizes)
        self.part.extend(np.concatenate(parts)[order])
        self.count.extend(np.concatenate(counts)[order])
        self.piece_start.extend(self.piece.size + np.cumsum(piece_sizes) - piece_sizes)
        self.piece_count.extend(piece_sizes)
        self.piece.extend(pieces)
        has = word_lengths > 0
        at = (np.cumsum(word_lengths) - word_lengths)[has]
        first, last = word_ids[at], word_ids[at + word_lengths[has] - 1]
        if has.all():
            self.first_word += map(self.words.__getitem__, first.tolist())
        else:
            firsts = iter(map(self.words.__getitem__, first.tolist()))
            self.first_word += [next(firsts) if word else "" for word in has.tolist()]
        row_first_crc = np.full(added, _SPACE_CRC, np.int64)
        row_first_crc[has] = first_crc[first]
        row_first_length = np.ones(added, np.int64)
        row_first_length[has] = first_length[first]
        row_last_crc = np.full(added, _PAIR_CRC, np.int64)
        row_last_crc[has] = last_crc[last]
        self.first_crc.extend(row_first_crc)
        self.first_length.extend(row_first_length)
        self.last_crc.extend(row_last_crc)
        self.rows_added += added

    def _add_words(self, words: list[str]) -> None:
        """Each word's features: ``w:word`` (counted twice) and, for a word of more than three characters,
        the 3- and 4-grams of ``<word>`` (once each)."""
        first = len(self.word_index)
        count = len(words)
        joined = " ".join(words)
        encoded = joined.encode().split(b" ")  # (a word has no space: made of [\w.\-/])
        owners = [np.arange(count, dtype=np.int64)]
        # (zlib.crc32(data, crc32(prefix)) is crc32(prefix + data))
        codes = [np.fromiter(map(zlib.crc32, encoded, itertools.repeat(_WORD_CRC)), np.int64, count) * 2 + 1]
        counts = [np.full(count, 2.0)]
        long = np.flatnonzero(np.fromiter(map(len, words), np.int64, count) > 3)
        plain: list[int] = long.tolist()
        if not joined.isascii():
            plain = [i for i in plain if words[i].isascii()]
        if plain:
            hashes, at = _ascii_ngram_codes([words[i] for i in plain])
            owners.append(np.asarray(plain, np.int64)[at])
            codes.append(hashes * 2)  # (a gram of a word never has ":" second: words are made of [\w.\-/])
            counts.append(np.ones(len(hashes)))
        if len(plain) < len(long):
            for i in long.tolist():
                if not words[i].isascii():
                    grams = char_ngrams(words[i])
                    owners.append(np.full(len(grams), i, np.int64))
                    codes.append(np.fromiter(map(feature_code, grams), np.int64, len(grams)))
                    counts.append(np.ones(len(grams)))
        owner = np.concatenate(owners)
        order = np.argsort(owner, kind="stable")
        sizes = np.bincount(owner, minlength=count)
        self.word_start.extend(self.word_part.size + np.cumsum(sizes) - sizes)
        self.word_count.extend(sizes)
        self.word_part.extend(self._parts(np.concatenate(codes)[order]))
        self.word_counted.extend(np.concatenate(counts)[order])
        self.word_index.update(zip(words, range(first, first + count), strict=True))
        self.words += words
        self.word_last_crc.extend(np.fromiter(map(zlib.crc32, encoded, itertools.repeat(_PAIR_CRC)), np.int64, count))
        self.word_first_crc.extend(np.fromiter(map(zlib.crc32, encoded, itertools.repeat(_SPACE_CRC)), np.int64, count))
        self.word_first_length.extend(np.fromiter(map(len, encoded), np.int64, count) + 1)

    def _parts(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """A feature code's dimension and kind (1 for a word or word-pair feature, plus 2 for a hash with its
        top bit set): ``dimension << 2 | kind``."""
        hashes = codes >> 1
        out: npt.NDArray[np.int64] = ((hashes % self.hashed_dim) << 2) | (codes & 1) | ((hashes >> 30) & 2)
        return out
