"""Filling an empty keyword index with many rows at once, from a second thread.

See :class:`BulkLoad`.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.projectors.tokens import FTS5_TOKEN_LIMIT, close_when_free

__all__ = [
    "BULK_HASHSIZE",
    "DEFAULT_HASHSIZE",
    "SCRATCH",
    "BulkLoad",
    "Row",
    "attach_scratch",
    "detach_scratch",
    "digests_of",
    "guarded_connection",
    "texts_digest",
    "words_of",
]

Row = tuple[int, str, str, str, str]
"""(slot, title, summary, content, tags)"""
_WORD = re.compile(r"\w+", re.UNICODE)
BULK_HASHSIZE: Final = 256 * 1024 * 1024
"""FTS5's buffer of pending terms during a bulk load (a ceiling, not an allocation): the whole load
is flushed as one segment instead of one per megabyte, then merged, which costs about twice as much."""
DEFAULT_HASHSIZE: Final = 1024 * 1024


_ASCII_WORDS: Final = bytes(
    (ord(chr(c).lower()) if chr(c).isalnum() or c == ord("_") else ord(" ")) if c < 128 else c for c in range(256)
)
"""An ASCII byte to itself lower-cased if ``\\w`` matches it, else to a space."""


def texts_digest(texts: tuple[str, ...]) -> int:
    """8 bytes of BLAKE2b of a row's texts (title, summary, content, tags), as an unsigned integer:
    what the keyword index keeps of a row to know the texts it was made from (see
    :mod:`eventmem.projectors.keywords`). The texts are msgpack-encoded, so no two tuples share an input."""
    return int.from_bytes(hashlib.blake2b(msgspec.msgpack.encode(texts), digest_size=8).digest(), "little")


def digests_of(rows: list[Row]) -> npt.NDArray[np.uint64]:
    """:func:`texts_digest` of each row's texts."""
    return np.fromiter((texts_digest(row[1:]) for row in rows), np.uint64, len(rows))


def words_of(text: str) -> set[str]:
    """The distinct lower-cased words of ``text``, as the document frequencies count them: its
    ``\\w+`` runs, lower-cased (an ASCII text by a byte table and a split, 3x faster: the same words)."""
    if text.isascii():
        return set(text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split())
    return set(map(str.lower, _WORD.findall(text)))


SCRATCH: Final = "scratch"
"""The in-memory database attached for the rows of a bulk change (:func:`attach_scratch`)."""


def attach_scratch(db: sqlite3.Connection) -> None:
    """Attach an empty in-memory database :data:`SCRATCH` for the rows a bulk change copies in (not
    in a transaction). Not SQLite's ``temp`` schema: a dropped temporary table's pages stay in the
    connection's temporary database for good (40 MB after a bulk load of 20k memories), while a
    detached database gives every page back."""
    detach_scratch(db)
    db.execute(f"ATTACH ':memory:' AS {SCRATCH}")


def detach_scratch(db: sqlite3.Connection) -> None:
    """Detach :data:`SCRATCH` if it is attached (not in a transaction): its pages are freed."""
    if any(row[1] == SCRATCH for row in db.execute("PRAGMA database_list")):
        db.execute(f"DETACH {SCRATCH}")


def guarded_connection(owner: object, db: sqlite3.Connection) -> threading.Lock:
    """The lock a thread filling ``db`` holds (a bulk load's). ``db`` is closed when ``owner`` is
    collected (Python 3.13 warns of a connection collected open) or at exit, and never under that
    thread: what it runs is interrupted, and the close waits for the lock."""
    lock = threading.Lock()
    weakref.finalize(owner, close_when_free, db, lock, interrupt=True)
    return lock


