"""Keyword ranking from in-memory postings: the scores of FTS5's ``bm25()``, without its cost per row.

FTS5 ranks a query by calling ``bm25()`` on every row that matches: the row's positions are decoded
and its size read from a b-tree, about 1.4 us a row (1.1 ms for a word held by 800 of 100k
memories, on the benchmark machine). Here each token keeps the slots holding it with its weighted
frequency (the column weights of the keyword index), and a query is scored with numpy: the same
arithmetic as FTS5's ``fts5Bm25Function`` (``k1`` 1.2, ``b`` 0.75, IDF clamped at 1e-6, the phrases
added in query order), so the scores are FTS5's own, bit for bit, and the ranking (score, then slot)
is the keyword index's.

Tokens are FTS5's (``porter unicode61 remove_diacritics 2``): an ASCII text splits on everything
but letters and digits, as ``unicode61`` does, and each distinct token's stem is asked of FTS5 once
and kept; other texts are tokenized by FTS5 itself. A query word that is more than one token (an
identifier such as ``parse_config`` is the phrase ``parse config``) is scored by FTS5 alone, and its
scores added in its place: a phrase's part of ``bm25()`` depends on that phrase only.

A posting carries the version of its slot: a memory changed or removed bumps the version, which
voids its old postings where they lie; a token's postings are compacted when next read.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_POSTINGS_FROM", "WEIGHTS", "BackgroundPostings", "Postings", "Tokens"]

DEFAULT_POSTINGS_FROM: Final = 20_000
"""Rows from which the keyword index ranks from postings (``Tuning.postings_from``)."""
WEIGHTS: Final = (4.0, 2.0, 1.0, 3.0)
"""Column weights (title, summary, content, tags), as the keyword index ranks with them."""
log = logging.getLogger("eventmem.projectors")

K1: Final = 1.2
B: Final = 0.75
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
_FTS5_TOKEN_LIMIT: Final = 32768
_ENTRY = np.dtype([("slot", np.int32), ("version", np.int32), ("freq", np.float32)])
"""12 bytes a posting; a frequency is a sum of small whole weights, exact in float32."""
MAX_STEMS: Final = 1_000_000
"""Stems kept before the cache starts over (a bound on memory for a very varied journal)."""

Row = tuple[int, str, str, str, str]
"""(slot, title, summary, content, tags)"""
PhraseScores = Callable[[str], tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
"""A query word's own part of ``bm25()`` for every row holding it, from FTS5: (slots, scores)."""


