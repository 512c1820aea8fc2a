"""The memories saved just before and after others in the database: their sitting neighbours.

A hybrid answer's best candidates lend a share of their score to the memories saved right before and
after them (:func:`eventmem.core.query_rules.with_neighbours`); in-process the neighbours are read
from the slots kept in creation order (:meth:`eventmem.runner.readview.ReadView.saved_beside`), here
from the index on (project, creation time) of schema 6, in the same order: creation time, then id
compared as Python compares strings (code points: ``COLLATE "C"`` on UTF-8), so that both stores
find the same neighbours. And the first characters of a candidate's text, which a question that
names a time reads for the days a dated note names (:func:`eventmem.core.timewords.days_named`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Neighbour", "contents", "neighbours"]

Neighbour = tuple[int, int, str, float, float, float, float | None]
"""(lender's place in the ids asked, step, memory id, importance, updated_at, created_at, cosine
with the query's vector or ``None``): ``step`` is negative before the lender, positive after it, 1
the closest."""


def neighbours(
    conn: Any,
    project: str,
    ids: Sequence[str],
    steps: int,
    seconds: float,
    where: str,
    params: Sequence[object],
    *,
    vector: str | None = None,
    dim: int = 0,
) -> list[Neighbour]:
    """For each of the memories ``ids`` of ``project``, the ``steps`` memories passing ``where`` (on
    alias ``m``, with ``params``) that were created just before it and the ``steps`` just after it,
    at most ``seconds`` apart, in one query for all of them: each side read from the index in
    creation order, so a long sitting costs no more than a short one. ``vector`` (a pgvector
    literal of ``dim`` dimensions): each neighbour comes with its cosine, as the fusion needs it."""
    if not ids or steps <= 0:
        return []
    cosine = f"-(m.embedding <#> %s::halfvec({int(dim)}))" if vector is not None else "NULL::double precision"

    def side(sign: int, way: str, bound: str) -> str:
        order = f'm.created_at {way}, m.id COLLATE "C" {way}'
        return (
            f"SELECT {sign} * row_number() OVER (ORDER BY {order}) AS step, m.id, m.importance, m.updated_at, "
            f"m.created_at, {cosine} AS cosine FROM eventmem_searched m "
            f"WHERE m.project = %s AND {bound} AND ({where}) ORDER BY {order} LIMIT %s"
        )

    before = side(
        -1, "DESC", 'm.created_at >= o.created_at - %s AND (m.created_at, m.id COLLATE "C") < (o.created_at, o.id)'
    )
    after = side(
        1, "ASC", 'm.created_at <= o.created_at + %s AND (m.created_at, m.id COLLATE "C") > (o.created_at, o.id)'
    )
    sql = (
        "SELECT l.place, s.step, s.id, s.importance, s.updated_at, s.created_at, s.cosine "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS l(id, place) "
        "JOIN eventmem_searched o ON o.project = %s AND o.id = l.id "
        f"CROSS JOIN LATERAL (({before}) UNION ALL ({after})) s ORDER BY l.place, s.step"
    )
    own = [vector] if vector is not None else []
    values: list[object] = [list(ids), project]
    for _ in range(2):
        values += [*own, project, float(seconds), *params, int(steps)]
    rows = conn.execute(sql, values).fetchall()
    return [
        (int(place) - 1, int(step), str(memory), float(importance), float(updated), float(created),
         None if cos is None else float(cos))
        for place, step, memory, importance, updated, created, cos in rows
    ]  # fmt: skip


def contents(conn: Any, project: str, ids: Sequence[str], chars: int) -> dict[str, str]:
    """The first ``chars`` characters of the content of each of the memories ``ids`` of ``project``
    (a dated note is read for the day it names, as in-process: its text's first characters)."""
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT m.id, left(m.content, %s) FROM eventmem_memories m WHERE m.project = %s AND m.id = ANY(%s::text[])",
        [int(chars), project, list(ids)],
    ).fetchall()
    return {str(memory): str(text) for memory, text in rows}
