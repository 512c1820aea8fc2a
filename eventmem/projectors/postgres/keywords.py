"""Keyword ranking in PostgreSQL, computed as the in-process keyword index computes it: FTS5's ``bm25()``.

Each memory's row holds its tokens as the in-process index makes them (FTS5's ``porter unicode61
remove_diacritics 2``, :mod:`eventmem.projectors.tokens`): ``stems`` (each distinct stem once, a GIN
index over them) with ``freqs`` (its frequency weighted by column, :data:`~eventmem.projectors.postings.WEIGHTS`)
and ``tokens`` (the row's size). Each project's row keeps the number of memories and of tokens, and
``eventmem_words`` the memories holding each lower-cased word in its exact form, so that a search asks
the same words as in-process (:func:`eventmem.projectors.keywords.query_words`: the rarest ones within
a budget of postings) and scores the memories holding them with the same arithmetic
(:mod:`eventmem.projectors.postings`: ``k1`` 1.2, ``b`` 0.75, IDF clamped at 1e-6, phrases added in
query order), among one project's memories, as an in-process store holds one journal. A query word that
is more than one token (``parse_config``) is a phrase: ``stems`` also holds each pair of adjacent stems
of a column (``"parse config"``) with its weighted count, so that a phrase of two is asked as a stem
is; the memories holding every pair of a longer phrase are tokenized again here and its occurrences
counted, as FTS5 counts them.

Only the postings of the chosen words' stems are read (``eventmem_postings``: a narrow index of
(project, stem, memory) with the weighted frequency and the memory's size, schema 4; the project and
the memory named by number, :func:`memory_number`, schema 9), every holder ranked from them alone;
the holders' narrow copies are then read in that order, best first, until ``k`` pass the filters
(the budget keeps the postings few but for the rarest word, which is always asked), and the ties of
score broken by id (:func:`rows_of`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from eventmem.core.words import STOPWORDS
from eventmem.projectors.keywords import (
    MAX_QUERY_WORDS,
    MIN_POSTINGS_BUDGET,
    MIN_POSTINGS_BUDGET_BESIDE_VECTORS,
    query_words,
)
from eventmem.projectors.postings import K1, WEIGHTS, B
from eventmem.projectors.tokens import FTS5_TOKEN_LIMIT, Tokens

__all__ = [
    "KeywordRow",
    "Statistics",
    "holds",
    "holds_a_word",
    "keyword_rows",
    "memory_number",
    "ranked",
    "ranking",
    "ranking_at_once",
    "rows_of",
    "statistics",
    "words_of",
]

_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBER: Final = "SELECT no FROM eventmem_projects WHERE project = %s"
"""The number of a project, which its postings name it by (schema 9)."""
_COLUMNS: Final = ("title", "summary", "content", "tags")
_WEIGHT: Final = dict(zip(_COLUMNS, WEIGHTS, strict=True))


def memory_number(memory_id: str) -> int:
    """The number a memory's keyword postings name it by (schema 9): the first 8 bytes of the SHA-256
    of its id's UTF-8 bytes, as a signed 64-bit integer, as the database's ``eventmem_memory_number``
    computes it."""
    return int.from_bytes(hashlib.sha256(memory_id.encode("utf-8")).digest()[:8], "big", signed=True)


def words_of(title: str, summary: str, content: str, tags: Sequence[str]) -> set[str]:
    """The distinct lower-cased words of a memory, as the in-process document frequencies count them."""
    text = " ".join((title, summary, content, " ".join(tags)))
    if text.isascii():  # (lower-cased first, the same words: ASCII letters lower one for one)
        return set(_WORD.findall(text.lower()))
    return set(map(str.lower, _WORD.findall(text)))


@dataclass(frozen=True, slots=True)
class KeywordRow:
    tokens: int
    """The memory's size in tokens (every column)."""
    stems: list[str]
    freqs: list[float]
    """Each stem's frequency, weighted by column."""
    words: set[str]


