"""The keyword projector: SQLite FTS5 (BM25 ranking, Porter stemming), held in memory.

SQLite ships with Python, so this is a well-kept engine at no extra cost. The index lives in an
in-memory database; a snapshot is its serialized bytes.

FTS5 scores every document that matches any query word before it can cut the top ``k``, so a word
found in most documents costs much and adds almost nothing (its BM25 weight is near zero). The index
therefore keeps each word's document frequency and queries with the rarest words only: stop words
are dropped, and common words join only while the total number of postings stays within a budget.
The budget is smaller beside a vector search, which already weighs the common words: on the
retrieval benchmark with 1k, 10k and 40k unrelated memories added, hybrid recall@5, recall@10 and
MRR are the same with either budget, and the keyword search takes a third to a half of the time.

From ``postings_from`` rows on (``Tuning.postings_from``), a search is ranked from in-memory postings
(:mod:`eventmem.projectors.postings`) with FTS5's own scores and order, once a thread has made them
from the rows; FTS5 still holds the rows, answers until then, and scores the words that are phrases.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.core.words import STOPWORDS
from eventmem.projectors.base import Batch, Projected, SegmentPosition
from eventmem.projectors.columns import SlotTable
from eventmem.projectors.keywords_bulk import (
    DEFAULT_HASHSIZE,
    SCRATCH,
    BulkLoad,
    Row,
    attach_scratch,
    detach_scratch,
    guarded_connection,
    words_of,
)
from eventmem.projectors.postings import DEFAULT_POSTINGS_FROM, WEIGHTS, BackgroundPostings, PhraseScoresKept

__all__ = ["BULK_KEYWORDS_MIN", "UPSERT_BESIDE_FROM", "KeywordIndex", "KeywordsProjector", "fts_query", "query_words"]

_SCHEMA: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
    "title, summary, content, tags, tokenize='porter unicode61 remove_diacritics 2')"
)
_WORD = re.compile(r"\w+", re.UNICODE)
# BM25 column weights: a hit in the title or the tags says more than one in a long body.
_RANK: Final = f"bm25(docs, {', '.join(map(str, WEIGHTS))})"  # (the postings score with the same weights)
_ROWS: Final = "SELECT rowid, title, summary, content, tags FROM docs ORDER BY rowid"


MAX_QUERY_WORDS: Final = 16
MIN_POSTINGS_BUDGET: Final = 2000
"""Postings a keyword-only query may touch: at least this many, else 2% of the documents."""
MIN_POSTINGS_BUDGET_BESIDE_VECTORS: Final = 250
"""Postings a query may touch beside a vector search: at least this many, else 0.25% of the documents."""
MAX_BARRED_FOR_LIMIT: Final = 1000
"""A filtered search asks SQLite for its best ``k`` + (slots the filter bars) rows when at most this
many are barred (deleted, expired, superseded or filtered out), else streams rows in rank order."""


_FRAME: Final = b"eventmem keywords 1\n"
"""The start of a serialized index: then the database's length (8 bytes), the database, and the
stored postings (none if not made)."""


def _unframed(data: bytes | memoryview) -> tuple[memoryview, bytes]:
    """(the database, the stored postings) of a serialized index; :class:`ValueError` if it is not one."""
    view = memoryview(data)
    if bytes(view[: len(_FRAME)]) != _FRAME or len(view) < len(_FRAME) + 8:
        raise ValueError("not a serialized keyword index")
    start = len(_FRAME) + 8
    end = start + int.from_bytes(view[len(_FRAME) : start], "little")
    if end > len(view):
        raise ValueError("a serialized keyword index cut short")
    return view[start:end], bytes(view[end:])  # (the postings copied: the thread reads them later)


def fts_query(text: str) -> str:
    """A safe FTS5 query: every word quoted (no operators from user text), any word may match."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return " OR ".join(f'"{w}"' for w in words[:64])


