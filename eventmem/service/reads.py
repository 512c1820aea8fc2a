"""The reads a service answers from one place or another: the one interface of the in-process reads
(:class:`~eventmem.service.queries.Queries`, over this process's indexes) and of the PostgreSQL ones
(:class:`~eventmem.service.database_queries.DatabaseQueries`, ``serve --store``). The composition root
(:func:`eventmem.service.app.open_service`) picks one when it opens a service; mypy holds both, and
:class:`~eventmem.service.app.MemoryService`, to these signatures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from eventmem.core.query_rules import Filters
from eventmem.service.models import Hit

__all__ = ["Mode", "Order", "Reads"]

Mode = Literal["hybrid", "vector", "keyword"]
"""Which indexes rank a query: both, fused (``hybrid``), or one of them."""
Order = Literal["relevance", "importance", "recent"]
"""How a search orders its hits."""


class Reads(Protocol):
    """Recall, search, related memories, the session-start bundle and the figures (documented on
    :class:`~eventmem.service.app.MemoryService`)."""

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        filters: Filters | None = None,
        include_content: bool = False,
        mode: Mode = "hybrid",
        access: bool = False,
        now: float | None = None,
        project: str | None = None,
    ) -> list[Hit]: ...

    def search(
        self,
        query: str | None = None,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        project: str | None = None,
        mode: Mode = "hybrid",
        sort: Order | None = None,
        include_content: bool = False,
        access: bool = False,
    ) -> list[Hit]: ...

    def related(
        self,
        memory_id: str,
        *,
        depth: int = 1,
        relations: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: int = 50,
        include_superseded: bool = False,
    ) -> list[dict[str, Any]]: ...

    def context(
        self,
        *,
        max_chars: int = 4000,
        types: Sequence[str] | None = None,
        include_global: bool = True,
        per_type: int = 0,
    ) -> dict[str, Any]: ...

    def stats(self) -> dict[str, Any]: ...
