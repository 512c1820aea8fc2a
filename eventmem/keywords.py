"""The keyword index: SQLite FTS5 (BM25 ranking, Porter stemming), held in memory.

SQLite ships with Python, so this is a well-kept engine at no extra cost. The index lives in an
in-memory database; a snapshot is its serialized bytes.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["KeywordIndex", "fts_query"]

_SCHEMA: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
    "title, summary, content, tags, tokenize='porter unicode61 remove_diacritics 2')"
)
_WORD = re.compile(r"\w+", re.UNICODE)
# BM25 column weights: a hit in the title or the tags says more than one in a long body.
_RANK: Final = "bm25(docs, 4.0, 2.0, 1.0, 3.0)"


def fts_query(text: str) -> str:
    """A safe FTS5 query: every word quoted (no operators from user text), any word may match."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return " OR ".join(f'"{w}"' for w in words[:64])


class KeywordIndex:
    def __init__(self, data: bytes | None = None) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        if data is not None:
            self._db.deserialize(data)
        self._db.execute(_SCHEMA)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM docs").fetchone()[0])

    def upsert(self, rows: Iterable[tuple[int, str, str, str, str]]) -> None:
        """Rows of (slot, title, summary, content, tags)."""
        rows = list(rows)
        if not rows:
            return
        self._db.execute("BEGIN")
        self._db.executemany("DELETE FROM docs WHERE rowid = ?", ((r[0],) for r in rows))
        self._db.executemany("INSERT INTO docs(rowid, title, summary, content, tags) VALUES (?, ?, ?, ?, ?)", rows)
        self._db.execute("COMMIT")

    def remove(self, slots: Iterable[int]) -> None:
        self._db.executemany("DELETE FROM docs WHERE rowid = ?", ((int(s),) for s in slots))

    def _matches(self, match: str) -> Iterator[tuple[int, float]]:
        cursor = self._db.execute(f"SELECT rowid, {_RANK} AS r FROM docs WHERE docs MATCH ? ORDER BY r", [match])
        while batch := cursor.fetchmany(256):
            yield from batch

    def search(self, text: str, k: int, allowed: npt.NDArray[np.bool_] | None = None) -> list[tuple[int, float]]:
        """Top ``k`` (slot, score) by BM25 among ``allowed`` slots; higher scores are better."""
        match = fts_query(text)
        if not match or k <= 0:
            return []
        if allowed is None:
            rows = self._db.execute(
                f"SELECT rowid, {_RANK} AS r FROM docs WHERE docs MATCH ? ORDER BY r LIMIT ?", [match, k]
            ).fetchall()
            return [(int(slot), -float(rank)) for slot, rank in rows]
        out: list[tuple[int, float]] = []
        limit = len(allowed)
        for slot, rank in self._matches(match):  # filter before the cut, streaming in rank order
            if slot < limit and allowed[slot]:
                out.append((int(slot), -float(rank)))
                if len(out) >= k:
                    break
        return out

    def serialize(self) -> bytes:
        return bytes(self._db.serialize())