def query_words(text: str, frequency: Callable[[str], int], rows: int, *, beside_vectors: bool = False) -> list[str]:
    """The words of ``text`` worth asking for among ``rows`` documents, ``frequency`` giving the
    documents holding a word in its exact form: no stop words, rarest first, within a postings budget
    (a smaller one ``beside_vectors``, see the module's docstring). The rarest word is always asked.
    (PostgreSQL's keyword search asks the same words: :mod:`eventmem.projectors.postgres.keywords`.)"""
    # a word's count is of its exact form; FTS5 also matches other forms of its stem
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS] or words
    content.sort(key=lambda w: (frequency(w), w))
    if beside_vectors:
        budget = max(MIN_POSTINGS_BUDGET_BESIDE_VECTORS, rows // 400)
    else:
        budget = max(MIN_POSTINGS_BUDGET, rows // 50)
    chosen: list[str] = []
    used = 0
    for word in content[:MAX_QUERY_WORDS]:
        count = frequency(word)
        if chosen and used + count > budget:
            break
        chosen.append(word)
        used += count
    return chosen


class KeywordIndex:
    def __init__(self, data: bytes | memoryview | None = None, *, connection: sqlite3.Connection | None = None) -> None:
        """``connection``: an in-memory database to use (autocommit, any thread), else a new one."""
        self._db = connection or sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.using = guarded_connection(self, self._db)
        """Held by a bulk load's thread while it fills the connection, which is not closed under it."""
        self.df: Counter[str] = Counter()
        """The rows each lower-cased word occurs in. Every row counts: a sample (of slots) would
        choose other query words once a rebuild gives the memories other slots."""
        self._present: set[int] = set()
        self._phrases = PhraseScoresKept()
        """Phrase scores asked of FTS5 since the last change (an identifier is often asked again)."""
        self.ranking: BackgroundPostings | None = None
        """In-memory postings that rank searches once made (see :meth:`rank_in_memory`)."""
        if data is not None:
            data, postings = _unframed(data)
            self._db.deserialize(data)
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'present'").fetchone():
                (blob,) = self._db.execute("SELECT rowids FROM present").fetchone()
                self._present = set(np.frombuffer(blob, dtype=np.int64).tolist())
                self._db.execute("DROP TABLE present")
            else:
                self._present = {int(r[0]) for r in self._db.execute("SELECT rowid FROM docs")}
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'df'").fetchone():
                (counts,) = self._db.execute("SELECT counts FROM df").fetchone()
                self._db.execute("DROP TABLE df")
                try:  # (one blob: a table of 400k words takes 0.25 s to read, the blob 0.1 s)
                    self.df = Counter(msgspec.msgpack.decode(counts, type=dict[str, int]))
                except msgspec.DecodeError as exc:
                    raise ValueError(f"the keyword index's word counts do not decode: {exc}") from exc
            if postings:  # (decoded and checked by a thread: a start does not wait for it)
                self.ranking = BackgroundPostings.of_stored(postings, len(self._present))
        self._db.execute(_SCHEMA)

    def __len__(self) -> int:
        return len(self._present)

    def __contains__(self, slot: int) -> bool:
        return slot in self._present

    def engine_state(self) -> tuple[int, int, bool]:
        """(FTS5 ``hashsize``, temporary tables and attached databases, in a transaction): a bulk load
        leaves them as it found them."""
        (hashsize,) = self._db.execute("SELECT v FROM docs_config WHERE k = 'hashsize'").fetchone() or (
            DEFAULT_HASHSIZE,
        )
        (temporary,) = self._db.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()
        attached = [row[1] for row in self._db.execute("PRAGMA database_list") if row[1] not in ("main", "temp")]
        return int(hashsize), int(temporary) + len(attached), self._db.in_transaction

    def _forget(self, slots: list[int]) -> None:
        """Delete rows, taking their words out of the document frequencies. In increasing order: FTS5
        flushes its pending terms whenever a row id is below the previous one's (random order: 10x slower)."""
        present = sorted({s for s in slots if s in self._present})
        if not present:
            return
        for start in range(0, len(present), 500):
            chunk = present[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT title, summary, content, tags FROM docs WHERE rowid IN ({marks})"
            self.df.subtract(
                Counter(chain.from_iterable(words_of(" ".join(row)) for row in self._db.execute(sql, chunk)))
            )
        self._db.executemany("DELETE FROM docs WHERE rowid = ?", ((s,) for s in present))
        self._present.difference_update(present)
        if self.ranking is not None:
            self.ranking.removed(present)

    def frequency(self, word: str) -> int:
        """The number of documents holding ``word`` in this exact form."""
        return self.df.get(word, 0)

    def holds(self, word: str) -> bool:
        """Whether any memory holds ``word`` (or a form of its stem): from the in-memory postings once
        they are made (a word of one token), else from FTS5 (a phrase, such as ``parse_config``)."""
        postings = self.ranking.ready() if self.ranking is not None else None
        if postings is not None and (held := postings.holds(word)) is not None:
            return held
        quoted = '"' + word.replace('"', '""') + '"'
        return self._db.execute("SELECT 1 FROM docs WHERE docs MATCH ? LIMIT 1", [quoted]).fetchone() is not None

    def upsert(self, rows: Iterable[tuple[int, str, str, str, str]]) -> None:
        """Rows of (slot, title, summary, content, tags), inserted in increasing slot order (see :meth:`_forget`)."""
        rows = sorted(rows, key=lambda row: row[0])
        if not rows:
            return
        self._phrases.clear()
        if len(rows) >= UPSERT_BESIDE_FROM:
            self.change_beside(rows, [])()
            return
        self._db.execute("BEGIN")
        self._forget([r[0] for r in rows])
        self._db.executemany("INSERT INTO docs(rowid, title, summary, content, tags) VALUES (?, ?, ?, ?, ?)", rows)
        self._db.execute("COMMIT")
        self.df.update(chain.from_iterable(words_of(" ".join(row[1:])) for row in rows))
        self._present.update(r[0] for r in rows)
        if self.ranking is not None:
            self.ranking.added(rows)

    def change_beside(self, rows: list[Row], removed: list[int]) -> Callable[[], None]:
        """Remove the rows of the slots ``removed``, then :meth:`upsert` ``rows`` (many: a merged
        branch; in slot order), as :class:`BulkLoad` fills an index: the rows are copied into a
        temporary table (about 2 us a row), and a thread started now replaces the index's rows from
        it in two statements, which SQLite runs without the GIL. The function returned counts the
        words the document frequencies lose and gain (in the caller's thread: the thread writes
        meanwhile), waits for the thread and raises what it raised; the index is not to be used
        until it is called. The same rows, counts and answers as :meth:`remove` and :meth:`upsert`."""
        self._phrases.clear()
        db = self._db
        gone = sorted({s for s in removed if s in self._present} | {r[0] for r in rows if r[0] in self._present})
        old: list[str] = []
        for start in range(0, len(gone), 500):
            chunk = gone[start : start + 500]
            sql = f"SELECT title, summary, content, tags FROM docs WHERE rowid IN ({','.join('?' * len(chunk))})"
            old += (" ".join(row) for row in db.execute(sql, chunk))
        failed: list[BaseException] = []

        def write() -> None:
            with self.using:  # (the connection is not closed under it, even at exit)
                try:
                    db.execute(f"DELETE FROM docs WHERE rowid IN (SELECT slot FROM {SCRATCH}.upsert_gone)")
                    db.execute(
                        "INSERT INTO docs(rowid, title, summary, content, tags) "
                        f"SELECT slot, title, summary, content, tags FROM {SCRATCH}.upsert_rows ORDER BY slot"
                    )
                    db.execute("COMMIT")
                except BaseException as exc:  # (raised by finish)
                    failed.append(exc)

        def end() -> None:
            if db.in_transaction:  # (failed before or at the commit)
                db.execute("ROLLBACK")
            detach_scratch(db)

        attach_scratch(db)  # (not temporary tables: see attach_scratch)
        db.execute("BEGIN")
        try:
            db.execute(f"CREATE TABLE {SCRATCH}.upsert_rows(slot INTEGER PRIMARY KEY, title, summary, content, tags)")
            db.executemany(f"INSERT INTO {SCRATCH}.upsert_rows VALUES (?, ?, ?, ?, ?)", rows)
            db.execute(f"CREATE TABLE {SCRATCH}.upsert_gone(slot INTEGER PRIMARY KEY)")
            db.executemany(f"INSERT INTO {SCRATCH}.upsert_gone VALUES (?)", ((slot,) for slot in gone))
            writer = threading.Thread(target=write, name="eventmem-keywords", daemon=True)
            writer.start()
        except BaseException:
            end()
            raise

        def finish() -> None:
            try:
                try:
                    lost = Counter(chain.from_iterable(map(words_of, old)))
                    gained = Counter(chain.from_iterable(words_of(" ".join(row[1:])) for row in rows))
                finally:
                    writer.join()
            finally:
                end()
            if failed:
                raise failed[0]
            self.df.subtract(lost)
            self.df.update(gained)
            self._present.difference_update(gone)
            self._present.update(r[0] for r in rows)
            if self.ranking is not None:
                self.ranking.removed(gone)
                self.ranking.added(rows)

        return finish

    def rank_in_memory(self) -> None:
        """Rank searches from in-memory postings, made by a thread from the rows there are now (FTS5
        answers until they are; every later change reaches them). Once; the bulk load settled first."""
        if self.ranking is None:
            copy = self._db.serialize()  # (a copy of the pages: the thread reads the rows from it)

            def rows() -> list[Row]:
                db = sqlite3.connect(":memory:")
                try:
                    db.deserialize(copy)
                    return db.execute(_ROWS).fetchall()
                finally:
                    db.close()

            self.ranking = BackgroundPostings.of_rows(rows)

    def _phrase_scores(self, word: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The rows holding the phrase ``word`` and its part of their BM25 score, from FTS5 (or as it
        answered since the last change: a phrase costs FTS5 milliseconds when its parts are common)."""
        return self._phrases.get(word, self._fts5_phrase_scores)

    def _fts5_phrase_scores(self, word: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        quoted = '"' + word.replace('"', '""') + '"'
        sql = f"SELECT rowid, {_RANK} FROM docs WHERE docs MATCH ? ORDER BY rowid"
        rows = self._db.execute(sql, [quoted]).fetchall()
        slots = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        return slots, -np.fromiter((r[1] for r in rows), np.float64, len(rows))

    def bulk_load(self, rows: list[Row]) -> BulkLoad:
        """Fill an empty index with ``rows`` (slots in increasing order) from a thread while the
        caller goes on; :meth:`BulkLoad.finish` waits for it (see :class:`BulkLoad`)."""
        if self._present:
            raise ValueError("bulk_load needs an empty keyword index")
        return BulkLoad(self._db, self.using, rows, self._loaded)

    def _loaded(self, df: Counter[str], present: set[int]) -> None:
        """A bulk load is in: its rows' document frequencies and slots."""
        self.df, self._present = df, present
        self._phrases.clear()

    def remove(self, slots: Iterable[int]) -> None:
        self._phrases.clear()
        self._db.execute("BEGIN")
        self._forget([int(s) for s in slots])
        self._db.execute("COMMIT")

    def query_words(self, text: str, *, beside_vectors: bool = False) -> list[str]:
        """The words worth asking FTS5 for (see :func:`query_words`)."""
        return query_words(text, self.frequency, len(self._present), beside_vectors=beside_vectors)

    def _matches(self, match: str) -> Iterator[tuple[int, float]]:
        cursor = self._db.execute(f"SELECT rowid, {_RANK} AS r FROM docs WHERE docs MATCH ? ORDER BY r, rowid", [match])
        while batch := cursor.fetchmany(256):
            yield from batch

    def _best(self, match: str, count: int) -> list[tuple[int, float]]:
        """The ``count`` best matching rows, (slot, rank), best first."""
        rows: list[tuple[int, float]] = self._db.execute(
            f"SELECT rowid, {_RANK} AS r FROM docs WHERE docs MATCH ? ORDER BY r, rowid LIMIT ?", [match, count]
        ).fetchall()
        return rows

    def search(
        self, text: str, k: int, allowed: npt.NDArray[np.bool_] | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]:
        """Top ``k`` (slot, score) by BM25 among ``allowed`` slots; higher scores are better, ties by
        slot. ``beside_vectors``: the caller fuses these with a vector search (see :meth:`query_words`)."""
        words = self.query_words(text, beside_vectors=beside_vectors)
        if not words or k <= 0:
            return []
        postings = self.ranking.ready() if self.ranking is not None else None
        if postings is not None:
            found = postings.search(words, k, allowed, self._phrase_scores)
            if found is not None:
                return found
        match = " OR ".join(f'"{w}"' for w in words)
        if allowed is None:
            return [(int(slot), -float(rank)) for slot, rank in self._best(match, k)]
        limit = len(allowed)
        barred = limit - int(np.count_nonzero(allowed))
        if barred <= MAX_BARRED_FOR_LIMIT:
            # the best k + barred rows hold the best k allowed ones (if there are k): SQLite keeps
            # only those in its sorter, and Python looks at no other row
            rows = self._best(match, k + barred)
            out = [(int(slot), -float(rank)) for slot, rank in rows if slot < limit and allowed[slot]][:k]
            if len(out) >= k or len(rows) < k + barred:
                return out
        out = []
        for slot, rank in self._matches(match):  # filter before the cut, streaming in rank order
            if slot < limit and allowed[slot]:
                out.append((int(slot), -float(rank)))
                if len(out) >= k:
                    break
        return out

    def serialize(self) -> bytes:
        """The database with the document frequencies and the rows present in plain tables beside the
        index, and after it the in-memory postings if they are made (see :func:`_unframed`)."""
        return self.serialize_later()()

    def serialize_later(self) -> Callable[[], bytes]:
        """:meth:`serialize` in two steps: the database is copied now, the postings frozen (a copy of
        their arrays' lists), and the function returned encodes them, in any thread, as they are now."""
        self._db.execute("CREATE TABLE df(counts BLOB)")
        self._db.execute("CREATE TABLE present(rowids BLOB)")  # (a set of 100k ints loads 10x faster so)
        try:
            counts = msgspec.msgpack.encode({t: n for t, n in self.df.items() if n > 0})
            self._db.execute("INSERT INTO df VALUES (?)", (counts,))
            rowids = np.fromiter(self._present, dtype=np.int64, count=len(self._present))
            self._db.execute("INSERT INTO present VALUES (?)", (rowids.tobytes(),))
            database = self._db.serialize()
        finally:
            self._db.execute("DROP TABLE df")
            self._db.execute("DROP TABLE present")
        made = self.ranking.ready() if self.ranking is not None else None
        frozen = made.frozen() if made is not None else None

        def framed() -> bytes:
            stored = frozen.encoded() if frozen is not None else b""  # (so that the next start reads them)
            return b"".join((_FRAME, len(database).to_bytes(8, "little"), database, stored))

        return framed


UPSERT_BESIDE_FROM: Final = 500
"""From this many rows on, :meth:`KeywordIndex.upsert` writes them from a thread (``change_beside``)."""
BULK_KEYWORDS_MIN: Final = 2000
"""From this many memories on, :meth:`KeywordsProjector.load` fills the index from a second thread."""


class KeywordsProjector:
    """The keyword index over a :class:`SlotTable`: a memory's row is its slot.

    The runner hands it the memories whose text changed (title, summary, content, tags). A large
    :meth:`load` fills the index from a thread (see :class:`BulkLoad`) while the caller goes on;
    :meth:`settle` waits for it, and every other method settles first, but for
    :meth:`search_slots`, which the runner asks (from any thread) only once it settled."""

    name = "keywords"
    version = 1

    def __init__(
        self,
        table: SlotTable,
        *,
        bulk_from: int | None = None,
        postings_from: int = DEFAULT_POSTINGS_FROM,
        backlog: Callable[[], bool] = lambda: False,
    ) -> None:
        self.table = table
        self._backlog = backlog
        """Whether the vectors of a backlog are still being made (a fresh clone, a merge): the in-memory
        postings wait for them (see :meth:`backlog_done`)."""
        self.bulk_from = bulk_from
        """From this many rows on a load is filled by a thread; ``None``: :data:`BULK_KEYWORDS_MIN`."""
        self.postings_from = postings_from
        """From this many rows on, searches are ranked from in-memory postings (:mod:`~.postings`)."""
        self.index = KeywordIndex()
        self._bulk: BulkLoad | None = None
        self._change: Callable[[], None] | None = None
        """The end of a large change a thread is writing (see :meth:`apply`)."""
        self._postings_kept = False
        """The last snapshot taken or restored holds the in-memory postings."""

    def _rank_if_due(self) -> None:
        if (
            self._bulk is None
            and self._change is None
            and self.index.ranking is None
            and len(self.index) >= self.postings_from
            and not self._backlog()
        ):
            self.index.rank_in_memory()

    def backlog_done(self) -> None:
        """The vectors of a backlog are made: the in-memory postings are made now if due. (Both are
        made by threads that share the interpreter: made together, each took twice as long, and
        recall answers by keywords alone, from FTS5 or from the postings, until the vectors are in.)"""
        self._rank_if_due()

    def ranked_in_memory(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the in-memory postings; whether they now rank searches."""
        self.settle()
        ranking = self.index.ranking
        return ranking is not None and ranking.wait(timeout) and ranking.ready() is not None

    def _rows(self, upserts: tuple[Projected, ...]) -> list[Row]:
        of = self.table.of
        return [(of[r.id], r.title, r.summary, r.content, " ".join(r.tags)) for r in (p.record for p in upserts)]

    def apply(self, batch: Batch) -> None:
        """Take ``batch`` in; a large one (a merged branch) is written by a thread while the caller
        goes on, until :meth:`settle` (see :meth:`KeywordIndex.change_beside`)."""
        self.settle()
        get = self.table.get
        removed = [slot for memory_id in batch.removals if (slot := get(memory_id)) is not None]
        if len(batch.upserts) >= UPSERT_BESIDE_FROM:
            rows = sorted(self._rows(batch.upserts), key=lambda row: row[0])
            self._change = self.index.change_beside(rows, removed)
            return
        if removed:
            self.index.remove(removed)
        if batch.upserts:
            self.index.upsert(self._rows(batch.upserts))
        self._rank_if_due()

    def load(self, batch: Batch) -> None:
        self.reset()
        rows = self._rows(batch.upserts)
        if len(rows) >= (BULK_KEYWORDS_MIN if self.bulk_from is None else self.bulk_from):
            rows.sort(key=lambda row: row[0])
            self._bulk = self.index.bulk_load(rows)
        elif rows:
            self.index.upsert(rows)
        self._rank_if_due()

    @property
    def loading(self) -> bool:
        """A bulk load is being made by its thread (see :meth:`settle`)."""
        return self._bulk is not None

    def settle(self) -> None:
        """Wait for a bulk load (or a large change) to be in; raises what it raised (after a bulk
        load the index is then empty)."""
        self._finish()
        self._rank_if_due()

    def _finish(self) -> None:
        change, self._change = self._change, None
        try:
            if change is not None:
                change()
        finally:
            self._finish_bulk()

    def _finish_bulk(self) -> None:
        bulk, self._bulk = self._bulk, None
        if bulk is not None:
            bulk.finish()

    def position(self) -> dict[str, SegmentPosition] | None:
        return None  # (the runner keeps the cursors of in-process projections)

    def snapshot(self) -> bytes:
        return self.snapshot_later()()

    def snapshot_later(self) -> Callable[[], bytes]:
        """:meth:`snapshot` in two steps (see :meth:`KeywordIndex.serialize_later`): the function
        returned may run in another thread, after this projector changed."""
        self.settle()
        data = self.index.serialize_later()
        self._postings_kept = self.index.ranking is not None and self.index.ranking.ready() is not None
        return data

    @property
    def postings_unkept(self) -> bool:
        """In-memory postings were made since the last snapshot (which does not hold them, so the
        next start would make them again)."""
        ranking = self.index.ranking
        return not self._postings_kept and ranking is not None and ranking.ready() is not None

    def restore(self, data: bytes | memoryview | None) -> bool:
        self.reset()
        if data is None:
            return False
        try:
            self.index = KeywordIndex(data)
        except (sqlite3.Error, ValueError):
            self.index = KeywordIndex()
            return False
        self._postings_kept = self.index.ranking is not None
        self._rank_if_due()
        return True

    def reset(self) -> None:
        try:
            self.close(timeout=0)  # (postings being made would be of the rows dropped)
        finally:
            self.index = KeywordIndex()

    def close(self, timeout: float | None = 10.0) -> None:
        try:  # (the thread making postings stops at its next chunk of rows)
            self._finish()
        finally:
            if self.index.ranking is not None:
                self.index.ranking.stop(timeout)

    # -- queries ------------------------------------------------------------------------------------

    def search_slots(
        self, text: str, limit: int, among: npt.NDArray[np.bool_] | None = None, *, beside_vectors: bool = False
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (slot, BM25 score) among the slots set in ``among``; higher is better."""
        return self.index.search(text, limit, among, beside_vectors=beside_vectors)

    def search(self, text: str, limit: int, among: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, score) among the memories ``among`` (all when ``None``)."""
        self.settle()
        mask = None
        if among is not None:
            mask = np.zeros(len(self.table), bool)
            slots = [slot for memory_id in among if (slot := self.table.get(memory_id)) is not None]
            mask[slots] = True
        ids = self.table.ids
        return [(ids[slot], score) for slot, score in self.search_slots(text, limit, mask)]

    def holds(self, word: str) -> bool:
        """Whether any memory holds ``word`` (or a form of its stem)."""
        self.settle()
        return self.index.holds(word)

    def indexed(self, memory_id: str) -> bool:
        """Whether the memory has a row."""
        self.settle()
        slot = self.table.get(memory_id)
        return slot is not None and slot in self.index

    def __len__(self) -> int:
        self.settle()
        return len(self.index)
