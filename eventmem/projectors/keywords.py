"""The keyword projector: SQLite FTS5 (BM25 ranking, Porter stemming).

SQLite ships with Python, so this is a well-kept engine at no extra cost. The index is built in an
in-memory database; a snapshot is its serialized bytes, which a server restores into a file of its own
(out of its heap: :mod:`~eventmem.projectors.keywords_stored`).

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

The FTS5 table is contentless (``content=''``): the index of the texts (all BM25 and phrases read),
not the texts, which the fold holds. A row is removed with the texts it was made from (FTS5's
``'delete'``), which the caller hands in (``Batch.previous``); an 8-byte digest of each row's texts
picks them, refuses others (:class:`KeywordsOutOfStep`) and leaves a row given again unchanged alone.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.core.records import MemoryRecord
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
    digests_of,
    guarded_connection,
    texts_digest,
    words_of,
)
from eventmem.projectors.keywords_stored import framed, restored_database, unframed
from eventmem.projectors.postings import DEFAULT_POSTINGS_FROM, WEIGHTS, BackgroundPostings, PhraseScoresKept
from eventmem.projectors.slot_set import SlotSet

__all__ = [
    "BULK_KEYWORDS_MIN",
    "UPSERT_BESIDE_FROM",
    "KeywordIndex",
    "KeywordsOutOfStep",
    "KeywordsProjector",
    "Previous",
    "RowsLater",
    "fts_query",
    "keyword_texts",
    "query_words",
]

_SCHEMA: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
    "title, summary, content, tags, content='', tokenize='porter unicode61 remove_diacritics 2')"
)
_WORD = re.compile(r"\w+", re.UNICODE)
# BM25 column weights: a hit in the title or the tags says more than one in a long body.
_RANK: Final = f"bm25(docs, {', '.join(map(str, WEIGHTS))})"  # (the postings score with the same weights)
_DELETE: Final = "INSERT INTO docs(docs, rowid, title, summary, content, tags) VALUES ('delete', ?, ?, ?, ?, ?)"


Texts = tuple[str, str, str, str]
"""A row's texts: (title, summary, content, tags joined by spaces)."""
Previous = Mapping[int, Sequence[Texts]]
"""Per slot, texts its row may have been made from (the one whose digest is the row's is used)."""
RowsLater = Callable[[list[int]], Callable[[], list[Row]]]
"""Given slots (increasing), what a thread calls later for their rows as the fold holds them now
(see :meth:`KeywordIndex.rank_in_memory`)."""


def keyword_texts(record: MemoryRecord) -> Texts:
    """The texts of a memory's row."""
    return (record.title, record.summary, record.content, " ".join(record.tags))


class KeywordsOutOfStep(Exception):
    """No texts handed in to remove a row are the ones it was made from: the index is left as it was."""