def statistics_change(
    replaced: Sequence[tuple[tuple[str, str, str, Sequence[str]], int]], rows: Sequence[KeywordRow]
) -> tuple[Counter[str], int, int]:
    """What a batch changes in a project's keyword statistics (the memories holding each word, the
    memories, their tokens): less the memories it ``replaced`` or removed (each one's texts, as
    :func:`words_of` takes them, and its tokens), plus its new keyword ``rows``."""
    words: Counter[str] = Counter()
    for texts, _ in replaced:
        words.subtract(words_of(*texts))
    for row in rows:
        words.update(row.words)
    return words, len(rows) - len(replaced), sum(row.tokens for row in rows) - sum(t for _, t in replaced)


class _Stems:
    """FTS5's stems of texts: the in-process tokenizer's numbers, named."""

    def __init__(self) -> None:
        self.tokens = Tokens()
        self.names: list[str] = []
        self.lock = threading.Lock()

    def numbered(self, texts: Sequence[str]) -> tuple[list[list[int]], list[str]]:
        numbers = self.tokens.numbered(texts)
        with self.lock:
            top = max((max(n) for n in numbers if n), default=-1)
            if top >= len(self.names):
                self.names.extend(self.tokens.stems_from(len(self.names)))
            return numbers, self.names


_STEMS: _Stems | None = None
_STEMS_LOCK = threading.Lock()


def _stems() -> _Stems:
    global _STEMS
    with _STEMS_LOCK:
        if _STEMS is None:
            _STEMS = _Stems()
        return _STEMS


def keyword_rows(memories: Sequence[tuple[str, str, str, Sequence[str]]]) -> list[KeywordRow]:
    """The keyword columns of each (title, summary, content, tags), as
    :meth:`eventmem.projectors.postings.Postings.add` makes a row's postings."""
    if not memories:
        return []
    texts = [text for title, summary, content, tags in memories for text in (title, summary, content, " ".join(tags))]
    columns, names = _stems().numbered(texts)
    weights = [int(w) for w in WEIGHTS]
    out: list[KeywordRow] = []
    for i, memory in enumerate(memories):
        row = columns[i * 4 : i * 4 + 4]
        in_order = all(_in_order(text) for text in texts[i * 4 : i * 4 + 4])
        # each column's tokens repeated by its weight, the columns in order, counted at once: the
        # weighted counts, each stem first where it first occurs (measured: a sixth of a first sync's
        # time went to adding the columns' counts one by one)
        weighted: list[int] = []
        adjacent: list[tuple[int, int]] = []
        for weight, tokens in zip(weights, row, strict=True):
            weighted += tokens * weight
            if in_order:
                adjacent += list(pairwise(tokens)) * weight
        found = Counter(weighted)
        pairs = Counter(adjacent)
        stems = [names[n] for n in found]
        freqs = [float(f) for f in found.values()]
        stems += [f"{names[a]} {names[b]}" for a, b in pairs]
        freqs += [float(f) for f in pairs.values()]
        if not in_order:  # (FTS5 tokenized it: its tokens in order from FTS5 itself)
            stem_pairs: Counter[str] = Counter()
            for weight, ordered in zip(weights, _phrases().ordered(texts[i * 4 : i * 4 + 4]), strict=True):
                for a_stem, b_stem in pairwise(ordered):
                    stem_pairs[f"{a_stem} {b_stem}"] += weight
            stems += stem_pairs
            freqs += [float(f) for f in stem_pairs.values()]
        out.append(KeywordRow(sum(map(len, row)), stems, freqs, words_of(*memory)))
    return out


def _in_order(text: str) -> bool:
    """Whether :class:`~eventmem.projectors.tokens.Tokens` gives ``text``'s tokens in order (it splits
    ASCII texts itself; FTS5 gives the others' in no particular order)."""
    return text.isascii() and len(text) < FTS5_TOKEN_LIMIT


