"""A batch's links as rows, and the "superseded" flags a moved ``supersedes`` link sets again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from eventmem.core.records import LinkRecord
from eventmem.projectors.postgres.bulk import pg_text

if TYPE_CHECKING:
    import psycopg

__all__ = ["write_links"]

_ENCODE = msgspec.msgpack.Encoder()
_UPSERT_LINK = (
    "INSERT INTO eventmem_links (project, id, source, target, relation, strength, context, added_by, record) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, id) DO UPDATE SET source = excluded.source, "
    "target = excluded.target, relation = excluded.relation, strength = excluded.strength, "
    "context = excluded.context, added_by = excluded.added_by, record = excluded.record"
)
_SUPERSEDED_BY = "SELECT target FROM eventmem_links WHERE project = %s AND id = ANY(%s) AND relation = 'supersedes'"
_SUPERSEDED_AGAIN = (  # (a memory's "superseded": a live memory's supersedes link names it; see sync.is_superseded)
    "UPDATE eventmem_memories m SET superseded = NOT m.superseded WHERE m.project = %(p)s AND m.id = ANY(%(ids)s) "
    "AND m.superseded <> EXISTS (SELECT 1 FROM eventmem_links l JOIN eventmem_memories s ON s.project = l.project "
    "AND s.id = l.source WHERE l.project = %(p)s AND l.target = m.id AND l.relation = 'supersedes')"
)


def write_links(
    cursor: psycopg.Cursor[tuple[Any, ...]], project: str, links: Sequence[LinkRecord], *, held: bool = True
) -> None:
    """Write the links a batch changed: a dead one's row removed, a live one's made or written again.
    A memory a ``supersedes`` link named before the batch has its flag computed again from the rows
    (a link moved to other ends: a batch of the touched memories alone holds only its new ends).
    ``held``: the project may hold some of them (not after a load's removal of its rows)."""
    ids = [link.id for link in links] if held else []
    named = cursor.execute(_SUPERSEDED_BY, [project, ids]).fetchall() if ids else []
    dead = [link.id for link in links if not link.alive]
    if dead:
        cursor.execute("DELETE FROM eventmem_links WHERE project = %s AND id = ANY(%s)", [project, dead])
    alive = [link for link in links if link.alive]
    if alive:
        cursor.executemany(_UPSERT_LINK, [_link_row(project, link) for link in alive])
    if named:
        cursor.execute(_SUPERSEDED_AGAIN, {"p": project, "ids": [row[0] for row in named]})


def _link_row(project: str, link: LinkRecord) -> tuple[object, ...]:
    return (
        project,
        link.id,
        link.source,
        link.target,
        link.relation,
        link.strength,
        pg_text(link.context),
        pg_text(link.added_by),
        _ENCODE.encode(link),
    )