MAX_QUERY_WORDS: Final = 16
MIN_POSTINGS_BUDGET: Final = 2000
"""Postings a keyword-only query may touch: at least this many, else 2% of the documents."""
MIN_POSTINGS_BUDGET_BESIDE_VECTORS: Final = 250
"""Postings a query may touch beside a vector search: at least this many, else 0.25% of the documents."""
MAX_BARRED_FOR_LIMIT: Final = 1000
"""A filtered search asks SQLite for its best ``k`` + (slots the filter bars) rows when at most this
many are barred (deleted, expired, superseded or filtered out), else streams rows in rank order."""


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
    def __init__(
        self,
        data: bytes | memoryview | None = None,
        *,
        folder: Path | None = None,
        connection: sqlite3.Connection | None = None,
    ) -> None:
        """``data``: a stored index to restore, in a file of ``folder`` if given (see
        :func:`~eventmem.projectors.keywords_stored.restored_database`), else in memory;
        ``connection``: an empty in-memory database to use (autocommit, any thread), else a new one."""
        stored = unframed(data) if data is not None else None
        if stored is not None:
            self._db = restored_database(stored[0], folder)
        else:
            self._db = connection or sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.using = guarded_connection(self, self._db)
        """Held by a bulk load's thread while it fills the connection, which is not closed under it."""
        self.df: Counter[str] = Counter()
        """The rows each lower-cased word occurs in. Every row counts: a sample (of slots) would
        choose other query words once a rebuild gives the memories other slots."""
        self._present = SlotSet()
        self._digests = np.zeros(0, np.uint64)  # (per slot, its row's :func:`~.keywords_bulk.texts_digest`)
        self._phrases = PhraseScoresKept()
        """Phrase scores asked of FTS5 since the last change (an identifier is often asked again)."""
        self.ranking: BackgroundPostings | None = None
        """In-memory postings that rank searches once made (see :meth:`rank_in_memory`)."""
        if stored is not None:
            postings = stored[1]
            (blob, digests) = self._db.execute("SELECT rowids, digests FROM present").fetchone()
            self._present = SlotSet(np.frombuffer(blob, dtype=np.int64))
            self._digests = np.frombuffer(digests, dtype=np.uint64).copy()
            self._db.execute("DROP TABLE present")
            if self._present and self._present.max() >= len(self._digests):
                raise ValueError("the keyword index's digests are of other rows")
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

    def _old_rows(self, slots: list[int], previous: Previous) -> list[Row]:
        """The rows of ``slots`` (present ones): of the texts ``previous`` offers for each, those
        whose digest is the one kept (:class:`KeywordsOutOfStep` if none is)."""
        rows: list[Row] = []
        for slot in slots:
            held = int(self._digests[slot])
            texts = next((t for t in previous.get(slot, ()) if texts_digest(t) == held), None)
            if texts is None:
                raise KeywordsOutOfStep(f"none of the texts handed in to remove the keyword row {slot} is its own")
            rows.append((slot, *texts))
        return rows

    def _unchanged(self, rows: list[Row]) -> tuple[list[Row], npt.NDArray[np.uint64]]:
        """``rows`` but those the index holds already with these very texts, and the digests of the rest."""
        digests = digests_of(rows)
        top = len(self._digests)
        keep = [
            i
            for i, row in enumerate(rows)
            if not (row[0] in self._present and row[0] < top and self._digests[row[0]] == digests[i])
        ]
        if len(keep) == len(rows):
            return rows, digests
        return [rows[i] for i in keep], digests[keep]

    def _keep_digests(self, rows: list[Row], digests: npt.NDArray[np.uint64]) -> None:
        if not rows:
            return
        top = max(r[0] for r in rows)
        if top >= len(self._digests):
            grown = np.zeros(max(top + 1, 2 * len(self._digests), 1024), np.uint64)
            grown[: len(self._digests)] = self._digests
            self._digests = grown
        self._digests[[r[0] for r in rows]] = digests

    def _forget(self, slots: list[int], previous: Previous) -> None:
        """Delete rows, taking their words out of the document frequencies; their texts are
        ``previous`` (see :meth:`_old_rows`). In increasing order: FTS5 flushes its pending terms
        whenever a row id is below the previous one's (random order: 10x slower)."""
        present = sorted({s for s in slots if s in self._present})
        if not present:
            return
        old = self._old_rows(present, previous)
        self.df.subtract(Counter(chain.from_iterable(words_of(" ".join(row[1:])) for row in old)))
        self._db.executemany(_DELETE, old)
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

    def upsert(self, rows: Iterable[Row], previous: Previous | None = None) -> None:
        """Rows of (slot, title, summary, content, tags), inserted in increasing slot order (see
        :meth:`_forget`). A slot present is replaced: ``previous`` holds the texts of its row (a row
        given again with the texts it has is left as it is)."""
        rows, digests = self._unchanged(sorted(rows, key=lambda row: row[0]))
        if not rows:
            return
        self._phrases.clear()
        if len(rows) >= UPSERT_BESIDE_FROM:
            self.change_beside(rows, [], previous)()
            return
        self._db.execute("BEGIN")
        try:
            self._forget([r[0] for r in rows], previous or {})
            self._db.executemany("INSERT INTO docs(rowid, title, summary, content, tags) VALUES (?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")
        finally:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        self.df.update(chain.from_iterable(words_of(" ".join(row[1:])) for row in rows))
        self._present.update(r[0] for r in rows)
        self._keep_digests(rows, digests)
        if self.ranking is not None:
            self.ranking.added(rows)

    def change_beside(
        self, rows: list[Row], removed: list[int], previous: Previous | None = None
    ) -> Callable[[], None]:
        """Remove the rows of the slots ``removed``, then :meth:`upsert` ``rows`` (many: a merged
        branch; in slot order), as :class:`BulkLoad` fills an index: the rows are copied into a
        temporary table (about 2 us a row), and a thread started now replaces the index's rows from
        it in two statements, which SQLite runs without the GIL. The function returned counts the
        words the document frequencies lose and gain (in the caller's thread: the thread writes
        meanwhile), waits for the thread and raises what it raised; the index is not to be used
        until it is called. The same rows, counts and answers as :meth:`remove` and :meth:`upsert`
        (``previous``: the texts of the rows removed or replaced)."""
        self._phrases.clear()
        db = self._db
        rows, digests = self._unchanged(rows)
        gone = sorted({s for s in removed if s in self._present} | {r[0] for r in rows if r[0] in self._present})
        old_rows = self._old_rows(gone, previous or {})
        old = [" ".join(row[1:]) for row in old_rows]
        failed: list[BaseException] = []

        def write() -> None:
            with self.using:  # (the connection is not closed under it, even at exit)
                try:
                    db.execute(
                        "INSERT INTO docs(docs, rowid, title, summary, content, tags) "
                        f"SELECT 'delete', slot, title, summary, content, tags FROM {SCRATCH}.upsert_gone ORDER BY slot"
                    )
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
            db.execute(f"CREATE TABLE {SCRATCH}.upsert_gone(slot INTEGER PRIMARY KEY, title, summary, content, tags)")
            db.executemany(f"INSERT INTO {SCRATCH}.upsert_gone VALUES (?, ?, ?, ?, ?)", old_rows)
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
            self._keep_digests(rows, digests)
            if self.ranking is not None:
                self.ranking.removed(gone)
                self.ranking.added(rows)

        return finish

    def rank_in_memory(self, rows_of: RowsLater) -> None:
        """Rank searches from in-memory postings, made by a thread from the rows there are now (FTS5
        answers until they are; every later change reaches them). Once; the bulk load settled first.
        The index holds no texts: ``rows_of`` gives the rows of its slots (the fold's texts)."""
        if self.ranking is None:
            self.ranking = BackgroundPostings.of_rows(rows_of(list(self._present)), len(self._present))

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

    def _loaded(self, df: Counter[str], present: set[int], digests: npt.NDArray[np.uint64]) -> None:
        """A bulk load is in: its rows' document frequencies, slots and digests (in slot order)."""
        self.df, self._present = df, SlotSet(present)
        self._digests = np.zeros(max(present) + 1 if present else 0, np.uint64)
        self._digests[sorted(present)] = digests
        self._phrases.clear()

    def remove(self, slots: Iterable[int], previous: Previous | None = None) -> None:
        """Remove the rows of ``slots``; ``previous`` holds their texts."""
        self._phrases.clear()
        self._db.execute("BEGIN")
        try:
            self._forget([int(s) for s in slots], previous or {})
            self._db.execute("COMMIT")
        finally:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")

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
        index, and after it the in-memory postings if they are made (see :func:`~.keywords_stored.framed`)."""
        return self.serialize_later()()

    def serialize_later(self) -> Callable[[], bytes]:
        """:meth:`serialize` in two steps: the database is copied now, the postings frozen (a copy of
        their arrays' lists), and the function returned encodes them, in any thread, as they are now."""
        self._db.execute("CREATE TABLE df(counts BLOB)")
        self._db.execute("CREATE TABLE present(rowids BLOB, digests BLOB)")  # (100k ints load 10x faster so)
        try:
            counts = msgspec.msgpack.encode({t: n for t, n in self.df.items() if n > 0})
            self._db.execute("INSERT INTO df VALUES (?)", (counts,))
            rowids = self._present.sorted_array()
            top = self._present.max() + 1 if self._present else 0
            self._db.execute("INSERT INTO present VALUES (?, ?)", (rowids.tobytes(), self._digests[:top].tobytes()))
            database = self._db.serialize()
        finally:
            self._db.execute("DROP TABLE df")
            self._db.execute("DROP TABLE present")
        made = self.ranking.ready() if self.ranking is not None else None
        frozen = made.frozen() if made is not None else None

        def stored() -> bytes:
            postings = frozen.encoded() if frozen is not None else b""  # (so that the next start reads them)
            return framed(database, postings)

        return stored


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
    version = 2

    def __init__(
        self,
        table: SlotTable,
        *,
        bulk_from: int | None = None,
        postings_from: int = DEFAULT_POSTINGS_FROM,
        backlog: Callable[[], bool] = lambda: False,
        rows_of: RowsLater | None = None,
        folder: Path | None = None,
    ) -> None:
        self.table = table
        self.folder = folder
        """Where a restored index keeps its database (a server's cache folder), else in memory."""
        self._rows_of = rows_of
        """The rows of slots as the fold holds them (the index holds no texts): the in-memory postings
        are made from them; ``None``: no postings, FTS5 ranks every search."""
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
            and self._rows_of is not None
            and len(self.index) >= self.postings_from
            and not self._backlog()
        ):
            self.index.rank_in_memory(self._rows_of)

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
        return [(of[r.id], *keyword_texts(r)) for r in (p.record for p in upserts)]

    def _previous(self, batch: Batch) -> dict[int, list[Texts]]:
        """The texts the rows of the batch's memories may have been made from, by slot."""
        get = self.table.get
        return {
            slot: [keyword_texts(record) for record in records]
            for memory_id, records in batch.previous.items()
            if (slot := get(memory_id)) is not None
        }

    def apply(self, batch: Batch) -> None:
        """Take ``batch`` in; a large one (a merged branch) is written by a thread while the caller
        goes on, until :meth:`settle` (see :meth:`KeywordIndex.change_beside`). A row removed or
        replaced is deleted with its texts from ``batch.previous`` (the index holds none)."""
        self.settle()
        get = self.table.get
        removed = [slot for memory_id in batch.removals if (slot := get(memory_id)) is not None]
        previous = self._previous(batch)
        if len(batch.upserts) >= UPSERT_BESIDE_FROM:
            rows = sorted(self._rows(batch.upserts), key=lambda row: row[0])
            self._change = self.index.change_beside(rows, removed, previous)
            return
        if removed:
            self.index.remove(removed, previous)
        if batch.upserts:
            self.index.upsert(self._rows(batch.upserts), previous)
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
            self.index = KeywordIndex(data, folder=self.folder)
        except (sqlite3.Error, ValueError):
            self.index = KeywordIndex()
            return False
        self._postings_kept = self.index.ranking is not None
        return True  # (postings not kept are made at the next settle: the fold they read is not in yet)

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
