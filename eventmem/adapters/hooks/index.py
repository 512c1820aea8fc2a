"""The hooks' own index, ``.eventmem/cache/hooks/index.sqlite``: the project's returnable memories as
rows and an FTS5 table over their words, stamped with the journal's fingerprint. Standard library only,
so a hook answers in one process start plus a few queries; derived and disposable like the rest of the
cache (:func:`build` writes it from the service's rows, replacing the file atomically).

:func:`bundle` is the session-start bundle (an index of the project's memory, most useful first, within
a token budget); :func:`relevant` is what a prompt gets (memories matching enough of the prompt's
specific words, above a floor, or nothing).
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing is not imported at run time: the hook's fast path starts a process per event)
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any, Final

__all__ = ["Row", "build", "bundle", "fingerprint_of", "open_index", "relevant"]

VERSION: Final = "2"
BUNDLE_SPARE: Final = 200
"""Candidates kept per section beyond what it shows (for the ones a session was already shown)."""
CHARS_PER_TOKEN: Final = 4
"""A token budget is counted as characters / 4 (English prose and code average about that)."""


class Row:
    """One memory of the index, as the bundle and the prompt answers show it."""

    __slots__ = ("created_by", "id", "importance", "kind", "rowid", "summary", "tags", "title", "updated_at")

    def __init__(
        self,
        rowid: int,
        id: str,
        kind: str,
        title: str,
        summary: str,
        tags: str,
        importance: float,
        updated_at: float,
        created_by: str,
    ) -> None:
        self.rowid = rowid
        self.id = id
        self.kind = kind
        self.title = title
        self.summary = summary
        self.tags = tags
        self.importance = importance
        self.updated_at = updated_at
        self.created_by = created_by


_SCHEMA: Final = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories(
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, kind TEXT NOT NULL, title TEXT NOT NULL,
    summary TEXT NOT NULL, tags TEXT NOT NULL, importance REAL NOT NULL, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, created_by TEXT NOT NULL, expires_at REAL);
CREATE INDEX memories_by_kind ON memories(kind, updated_at DESC);
CREATE TABLE bundle(section INTEGER NOT NULL, rank INTEGER NOT NULL, row INTEGER NOT NULL,
    PRIMARY KEY (section, rank)) WITHOUT ROWID;
CREATE VIRTUAL TABLE terms USING fts5(title, summary, content, tags, tokenize='porter unicode61');
"""