class Tokens:
    """Texts to FTS5's tokens, exactly as the keyword index's tokenizer makes them, numbered: each
    distinct stem gets a number, kept for the life of this object."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        weakref.finalize(self, self._db.close)
        self._db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
        self._db.execute("CREATE VIRTUAL TABLE t_instances USING fts5vocab(t, instance)")
        self._lock = threading.Lock()
        self._numbers: dict[str, int] = {}
        """A stem's number."""
        self._known: dict[str, int] = {}
        """A lower-cased ASCII token's stem's number (a cache: emptied when it grows past MAX_STEMS)."""

    def _by_fts5(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens (in no particular order), as FTS5 makes them (the lock held)."""
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", enumerate(texts))
            out: list[list[str]] = [[] for _ in texts]
            for doc, term in self._db.execute("SELECT doc, term FROM t_instances"):
                out[doc].append(term)
        finally:
            self._db.execute("ROLLBACK")
        return out

    def _number(self, stem: str, *, new: bool) -> int:
        """The stem's number; a stem never seen gets one if ``new``, else -1 (no row holds it)."""
        number = self._numbers.get(stem)
        if number is None:
            if not new:
                return -1
            number = self._numbers[stem] = len(self._numbers)
        return number

    def numbered(self, texts: Sequence[str], *, new: bool = True) -> list[list[int]]:
        """The stem numbers of each text's tokens. ASCII texts are split here and each distinct token's
        stem asked of FTS5 once; other texts are tokenized by FTS5. ``new``: number unseen stems (a
        query's are -1 instead, so that queries cannot grow the table)."""
        split: list[list[str] | None] = []
        others: list[int] = []
        for i, text in enumerate(texts):
            if text.isascii() and len(text) < _FTS5_TOKEN_LIMIT:
                split.append(_ASCII_TOKEN.findall(text.lower()))
            else:
                split.append(None)
                others.append(i)
        with self._lock:
            unknown = set().union(*(tokens for tokens in split if tokens is not None)) - self._known.keys()
            if unknown:
                if len(self._known) + len(unknown) > MAX_STEMS:
                    self._known = {}
                fresh = sorted(unknown)
                for token, stems in zip(fresh, self._by_fts5(fresh), strict=True):
                    number = self._number(stems[0] if len(stems) == 1 else token, new=new)  # (one token)
                    if number >= 0:
                        self._known[token] = number
            known = self._known
            look = known.get
            result = [list(map(look, tokens, repeat(-1))) if tokens is not None else [] for tokens in split]
            if others:
                for i, stems in zip(others, self._by_fts5([texts[i] for i in others]), strict=True):
                    result[i] = [self._number(stem, new=new) for stem in stems]
        return result


class Postings:
    """Per token, the slots holding it with their weighted frequency; per slot its size in tokens."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self._lists: dict[int, list[npt.NDArray[np.void]]] = {}
        """Per stem number, its postings: one array in slot order, and those added since."""
        self._version = np.zeros(0, np.int32)
        self._live = np.zeros(0, bool)
        self._sizes = np.zeros(0, np.float64)
        self.rows = 0
        self.total_tokens = 0

    def __len__(self) -> int:
        return self.rows

    def entries(self) -> int:
        """Postings held (live or void, until compacted)."""
        return sum(len(part) for parts in self._lists.values() for part in parts)

    def _grow(self, top: int) -> None:
        if top >= len(self._live):
            size = max(top + 1, len(self._live) * 2, 1024)
            self._version = np.concatenate([self._version, np.zeros(size - len(self._version), np.int32)])
            self._live = np.concatenate([self._live, np.zeros(size - len(self._live), bool)])
            self._sizes = np.concatenate([self._sizes, np.zeros(size - len(self._sizes), np.float64)])

    def remove(self, slots: Iterable[int]) -> None:
        """Forget these slots' rows (their postings are void from now on)."""
        for slot in slots:
            if 0 <= slot < len(self._live) and self._live[slot]:
                self._live[slot] = False
                self._version[slot] += 1
                self.rows -= 1
                self.total_tokens -= int(self._sizes[slot])

    def add(self, rows: Sequence[Row]) -> None:
        """Index these rows (a slot already present is replaced)."""
        if not rows:
            return
        self.remove(r[0] for r in rows)
        self._grow(max(r[0] for r in rows))
        columns = self.tokens.numbered([text for row in rows for text in row[1:]])
        terms: list[int] = []
        slots: list[int] = []
        freqs: list[int] = []
        title_weight, summary_weight, _, tags_weight = (int(w) for w in WEIGHTS)  # (the content's is 1)
        for i, row in enumerate(rows):
            slot = row[0]
            title, summary, content, tags = columns[i * 4 : i * 4 + 4]
            found = Counter(content)
            for weight, tokens in ((title_weight, title), (summary_weight, summary), (tags_weight, tags)):
                for token in tokens:
                    found[token] += weight
            size = len(title) + len(summary) + len(content) + len(tags)
            terms.extend(found)
            slots.extend([slot] * len(found))
            freqs.extend(found.values())
            self._live[slot] = True
            self._sizes[slot] = size
            self.rows += 1
            self.total_tokens += size
        numbers = np.asarray(terms, np.int64)
        order = np.argsort(numbers, kind="stable")  # (slot order within a term)
        entries = np.empty(len(terms), _ENTRY)
        entries["slot"] = np.asarray(slots, np.int32)[order]
        entries["version"] = self._version[entries["slot"]]
        entries["freq"] = np.asarray(freqs, np.float32)[order]
        numbers = numbers[order]
        firsts = np.flatnonzero(np.concatenate(([True], numbers[1:] != numbers[:-1])))
        for number, part in zip(numbers[firsts].tolist(), np.split(entries, firsts[1:]), strict=True):
            self._lists.setdefault(number, []).append(part)

    def _holders(self, token: int) -> npt.NDArray[np.void] | None:
        """The live postings of ``token`` (compacted into one array, in slot order, as a side effect)."""
        parts = self._lists.get(token)
        if not parts:
            return None
        entries = parts[0] if len(parts) == 1 else np.concatenate(parts)
        valid = self._live[entries["slot"]] & (self._version[entries["slot"]] == entries["version"])
        if len(parts) > 1 or not valid.all():
            entries = entries[valid]
            entries = entries[np.argsort(entries["slot"], kind="stable")]
            if len(entries):
                self._lists[token] = [entries]
            else:
                del self._lists[token]
                return None
        return entries

    def search(
        self,
        words: Sequence[str],
        k: int,
        allowed: npt.NDArray[np.bool_] | None,
        phrase_scores: PhraseScores,
    ) -> list[tuple[int, float]] | None:
        """Top ``k`` (slot, score) among ``allowed`` for the phrases ``words`` (``"w1" OR "w2" ...``),
        best first, ties by slot; ``None`` if a word is no token at all (FTS5 answers such a query)."""
        if self.rows == 0:
            return []
        tokenized = self.tokens.numbered(words, new=False)
        if any(not tokens for tokens in tokenized):
            return None
        avgdl = self.total_tokens / self.rows
        parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
        for word, tokens in zip(words, tokenized, strict=True):
            if len(tokens) > 1:
                parts.append(phrase_scores(word))
                continue
            entries = self._holders(tokens[0])
            if entries is None:
                continue
            slots = entries["slot"].astype(np.int64)
            freq = entries["freq"].astype(np.float64)
            hits = len(slots)
            idf = math.log((self.rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            size = self._sizes[slots]
            parts.append((slots, idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * size / avgdl)))))
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return []
        if len(parts) == 1:
            union = parts[0][0]  # (in slot order, each once)
        else:
            every = np.sort(np.concatenate([slots for slots, _ in parts]))
            union = every[np.concatenate(([True], every[1:] != every[:-1]))]
        totals = np.zeros(len(union), np.float64)
        for slots, scores in parts:  # (in query order, as FTS5 adds the phrases)
            totals[np.searchsorted(union, slots)] += scores
        if allowed is not None:
            keep = union < len(allowed)
            keep[keep] = allowed[union[keep]]
            union, totals = union[keep], totals[keep]
        if len(union) > k:
            cut = np.partition(totals, len(totals) - k)[len(totals) - k]
            near = totals >= cut
            union, totals = union[near], totals[near]
        order = np.lexsort((union, -totals))[:k]
        return list(zip(union[order].tolist(), totals[order].tolist(), strict=True))


