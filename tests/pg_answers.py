"""What a PostgreSQL projection answers, gathered for comparison (projections equal when these are)."""

from __future__ import annotations

from typing import Any

from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.projectors.postgres import queries
from eventmem.service import database_search

QUERIES = ("ruff lint", "database migrations", "deploy friday", "flaky test", "zzqx unknownword")
NOW = 2_000_000_000.0
"""A fixed time for the answers (after every memory the tests write; before none of their expiries)."""


def answers(conn: Any, project: str) -> dict[str, Any]:
    """Every kind of answer for one project: ids by filter, records, links, keyword, vector and hybrid."""
    embedder = HashingEmbedder()
    out: dict[str, Any] = {}
    for label, filters in (
        ("all", Filters()),
        ("with superseded", Filters(include_superseded=True)),
        ("decisions", Filters(kinds=("decision",))),
        ("tagged", Filters(tags=("tooling",))),
        ("important", Filters(min_importance=0.7)),
    ):
        out[f"ids {label}"] = [i for _, i in queries.matching(conn, (project,), filters, NOW)]
    rows = conn.execute(
        "SELECT id, record, superseded, expires_at, title, tags FROM eventmem_memories WHERE project = %s ORDER BY id",
        [project],
    ).fetchall()
    conn.commit()
    out["records"] = [(i, bytes(r), s, e, t, list(g)) for i, r, s, e, t, g in rows]
    links = conn.execute("SELECT id, record FROM eventmem_links WHERE project = %s ORDER BY id", [project]).fetchall()
    conn.commit()
    out["links"] = [(i, bytes(r)) for i, r in links]
    for text in QUERIES:
        out[f"keyword {text}"] = _rounded(queries.keyword_hits(conn, (project,), text, 20, Filters(), NOW))
        vector = embedder.embed([text])[0]
        out[f"vector {text}"] = _rounded(queries.vector_hits(conn, (project,), vector, 20, Filters(), NOW))
        hits = database_search.hybrid(conn, (project,), embedder, text, 10, Filters(), now=NOW)
        out[f"hybrid {text}"] = [(h.id, round(h.score, 6)) for h in hits]
    return out


def _rounded(hits: list[tuple[tuple[str, str], float]]) -> list[tuple[str, float]]:
    return [(key[1], round(score, 6)) for key, score in hits]
