"""A keyword index with the texts of its rows kept beside it, as the fold keeps them for the runner.

The keyword index holds no texts (a contentless FTS5 table): a row is removed or replaced with the
texts it was made from, and the in-memory postings are made from the rows' texts. Tests of the index
alone keep the texts here and hand them in as the runner hands in the fold's."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping

from eventmem.projectors.keywords import KeywordIndex, Previous, RowsLater, Texts
from eventmem.projectors.keywords_bulk import BulkLoad

Row = tuple[int, str, str, str, str]


class TextsKept(KeywordIndex):
    def __init__(
        self,
        data: bytes | memoryview | None = None,
        *,
        texts: Mapping[int, Texts] | None = None,
        connection: sqlite3.Connection | None = None,
    ) -> None:
        super().__init__(data, connection=connection)
        self.texts: dict[int, Texts] = dict(texts or {})

    def kept(self) -> Previous:
        return {slot: [texts] for slot, texts in self.texts.items()}

    def copy(self) -> TextsKept:
        """The index serialized and loaded again, with its texts."""
        return TextsKept(self.serialize(), texts=self.texts)

    def upsert(self, rows: Iterable[Row], previous: Previous | None = None) -> None:
        rows = list(rows)
        super().upsert(rows, self.kept() if previous is None else previous)
        self.texts.update((row[0], row[1:]) for row in rows)

    def remove(self, slots: Iterable[int], previous: Previous | None = None) -> None:
        slots = list(slots)
        super().remove(slots, self.kept() if previous is None else previous)
        for slot in slots:
            self.texts.pop(slot, None)

    def bulk_load(self, rows: list[Row]) -> BulkLoad:
        bulk = super().bulk_load(rows)
        self.texts.update((row[0], row[1:]) for row in rows)
        return bulk

    def rows_later(self, slots: list[int]) -> Callable[[], list[Row]]:
        rows = [(slot, *self.texts[slot]) for slot in slots]
        return lambda: rows

    def rank_in_memory(self, rows_of: RowsLater | None = None) -> None:
        super().rank_in_memory(rows_of or self.rows_later)