class BulkLoad:
    """Rows for an empty keyword index (its connection ``db``, and the lock of the thread filling it,
    ``using``), indexed by a worker thread in one transaction; ``done`` is handed the document
    frequencies, the slots and the digests of their texts (see :func:`texts_digest`) once every row is in.

    The rows are first copied into a temporary table by the caller (about 2 us a row); the worker
    then fills the FTS5 index from it with one ``INSERT ... SELECT``, a single call into SQLite
    that runs without the GIL, beside the caller's Python work on another core. (``executemany``
    from the worker would take the GIL back after every row, and wait for it while the caller
    runs Python.) Nothing else may use the index in between (the store holds its lock throughout).
    The index answers exactly as if the rows had been given to its ``upsert``.

    The document frequencies of the rows whose text is ASCII are counted at the same time by a
    second thread, on a database of its own (see :class:`_AsciiCounts`), its texts copied in by the
    caller once the first thread runs: two statements that tokenize every text, each on a core of
    its own where there are two (one after the other on one connection, they took 1.4 s and 0.9 s at
    100k memories). The fill commits once the counts are made: rows and counts are in together, or
    neither. Other texts are counted in Python."""

    def __init__(
        self,
        db: sqlite3.Connection,
        using: threading.Lock,
        rows: list[Row],
        done: Callable[[Counter[str], set[int], npt.NDArray[np.uint64]], None],
    ) -> None:
        self._db = db
        self._using = using
        self._done = done
        self._rows = rows
        self._error: BaseException | None = None
        self._finished = False
        self._vocabulary: list[tuple[str, int]] = []
        self._other_texts: list[str] = []
        """Texts the counting thread does not count (not ASCII, or long enough for FTS5 to cut a word)."""
        self._counts = _AsciiCounts()
        db = self._db
        try:
            attach_scratch(db)
            db.execute("INSERT INTO docs(docs, rank) VALUES ('hashsize', ?)", [BULK_HASHSIZE])
            db.execute("BEGIN")
            db.execute(f"CREATE TABLE {SCRATCH}.bulk_rows(slot INTEGER PRIMARY KEY, title, summary, content, tags)")
            db.executemany(f"INSERT INTO {SCRATCH}.bulk_rows VALUES (?, ?, ?, ?, ?)", rows)
            self._thread = threading.Thread(target=self._insert, name="eventmem-keywords", daemon=True)
            self._thread.start()
        except BaseException:
            self._counts.close()
            self._end(commit=False)
            raise
        # the texts to count, while the thread fills the index (it commits once they are counted)
        ascii_texts: list[tuple[str]] = []
        try:
            for row in rows:
                text = " ".join(row[1:])
                if text.isascii() and len(text) < FTS5_TOKEN_LIMIT:
                    ascii_texts.append((text,))
                else:
                    self._other_texts.append(text)
        except BaseException as exc:  # (the thread is running: it rolls back, and finish raises this)
            self._counts.fail(exc)
        else:
            self._counts.count(ascii_texts)

    def _insert(self) -> None:
        with self._using:  # (the connection is not closed under it, even at exit)
            self._fill()

    def _fill(self) -> None:
        try:
            self._db.execute(
                "INSERT INTO docs(rowid, title, summary, content, tags) "
                f"SELECT slot, title, summary, content, tags FROM {SCRATCH}.bulk_rows ORDER BY slot"
            )
            self._vocabulary = self._counts.result()  # (rows and counts are in together, or neither)
            self._end(commit=True)
        except BaseException as exc:  # handed to finish()
            self._error = exc
            self._end(commit=False)

    def _end(self, *, commit: bool) -> None:
        db = self._db
        try:
            if commit:
                db.execute(f"DROP TABLE {SCRATCH}.bulk_rows")
                db.execute("COMMIT")
        finally:
            if db.in_transaction:  # (no commit, or a failed one; some errors roll back on their own)
                db.execute("ROLLBACK")
            detach_scratch(db)
            db.execute("INSERT INTO docs(docs, rank) VALUES ('hashsize', ?)", [DEFAULT_HASHSIZE])

    def finish(self) -> None:
        """Count the document frequencies, wait until every row is in; raises what the insert
        raised (the index is then empty)."""
        if self._finished:
            return
        self._finished = True
        df = Counter[str]()
        for text in self._other_texts:
            df.update(words_of(text))
        digests = digests_of(self._rows)
        self._thread.join()
        if self._error is not None:
            raise self._error
        for term, documents in self._vocabulary:
            df[term] += documents
        self._done(df, {r[0] for r in self._rows}, digests)


class _AsciiCounts:
    """The number of texts holding each word, for ASCII texts, counted by a thread on a database of
    its own: for ASCII, a ``unicode61`` FTS5 table's tokens with ``_`` as a token character, folded to
    lower case, are exactly the lower-cased ``\\w+`` words of :func:`words_of` (``fts5vocab`` gives each
    one's number of documents). The texts are copied in by the caller (about 1 us a text); the
    thread's one ``INSERT ... SELECT`` runs without the GIL, beside the keyword index's fill, which
    shares no connection with it (two statements on one connection would take turns). The table
    keeps neither the texts nor their lengths (``content = '', columnsize = 0``): only the words'
    counts are read, and at 100k memories it is made in 0.49 s of a core instead of 0.77 s."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._vocabulary: list[tuple[str, int]] = []
        self._error: BaseException | None = None
        self._counted = threading.Event()

    def count(self, texts: list[tuple[str]]) -> None:
        """Copy ``texts`` in and count them from a thread; an error is kept for :meth:`result`."""
        try:
            self._db.execute(
                "CREATE VIRTUAL TABLE words USING fts5("
                "text, tokenize = \"unicode61 remove_diacritics 0 tokenchars '_'\", "
                "detail = none, content = '', columnsize = 0)"
            )
            self._db.execute("CREATE VIRTUAL TABLE words_vocabulary USING fts5vocab(words, row)")
            self._db.execute("INSERT INTO words(words, rank) VALUES ('hashsize', ?)", [BULK_HASHSIZE])
            self._db.execute("CREATE TABLE texts(text)")
            self._db.executemany("INSERT INTO texts VALUES (?)", texts)
            threading.Thread(target=self._count, name="eventmem-keyword-counts", daemon=True).start()
        except BaseException as exc:
            self.fail(exc)

    def fail(self, error: BaseException) -> None:
        """Count nothing: :meth:`result` raises ``error``."""
        self._error = error
        self.close()

    def _count(self) -> None:
        try:
            self._db.execute("INSERT INTO words(rowid, text) SELECT rowid, text FROM texts")
            self._vocabulary = self._db.execute("SELECT term, doc FROM words_vocabulary").fetchall()
        except BaseException as exc:  # handed to result()
            self._error = exc
        finally:
            self.close()  # (in this thread: nothing else uses the connection)

    def close(self) -> None:
        self._db.close()
        self._counted.set()

    def result(self) -> list[tuple[str, int]]:
        """(word, texts holding it) once counted; raises what the counting raised."""
        self._counted.wait()
        if self._error is not None:
            raise self._error
        return self._vocabulary