def build(path: Path, rows: Iterable[Mapping[str, Any]], fingerprint: str) -> int:
    """Write the index of ``rows`` (see ``MemoryService.memory_rows``) to ``path``, atomically; returns
    how many rows it holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    count = 0
    connection = sqlite3.connect(temp)
    try:
        connection.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        for rowid, row in enumerate(rows, start=1):
            tags = " ".join(str(tag) for tag in row.get("tags", ()))
            connection.execute(
                "INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rowid,
                    row["id"],
                    row["kind"],
                    row.get("title", ""),
                    row.get("summary", ""),
                    tags,
                    float(row.get("importance", 0.5)),
                    float(row.get("created_at", 0.0)),
                    float(row.get("updated_at", 0.0)),
                    row.get("created_by", ""),
                    row.get("expires_at"),
                ),
            )
            connection.execute(
                "INSERT INTO terms(rowid, title, summary, content, tags) VALUES (?,?,?,?,?)",
                (rowid, row.get("title", ""), row.get("summary", ""), row.get("content", ""), tags),
            )
            count = rowid
        for number, (_, where, order, most) in enumerate(SECTIONS):  # the bundle's candidates, ranked now
            connection.execute(
                f"INSERT INTO bundle SELECT ?, row_number() OVER (ORDER BY {order}), rowid FROM memories "
                f"WHERE {where} ORDER BY {order} LIMIT ?",
                (number, most + BUNDLE_SPARE),
            )
        connection.executemany(
            "INSERT INTO meta VALUES (?,?)",
            [
                ("version", VERSION),
                ("fingerprint", fingerprint),
                ("built_at", repr(time.time())),
                ("count", str(count)),
            ],
        )
        connection.commit()
    finally:
        connection.close()
    os.replace(temp, path)
    return count


def open_index(path: Path) -> sqlite3.Connection | None:
    """The index, read-only; ``None`` when there is none (or not one of this version)."""
    if not path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        version = connection.execute("SELECT value FROM meta WHERE key='version'").fetchone()
    except sqlite3.Error:
        return None
    if not version or version[0] != VERSION:
        connection.close()
        return None
    return connection


def fingerprint_of(connection: sqlite3.Connection) -> str:
    found = connection.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
    return str(found[0]) if found else ""


_COLUMNS: Final = "rowid, id, kind, title, summary, tags, importance, updated_at, created_by"
_LIVE: Final = "(expires_at IS NULL OR expires_at > ?)"


def _line(row: Row, limit: int = 220) -> str:
    text = " ".join((row.summary or row.title).split())
    if row.title and row.summary and not row.summary.lower().startswith(row.title.lower()[:20]):
        text = f"{' '.join(row.title.split())}: {text}"
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    mark = " (hook)" if row.created_by.startswith("hook:") else ""
    return f"- {text} [{row.id}]{mark}"


_SUMMARY: Final = "tags LIKE '%conversation-summary%'"
_CURRENT: Final = "tags LIKE '%current-task%'"
SECTIONS: Final[tuple[tuple[str, str, str, int], ...]] = (
    ("Current task", f"(kind = 'current_task' OR (kind = 'task' AND {_CURRENT}))", "updated_at DESC", 1),
    ("Project", "kind IN ('project', 'architecture')", "updated_at DESC", 2),
    ("Decisions", "kind = 'decision'", "importance DESC, updated_at DESC", 8),
    (
        "Conventions",
        "kind IN ('convention', 'coding_style', 'code_pattern', 'workflow')",
        "importance DESC, updated_at DESC",
        6,
    ),
    ("Recent fixes", "kind IN ('fix', 'solution', 'error', 'problem')", "updated_at DESC", 5),
    ("Open todos", f"(kind = 'todo' OR (kind = 'task' AND NOT {_CURRENT}))", "updated_at DESC", 6),
    ("Last conversation", f"kind = 'general' AND {_SUMMARY}", "updated_at DESC", 1),
    ("Also important", f"kind = 'general' AND importance >= 0.6 AND NOT {_SUMMARY}", "importance DESC", 4),
)
"""The bundle's sections in order of use at the start of a session: (heading, which rows, order, at most)."""


