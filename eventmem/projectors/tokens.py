"""Texts to the tokens of the keyword index's FTS5 tokenizer (``porter unicode61 remove_diacritics 2``),
exactly, without asking FTS5 for each text.

An ASCII text splits on everything but letters and digits (``unicode61``'s rule for ASCII) and is
folded to lower case; each distinct token's Porter stem is asked of FTS5 once and kept. Other texts,
and texts long enough for FTS5 to cut a token, are tokenized by FTS5 itself. Stems are numbered.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from itertools import islice, repeat
from typing import Final

__all__ = ["FTS5_TOKEN_LIMIT", "MAX_STEMS", "Tokens", "close_when_free"]

_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
FTS5_TOKEN_LIMIT: Final = 32768
"""FTS5 cuts longer tokens (``FTS5_MAX_TOKEN_SIZE``): a text this long is left to FTS5."""
MAX_STEMS: Final = 1_000_000
"""Stems kept before the cache starts over (a bound on memory for a very varied journal)."""


def close_when_free(db: sqlite3.Connection, lock: threading.Lock, *, interrupt: bool = False) -> None:
    """Close ``db`` once no thread holds ``lock``, which every thread that uses it holds; with
    ``interrupt``, what it runs is interrupted first. A connection's finalizer runs at exit while a
    daemon thread may be in the middle of using it, and closing it under the thread crashes the process."""
    if interrupt:
        db.interrupt()
    with lock:
        db.close()


class Tokens:
    """Texts to FTS5's tokens, exactly as the keyword index's tokenizer makes them, numbered: each
    distinct stem gets a number, kept for the life of this object."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        # closed under the lock: at exit the finalizers run while a thread may still be tokenizing
        # (closing a connection in use crashes the process)
        weakref.finalize(self, close_when_free, self._db, self._lock)
        self._db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
        self._db.execute("CREATE VIRTUAL TABLE t_instances USING fts5vocab(t, instance)")
        self._numbers: dict[str, int] = {}
        """A stem's number."""
        self._known: dict[str, int] = {}
        """A lower-cased ASCII token's stem's number (a cache: emptied when it grows past MAX_STEMS)."""
        self._absent: set[str] = set()
        """Query tokens whose stem no row held when asked (emptied when a stem is numbered, or past MAX_STEMS)."""

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

    def numbered_stems(self) -> tuple[list[str], list[str], list[int]]:
        """Every numbered stem, in the order of their numbers; the ASCII tokens whose stems are known,
        and their stems' numbers (all three at once: see :meth:`numbering`)."""
        with self._lock:
            return list(self._numbers), list(self._known), list(self._known.values())

    def stems_from(self, start: int) -> list[str]:
        """The stems numbered ``start`` and after, in the order of their numbers."""
        with self._lock:
            return list(islice(self._numbers, start, None))

    @classmethod
    def numbering(cls, stems: Sequence[str], known: Sequence[str] = (), numbers: Sequence[int] = ()) -> Tokens:
        """Tokens whose stems are already numbered, in this order, and the stems of ``known`` ASCII
        tokens already asked, by their ``numbers`` (from :meth:`numbered_stems`): a query of those tokens
        is not asked of FTS5 again."""
        tokens = cls()
        tokens._numbers = {stem: number for number, stem in enumerate(stems)}
        if len(tokens._numbers) != len(stems):
            raise ValueError("a stem is numbered twice")
        if len(known) != len(numbers) or len(known) > MAX_STEMS:
            raise ValueError("the known tokens do not match their stems")
        if numbers and not (0 <= min(numbers) and max(numbers) < len(stems)):
            raise ValueError("a known token's stem is not numbered")
        tokens._known = dict(zip(known, numbers, strict=True))
        return tokens

    def _number(self, stem: str, *, new: bool) -> int:
        """The stem's number; a stem never seen gets one if ``new``, else -1 (no row holds it)."""
        number = self._numbers.get(stem)
        if number is None:
            if not new:
                return -1
            number = self._numbers[stem] = len(self._numbers)
            self._absent.clear()
        return number

    def numbered(self, texts: Sequence[str], *, new: bool = True) -> list[list[int]]:
        """The stem numbers of each text's tokens. ASCII texts are split here and each distinct token's
        stem asked of FTS5 once; other texts are tokenized by FTS5. ``new``: number unseen stems (a
        query's are -1 instead, so that queries cannot grow the table)."""
        split: list[list[str] | None] = []
        others: list[int] = []
        for i, text in enumerate(texts):
            if text.isascii() and len(text) < FTS5_TOKEN_LIMIT:
                split.append(_ASCII_TOKEN.findall(text.lower()))
            else:
                split.append(None)
                others.append(i)
        with self._lock:
            unknown = set().union(*(tokens for tokens in split if tokens is not None)) - self._known.keys()
            if not new:  # (a row's tokens are all numbered: one asked before may be new now)
                unknown -= self._absent
            if unknown:
                if len(self._known) + len(unknown) > MAX_STEMS:
                    self._known = {}
                if len(self._absent) + len(unknown) > MAX_STEMS:
                    self._absent = set()
                fresh = sorted(unknown)
                for token, stems in zip(fresh, self._by_fts5(fresh), strict=True):
                    number = self._number(stems[0] if len(stems) == 1 else token, new=new)  # (one token)
                    if number >= 0:
                        self._known[token] = number
                    else:
                        self._absent.add(token)
            known = self._known
            look = known.get
            result = [list(map(look, tokens, repeat(-1))) if tokens is not None else [] for tokens in split]
            if others:
                for i, stems in zip(others, self._by_fts5([texts[i] for i in others]), strict=True):
                    result[i] = [self._number(stem, new=new) for stem in stems]
        return result
