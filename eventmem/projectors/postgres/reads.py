"""What a server reads from the database besides ranked search: the projects it holds, folded records,
links, listings by importance or recency, and counts for ``stats``. Keys are (project, memory id);
the filters are :func:`eventmem.projectors.postgres.queries.matching`'s."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from eventmem.core.query_rules import Filters
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.projectors.postgres.projector import decode_record
from eventmem.projectors.postgres.queries import Key, reading, visible_where

__all__ = [
    "link_records",
    "listed",
    "projects",
    "records",
    "records_of",
    "records_query",
    "stats",
    "visible_keys",
    "where_is",
]

_LINK = msgspec.msgpack.Decoder(LinkRecord)


def projects(conn: Any) -> list[str]:
    """Every project the database holds rows of, by name."""
    with reading(conn):
        rows = conn.execute("SELECT project FROM eventmem_projects ORDER BY project").fetchall()
    return [str(r[0]) for r in rows]


def records(conn: Any, keys: Sequence[Key]) -> dict[Key, MemoryRecord]:
    """The folded record of each of these memories (as the projector wrote it)."""
    if not keys:
        return {}
    with reading(conn):
        rows = conn.execute(*records_query(keys)).fetchall()
    return records_of(rows)


def records_query(keys: Sequence[Key]) -> tuple[str, list[object]]:
    """What :func:`records` runs (to send in a pipeline; its rows are read by :func:`records_of`)."""
    sql = (
        "SELECT m.project, m.id, m.record FROM eventmem_memories m "
        "JOIN unnest(%s::text[], %s::text[]) AS k(project, id) ON m.project = k.project AND m.id = k.id"
    )
    return sql, [[p for p, _ in keys], [i for _, i in keys]]


def records_of(rows: Sequence[Sequence[Any]]) -> dict[Key, MemoryRecord]:
    return {(str(p), str(i)): decode_record(bytes(r)) for p, i, r in rows}


def where_is(conn: Any, among: Sequence[str], memory_id: str) -> str | None:
    """The project of ``among`` holding a memory of this id (the first by name), if any."""
    with reading(conn):
        row = conn.execute(
            "SELECT project FROM eventmem_memories WHERE id = %s AND project = ANY(%s) ORDER BY project LIMIT 1",
            [memory_id, list(among)],
        ).fetchone()
    return None if row is None else str(row[0])


def link_records(conn: Any, among: Sequence[str], memory_id: str) -> list[LinkRecord]:
    """The live links of ``among`` from or to a memory, by id."""
    with reading(conn):
        rows = conn.execute(
            "SELECT record FROM eventmem_links WHERE project = ANY(%s) AND (source = %s OR target = %s) ORDER BY id",
            [list(among), memory_id, memory_id],
        ).fetchall()
    return [_LINK.decode(bytes(r[0])) for r in rows]


def visible_keys(
    conn: Any, among: Sequence[str], ids: Sequence[str], filters: Filters, now: float | None = None
) -> dict[str, Key]:
    """Of these memory ids, those visible in ``among`` and passing ``filters``: id to its key."""
    if not ids:
        return {}
    where, params = visible_where(among, filters, now)
    with reading(conn):
        rows = conn.execute(
            f"SELECT m.project, m.id FROM eventmem_memories m WHERE m.id = ANY(%s) AND {where} ORDER BY 1, 2",
            [list(ids), *params],
        ).fetchall()
    found: dict[str, Key] = {}
    for p, i in rows:
        found.setdefault(str(i), (str(p), str(i)))
    return found


def listed(
    conn: Any,
    among: Sequence[str],
    filters: Filters,
    limit: int | None,
    order: Literal["importance", "recent"],
    now: float | None = None,
    *,
    project: str | None = None,
) -> list[tuple[Key, MemoryRecord, float]]:
    """What the filters let in, most important (then most recent) or most recent first, with each
    memory's last update (seconds since the epoch); at most ``limit`` (``None``: all)."""
    where, params = visible_where(among, filters, now, project)
    by = "m.updated_at DESC" if order == "recent" else "m.importance DESC, m.updated_at DESC"
    sql = f"SELECT m.project, m.id, m.record, m.updated_at FROM eventmem_memories m WHERE {where} ORDER BY {by}, m.id"
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with reading(conn):
        rows = conn.execute(sql, params).fetchall()
    return [((str(p), str(i)), decode_record(bytes(r)), float(u)) for p, i, r, u in rows]


def stats(conn: Any, project: str, now: float | None = None) -> dict[str, Any]:
    """What the database holds: memories of ``project`` visible now by kind, its links and events,
    and the visible memories of every project."""
    now = time.time() if now is None else now
    with reading(conn):
        kinds = conn.execute(
            "SELECT kind, count(*) FROM eventmem_memories WHERE project = %s AND expires_at > %s "
            "AND NOT superseded GROUP BY kind ORDER BY kind",
            [project, now],
        ).fetchall()
        links = conn.execute("SELECT count(*) FROM eventmem_links WHERE project = %s", [project]).fetchone()
        events = conn.execute("SELECT count(*) FROM eventmem_events WHERE project = %s", [project]).fetchone()
        every = conn.execute(
            "SELECT p.project, count(m.id) FROM eventmem_projects p LEFT JOIN eventmem_memories m "
            "ON m.project = p.project AND m.expires_at > %s AND NOT m.superseded GROUP BY p.project ORDER BY 1",
            [now],
        ).fetchall()
    by_kind = {str(k): int(n) for k, n in kinds}
    return {
        "memories": sum(by_kind.values()),
        "by_kind": by_kind,
        "links": int(links[0]) if links is not None else 0,
        "events": int(events[0]) if events is not None else 0,
        "projects": {str(p): int(n) for p, n in every},
    }