class _Phrases:
    """A query word's tokens in order, and a phrase's occurrences in texts, from FTS5's own tokenizer."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.lock = threading.Lock()
        self.db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(title, summary, content, tags, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        self.db.execute("CREATE VIRTUAL TABLE t_instances USING fts5vocab(t, instance)")

    def _instances(self, rows: Sequence[Sequence[str]]) -> list[tuple[int, str, int, str]]:
        """(row, column, offset, stem) of every token of ``rows``."""
        self.db.execute("BEGIN")
        try:
            self.db.executemany(
                "INSERT INTO t(rowid, title, summary, content, tags) VALUES (?, ?, ?, ?, ?)",
                [(n, *row) for n, row in enumerate(rows)],
            )
            return [
                (int(d), str(c), int(o), str(t))
                for t, d, c, o in self.db.execute("SELECT term, doc, col, offset FROM t_instances")
            ]
        finally:
            self.db.execute("ROLLBACK")

    def ordered(self, columns: Sequence[str]) -> list[list[str]]:
        """Each of a row's columns' stems, in order."""
        with self.lock:
            found = self._instances([columns])
        out: list[list[tuple[int, str]]] = [[] for _ in _COLUMNS]
        for _, column, offset, stem in found:
            out[_COLUMNS.index(column)].append((offset, stem))
        return [[stem for _, stem in sorted(column)] for column in out]

    def tokens(self, word: str) -> list[str]:
        with self.lock:
            found = self._instances([(word, "", "", "")])
        return [stem for _, _, _, stem in sorted(found, key=lambda x: x[2])]

    def counts(self, rows: Sequence[Sequence[str]], phrase: Sequence[str]) -> list[float]:
        """Each row's occurrences of ``phrase`` (in order, adjacent, in one column), weighted by column."""
        wanted = set(phrase)
        with self.lock:
            found = self._instances(rows)
        at: dict[tuple[int, str], dict[int, str]] = {}
        for row, column, offset, stem in found:
            if stem in wanted:
                at.setdefault((row, column), {})[offset] = stem
        out = [0.0] * len(rows)
        for (row, column), stems in at.items():
            times = sum(1 for start in stems if all(stems.get(start + i) == part for i, part in enumerate(phrase)))
            out[row] += _WEIGHT[column] * times
        return out


_PHRASES: _Phrases | None = None


def _phrases() -> _Phrases:
    global _PHRASES
    with _STEMS_LOCK:
        if _PHRASES is None:
            _PHRASES = _Phrases()
        return _PHRASES


@dataclass(frozen=True, slots=True)
class Statistics:
    """What a project's keyword search needs to know first: its memories and tokens, and the memories
    holding each word of the query."""

    memories: int
    tokens: int
    frequency: dict[str, int]
    searched: int = 0
    """The memories passing a filter (counted up to a bound), when asked."""


def statistics(
    conn: Any, project: str, text: str = "", *, counted: tuple[str, Sequence[object], int] | None = None
) -> Statistics:
    """A project's :class:`Statistics` for ``text``, in one query; ``counted``: also count the memories
    passing a filter (SQL on alias ``m``, its parameters, the count's bound)."""
    return statistics_of(conn, [(project, counted)], text)[project]