def bundle(
    connection: sqlite3.Connection,
    *,
    project: str,
    budget_tokens: int,
    exclude: Iterable[str] = (),
    preface: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """The session-start bundle and the ids it names: one line per memory (its summary and id), by
    section, the most useful first, cut at ``budget_tokens``; empty when the memory holds nothing."""
    budget = budget_tokens * CHARS_PER_TOKEN
    skip = set(exclude)
    found = connection.execute("SELECT value FROM meta WHERE key='count'").fetchone()
    total = int(found[0]) if found else 0
    header = (
        f"eventmem: the project memory of {project} ({total} memories). An index, not the whole text: "
        "fetch a memory with the get_memory tool (or `eventmem show ID`) by the id in brackets; "
        "recall or search for more."
    )
    columns = ", ".join(f"m.{name}" for name in _COLUMNS.split(", "))
    by_section: dict[int, list[Row]] = {}
    for section, *values in connection.execute(
        f"SELECT b.section, {columns} FROM bundle b JOIN memories m ON m.rowid = b.row "
        "WHERE b.rank <= ? AND (m.expires_at IS NULL OR m.expires_at > ?) ORDER BY b.section, b.rank",
        (max(most for _, _, _, most in SECTIONS) + len(skip), time.time()),
    ):
        by_section.setdefault(section, []).append(Row(*values))
    lines: list[str] = [*preface]
    ids: list[str] = []
    used = len(header) + sum(len(line) + 1 for line in lines)
    for number, (heading, _, _, most) in enumerate(SECTIONS):
        rows = [row for row in by_section.get(number, []) if row.id not in skip][:most]
        section = [f"## {heading}"]
        for row in rows:
            line = _line(row)
            if used + len(line) + len(section[0]) + 2 > budget:
                break
            section.append(line)
            ids.append(row.id)
            used += len(line) + 1
        if len(section) > 1:
            lines += section
            used += len(section[0]) + 1
    if not ids and not preface:
        return "", []
    return "\n".join([header, *lines]), ids


_WORD: Final = re.compile(r"[^\W_][\w-]*[^\W_]|[^\W_]", re.UNICODE)
STOPWORDS: Final = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else even ever few
    for from further get gets got had has have having he her here hers him his how i if in into is it its
    itself just let lets like make may me might more most much must my need needs no nor not now of off on
    once only or other our ours out over own please same shall she should so some such than that the their
    them then there these they this those through to too under until up use used using very via want was
    we were what when where which while who whom why will with would yes yet you your yours thing things
    okay ok hi hello thanks thank sure one two new way really look see know think tell help""".split()
)


def prompt_words(prompt: str, limit: int = 16) -> list[str]:
    """The prompt's content words (no stop words, at least 3 characters, digits-only left out)."""
    words: list[str] = []
    for match in _WORD.finditer(prompt.lower()[:20_000]):
        word = match.group(0)
        if len(word) < 3 or word in STOPWORDS or word.isdigit() or word in words:
            continue
        words.append(word)
        if len(words) >= limit:
            break
    return words


def _match(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def relevant(
    connection: sqlite3.Connection,
    prompt: str,
    *,
    floor: float,
    limit: int,
    budget_tokens: int,
    exclude: Iterable[str] = (),
) -> tuple[str, list[str]]:
    """The memories relevant to ``prompt`` and their ids; nothing for a prompt whose specific words the
    memory does not hold.

    A memory's relevance is the share of the prompt's known words it matches, each word weighted by its
    rarity (BM25's idf over this project's memories); words the memory never uses are left out of the
    share (they cannot tell memories apart). It must reach ``floor`` and match at least one specific
    word (in at most a fifth of the memories, or in at most three)."""
    words = prompt_words(prompt)
    if not words or limit <= 0 or budget_tokens <= 0:
        return "", []
    now = time.time()
    total = connection.execute("SELECT count(*) FROM terms").fetchone()[0]
    if not total:
        return "", []
    df: dict[str, int] = {}
    for word in words:
        try:
            df[word] = connection.execute("SELECT count(*) FROM terms WHERE terms MATCH ?", (_match(word),)).fetchone()[
                0
            ]
        except sqlite3.Error:
            df[word] = 0
    known = [word for word in words if df[word] > 0]
    if not known:
        return "", []
    idf = {word: math.log(1 + (total - df[word] + 0.5) / (df[word] + 0.5)) for word in known}
    strongest = sorted(known, key=lambda word: -idf[word])[:6]
    whole = sum(idf[word] for word in strongest)
    specific = {word for word in known if df[word] <= 3 or df[word] <= total / 5}
    query = " OR ".join(_match(word) for word in strongest if word in specific)  # (a hit needs one)
    if not query:
        return "", []
    try:
        ranked = connection.execute(
            "SELECT rowid, bm25(terms, 3.0, 2.0, 1.0, 2.0) FROM terms WHERE terms MATCH ? ORDER BY rank LIMIT 40",
            (query,),
        ).fetchall()
    except sqlite3.Error:
        return "", []
    if not ranked:
        return "", []
    candidates = [rowid for rowid, _ in ranked]
    marks = ",".join("?" for _ in candidates)
    matched: dict[int, set[str]] = {rowid: set() for rowid in candidates}
    for word in strongest:
        sql = f"SELECT rowid FROM terms WHERE terms MATCH ? AND rowid IN ({marks})"
        for (rowid,) in connection.execute(sql, (_match(word), *candidates)):
            matched[rowid].add(word)
    bm25 = dict(ranked)
    scored = []
    for rowid in candidates:
        words_in = matched[rowid]
        if not words_in & specific:
            continue
        share = sum(idf[word] for word in words_in) / whole
        if share >= floor:
            scored.append((share, -bm25[rowid], rowid))
    scored.sort(reverse=True)
    skip = set(exclude)
    lines: list[str] = []
    ids: list[str] = []
    used = 0
    budget = budget_tokens * CHARS_PER_TOKEN
    for share, _, rowid in scored:
        found = connection.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE rowid = ? AND {_LIVE}", (rowid, now)
        ).fetchone()
        if found is None:
            continue
        row = Row(*found)
        if row.id in skip:
            continue
        line = _line(row) + f" (relevance {share:.2f})"
        if used + len(line) > budget:
            break
        lines.append(line)
        ids.append(row.id)
        used += len(line) + 1
        if len(ids) >= limit:
            break
    if not ids:
        return "", []
    heading = "eventmem: memories of this project that may bear on this prompt (fetch one in full by its id):"
    return "\n".join([heading, *lines]), ids