class BackgroundPostings:
    """:class:`Postings` of a dump of the rows, made by a thread while FTS5 answers, then kept current.

    Every method is called under the store's lock (writes, and the reads that may install the
    postings), so the changes made while the thread works are logged and replayed, in order, on the
    postings it made before they answer."""

    CHUNK: Final = 2000

    def __init__(self, tokens: Tokens, rows: Callable[[], list[Row]]) -> None:
        """``rows``: called by the thread, every row (in slot order) as it was when this was made."""
        self._log: list[tuple[list[Row], list[int]]] = []
        """Changes since the dump, in order: (rows added, slots removed)."""
        self._made: Postings | None = None
        self._active: Postings | None = None
        self._failed = False
        self._thread = threading.Thread(target=self._make, args=(tokens, rows), name="eventmem-postings", daemon=True)
        self._thread.start()

    def _make(self, tokens: Tokens, source: Callable[[], list[Row]]) -> None:
        started = time.perf_counter()
        try:
            rows = source()
            postings = Postings(tokens)
            for start in range(0, len(rows), self.CHUNK):
                postings.add(rows[start : start + self.CHUNK])
        except Exception:  # (out of memory, say: FTS5 goes on ranking alone)
            self._failed = True
            log.exception("could not make the keyword postings; FTS5 ranks every search")
            return
        self._made = postings
        log.info("keyword postings of %d memories made in %.2f s", len(rows), time.perf_counter() - started)

    def added(self, rows: list[Row]) -> None:
        if self._active is not None:
            self._active.add(rows)
        elif not self._failed:
            self._log.append((list(rows), []))

    def removed(self, slots: list[int]) -> None:
        if self._active is not None:
            self._active.remove(slots)
        elif not self._failed:
            self._log.append(([], list(slots)))

    def ready(self) -> Postings | None:
        """The postings, current, once the thread made them (else ``None``: FTS5 answers)."""
        if self._active is None and (made := self._made) is not None:
            for rows, slots in self._log:
                made.remove(slots)
                made.add(rows)
            self._log = []
            self._active = made
        return self._active

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread; whether it is done."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