def statistics_of(
    conn: Any, projects: Sequence[tuple[str, tuple[str, Sequence[object], int] | None]], text: str
) -> dict[str, Statistics]:
    """:func:`statistics` of several projects (each with its filter to count), in one query."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    parts: list[str] = []
    values: list[object] = []
    for project, counted in projects:
        count, count_params = "0::bigint", []
        if counted is not None:
            count = f"(SELECT count(*) FROM (SELECT 1 FROM eventmem_memories m WHERE {counted[0]} LIMIT %s) c)"
            count_params = [*counted[1], counted[2]]
        parts.append(
            # (both lists in the words' order: two aggregates without an order may read the rows in
            # two orders, and did once the table was updated, pairing words with others' counts)
            "SELECT p.project, p.memories, p.tokens, (SELECT array_agg(w.word ORDER BY w.word) FROM eventmem_words w "
            "WHERE w.project = p.project AND w.word = ANY(%s)), (SELECT array_agg(w.memories ORDER BY w.word) "
            "FROM eventmem_words w WHERE w.project = p.project AND w.word = ANY(%s)), "
            f"{count} FROM eventmem_projects p WHERE p.project = %s"
        )
        values += [words, words, *count_params, project]
    out = {project: Statistics(0, 0, {}) for project, _ in projects}
    if parts:
        for project, memories, tokens, found, counts, searched in conn.execute(" UNION ALL ".join(parts), values):
            frequency = dict(zip(found or [], counts or [], strict=True))
            out[str(project)] = Statistics(int(memories), int(tokens), frequency, int(searched))
    return out


def _phrase_holders(
    conn: Any, project: str, phrase: Sequence[str], where: str, params: Sequence[object]
) -> tuple[list[str], list[float], list[int], list[bool]]:
    """(ids, weighted occurrences, sizes, passing ``where``) of the memories holding ``phrase``."""
    pairs = _pairs(phrase)
    rows = conn.execute(
        "SELECT m.id, m.title, m.summary, m.content, m.tags, m.tokens, " + where + " FROM eventmem_memories m "
        "WHERE m.project = %s AND m.id IN (SELECT s.id FROM eventmem_searched s WHERE s.project = %s "
        "AND eventmem_memory_number(s.id) IN (SELECT e.memory FROM eventmem_postings e "
        f'WHERE e.project = ({_NUMBER}) AND e.stem = ANY(%s::text[] COLLATE "C") '
        "GROUP BY e.memory HAVING count(*) = %s)) ORDER BY m.id",
        [*params, project, project, project, pairs, len(pairs)],
    ).fetchall()
    counts = _phrases().counts([(r[1], r[2], r[3], " ".join(r[4])) for r in rows], phrase)
    kept = [(str(r[0]), c, int(r[5]), bool(r[6])) for r, c in zip(rows, counts, strict=True) if c > 0]
    return [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept], [k[3] for k in kept]


def _pairs(phrase: Sequence[str]) -> list[str]:
    """The pairs of adjacent stems a row holding ``phrase`` holds (as :func:`keyword_rows` keeps them)."""
    return sorted({f"{a} {b}" for a, b in pairwise(phrase)})


def holds(conn: Any, project: str, word: str) -> bool:
    """Whether a memory of ``project`` holds ``word`` (a form of its stem; a phrase, in order)."""
    tokens = _phrases().tokens(word)
    if not tokens:
        return False
    if len(tokens) <= 2:
        row = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM eventmem_postings e WHERE e.project = ({_NUMBER}) "
            'AND e.stem = %s::text COLLATE "C")',
            [project, " ".join(tokens)],
        ).fetchone()
        return bool(row is not None and row[0])
    return bool(_phrase_holders(conn, project, tokens, "true", [])[0])


def holds_a_word(conn: Any, project: str, text: str) -> bool:
    """Whether a memory of ``project`` holds one of the query's words (stop words aside)."""
    words = {w.lower() for w in _WORD.findall(text)} - STOPWORDS
    return any(holds(conn, project, w) for w in sorted(words))


def ranked(
    conn: Any,
    project: str,
    text: str,
    k: int,
    where: str,
    params: Sequence[object],
    *,
    beside_vectors: bool = False,
    known: Statistics | None = None,
    vector: str | None = None,
) -> list[tuple[str, float, float, float, float, float | None]]:
    """The ``k`` best memories of ``project`` among those passing ``where`` (SQL on alias ``m``, with
    ``params``) by BM25, best first, ties by id (in-process: by slot, the order memories were first
    saved in, as their ids are): (id, score, importance, updated_at, created_at, cosine with
    ``vector``, a pgvector literal, if given). ``known``: the project's :func:`statistics` for
    ``text``, if read already."""
    query = ranking(conn, project, text, k, where, params, beside_vectors=beside_vectors, known=known, vector=vector)
    return [] if query is None else rows_of(conn.execute(*query).fetchall(), k)


def rows_of(found: Sequence[Sequence[Any]], k: int) -> list[tuple[str, float, float, float, float, float | None]]:
    """:func:`ranked`'s answer from the rows of :func:`ranking`'s query: the ``k`` best, ties of score
    by id (the query returns the hits tied with its ``k``-th too, in no order among themselves: its
    postings name memories by number)."""
    rows = [
        (str(i), float(score), float(a), float(u), float(c), None if v is None else float(v))
        for i, score, a, u, c, v in found
    ]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows[:k]


def ranking(
    conn: Any,
    project: str,
    text: str,
    k: int,
    where: str,
    params: Sequence[object],
    *,
    beside_vectors: bool = False,
    known: Statistics | None = None,
    vector: str | None = None,
) -> tuple[str, list[object]] | None:
    """The query (SQL, parameters) that :func:`ranked` runs, ``None`` if nothing can match (the
    memories holding a phrase are read here)."""
    if k <= 0:
        return None
    stats = known if known is not None else statistics(conn, project, text)
    rows, total_tokens = stats.memories, stats.tokens
    if not rows:
        return None
    frequency = stats.frequency
    chosen = query_words(text, lambda w: frequency.get(w, 0), rows, beside_vectors=beside_vectors)
    if not chosen:
        return None
    avgdl = total_tokens / rows
    single: list[tuple[int, str]] = []  # (place in the query, stem)
    phrase_ids: list[int] = []  # (their numbers, as their postings name them)
    phrase_places: list[int] = []
    phrase_parts: list[float] = []
    for place, word in enumerate(chosen):
        tokens = list(word_tokens(word))
        if len(tokens) <= 2:  # a stem, or a phrase of two: its pair is held as a stem is
            if tokens:
                single.append((place, " ".join(tokens)))
        else:
            ids, freqs, sizes, passing = _phrase_holders(conn, project, tokens, f"({where})", params)
            idf = _idf(rows, len(ids))
            for memory, freq, size, ok in zip(ids, freqs, sizes, passing, strict=True):
                if ok:
                    phrase_ids.append(memory_number(memory))
                    phrase_places.append(place)
                    phrase_parts.append(idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * size / avgdl))))
    if not single and not phrase_ids:
        return None
    stems = [stem for _, stem in single]
    alone = "true" if len(single) == 1 and not phrase_ids else "false"
    sql = f"""
WITH q(stem, place) AS (SELECT * FROM unnest(%s::text[], %s::int[])),
p AS (
    SELECT e.memory, q.place, e.freq AS f, e.tokens
    FROM q JOIN eventmem_postings e ON e.project = ({_NUMBER}) AND e.stem = q.stem COLLATE "C"
    WHERE NOT {alone}
),
d AS (
    SELECT place, ln((%s - count(*) + 0.5) / (count(*) + 0.5)) AS idf FROM p GROUP BY place
),
parts AS (
    SELECT p.memory, p.place,
        (CASE WHEN d.idf <= 0 THEN 1e-6 ELSE d.idf END)
        * ((p.f * %s) / (p.f + %s * (%s + %s * p.tokens / %s))) AS part
    FROM p JOIN d USING (place)
    UNION ALL
    SELECT * FROM unnest(%s::int8[], %s::int[], %s::float8[])
),
{_one_word(alone, f"({_NUMBER})", "%s", "%s")}
{_best_passing(where, vector)}"""
    # (the holders are ranked from their postings alone, and asked best first, one at a time through
    # the index of the filtered columns (schema 5, an index-only scan), until ``k`` pass the filters:
    # the sorted CTE keeps its order through the nested loop, so the limit stops it; a holder a filter
    # turns away costs one index probe; the cosine reads the rows kept, after the limit)
    bm25 = [K1 + 1.0, K1, 1 - B, B, avgdl]
    values: list[object] = [
        stems,
        [place for place, _ in single],
        project,
        float(rows),
        *bm25,
        phrase_ids,
        phrase_places,
        phrase_parts,
        project,  # (then _one_word's)
        float(rows),
        *bm25,
        *([] if vector is None else [vector]),
        project,
        *params,
        k,
    ]
    return sql, values


def _one_word(alone: str, number: str, rows: str, avgdl: str) -> str:
    """The CTEs ``one``, ``d1`` and ``scored`` of both keyword rankings, after ``parts``: each holder's
    score (by memory number). A question asking one word (``alone``: SQL true then; the stem is CTE
    ``q``'s one row) gives each holder one posting of it, so they are scored as they are read (CTE
    ``one``: no sort by memory, no grouping) with the IDF of their count (``d1``); else the holders'
    ``parts`` are summed by memory, in query order. The same numbers either way: the sum of one part
    is that part. ``number``, ``rows`` and ``avgdl``: SQL for the project's number, its memories and
    their mean size in tokens; the parameters after them: BM25's ``k1 + 1``, ``k1``, ``1 - b``, ``b``.
    (The stem is asked as ``q``'s first row: were the planner ever to evaluate it for several words,
    a subquery of two rows would fail the statement, where this one is never read.)"""
    return f"""one AS (
    SELECT e.memory, e.freq AS f, e.tokens
    FROM eventmem_postings e
    WHERE {alone} AND e.project = {number} AND e.stem = (SELECT stem FROM q ORDER BY place LIMIT 1) COLLATE "C"
),
d1 AS (SELECT ln(({rows} - count(*) + 0.5) / (count(*) + 0.5)) AS idf FROM one),
scored AS (
    SELECT memory, sum(part ORDER BY place) AS score FROM parts GROUP BY memory
    UNION ALL
    SELECT one.memory, (SELECT CASE WHEN idf <= 0 THEN 1e-6 ELSE idf END FROM d1)
        * ((one.f * %s) / (one.f + %s * (%s + %s * one.tokens / {avgdl}))) FROM one
),"""


@functools.lru_cache(maxsize=4096)
def _best_passing(where: str, vector: str | None) -> str:
    """The end of both keyword rankings: the holders' scores (CTE ``scored``, by memory number), best
    first, and the first of them that pass ``where`` (on alias ``m``, a memory's narrow copy,
    found by its number), with their columns and, given a query ``vector``, their cosine: the first
    ``k`` and every hit tied with the last of them (:func:`rows_of` breaks the ties by id). Its
    parameters: the vector (for the cosine), the project, ``where``'s, and ``k``."""
    cosine = "NULL::float8" if vector is None else "-(m.embedding <#> %s::halfvec)"
    return f"""
s AS MATERIALIZED (SELECT memory, score FROM scored ORDER BY score DESC)
SELECT m.id, s.score, m.importance, m.updated_at, m.created_at, {cosine}
FROM s CROSS JOIN LATERAL (
    SELECT m.id, m.importance, m.updated_at, m.created_at, m.embedding FROM eventmem_searched m
    WHERE m.project = %s AND eventmem_memory_number(m.id) = s.memory AND ({where})
) m
ORDER BY s.score DESC FETCH FIRST %s ROWS WITH TIES
"""


@functools.lru_cache(maxsize=4096)
def word_tokens(word: str) -> tuple[str, ...]:
    """A query word's tokens in order, by FTS5's own tokenizer (a pure function of the word, kept: it
    takes an insert into FTS5 and a read of its vocabulary, 25-40 us a word, about 7 words a recall)."""
    return tuple(_phrases().tokens(word))


def ranking_at_once(
    project: str,
    text: str,
    k: int,
    where: str,
    params: Sequence[object],
    *,
    beside_vectors: bool = False,
    vector: str | None = None,
) -> tuple[str, list[object]] | None:
    """:func:`ranking`'s query without the project's :class:`Statistics` read first: the words are
    chosen in SQL as :func:`eventmem.projectors.keywords.query_words` chooses them (rarest first, ties
    by the word's code points, within the postings budget of the project's size), so that the keyword
    list needs no round trip of its own before it. ``None`` when a word of the query is a phrase of
    three or more tokens (its holders are read and tokenized first: ask :func:`ranking`)."""
    if k <= 0:
        return None
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS] or words
    stems: list[str | None] = []
    for word in content:
        tokens = word_tokens(word)
        if len(tokens) > 2:
            return None
        stems.append(" ".join(tokens) if tokens else None)
    if beside_vectors:
        least, per = MIN_POSTINGS_BUDGET_BESIDE_VECTORS, 400
    else:
        least, per = MIN_POSTINGS_BUDGET, 50
    sql = f"""
WITH pr AS (
    SELECT p.no, p.memories::float8 AS n, p.tokens::float8 / p.memories::float8 AS avgdl,
        greatest(%s, p.memories / %s) AS budget
    FROM eventmem_projects p WHERE p.project = %s AND p.memories > 0
),
o AS (
    SELECT c.stem, coalesce(w.memories, 0) AS f,
        row_number() OVER (ORDER BY coalesce(w.memories, 0), c.word COLLATE "C") - 1 AS place
    FROM unnest(%s::text[], %s::text[]) AS c(word, stem)
    LEFT JOIN eventmem_words w ON w.project = %s AND w.word = c.word
),
u AS (SELECT stem, place, sum(f) OVER (ORDER BY place) AS used FROM o WHERE place < %s),
q(stem, place) AS (
    SELECT u.stem, u.place::int FROM u, pr WHERE (u.place = 0 OR u.used <= pr.budget) AND u.stem IS NOT NULL
),
alone AS (SELECT count(*) = 1 AS yes FROM q),
p AS (
    SELECT e.memory, q.place, e.freq AS f, e.tokens
    FROM q JOIN eventmem_postings e ON e.project = (SELECT no FROM pr) AND e.stem = q.stem COLLATE "C"
    WHERE NOT (SELECT yes FROM alone)
),
d AS (
    SELECT place, ln(((SELECT n FROM pr) - count(*) + 0.5) / (count(*) + 0.5)) AS idf FROM p GROUP BY place
),
parts AS (
    SELECT p.memory, p.place,
        (CASE WHEN d.idf <= 0 THEN 1e-6 ELSE d.idf END)
        * ((p.f * %s) / (p.f + %s * (%s + %s * p.tokens / (SELECT avgdl FROM pr)))) AS part
    FROM p JOIN d USING (place)
),
{_one_word("(SELECT yes FROM alone)", "(SELECT no FROM pr)", "(SELECT n FROM pr)", "(SELECT avgdl FROM pr)")}
{_best_passing(where, vector)}"""
    # (the words chosen as in-process: ordered by the memories holding each, then by the word; the
    # first always, then while the postings they hold fit the budget; the rest is :func:`ranking`'s)
    values: list[object] = [
        least,
        per,
        project,
        content,
        stems,
        project,
        MAX_QUERY_WORDS,
        K1 + 1.0,
        K1,
        1 - B,
        B,
        K1 + 1.0,
        K1,
        1 - B,
        B,
        *([] if vector is None else [vector]),
        project,
        *params,
        k,
    ]
    return sql, values


def _idf(rows: int, hits: int) -> float:
    import math

    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return 1e-6 if idf <= 0.0 else idf
