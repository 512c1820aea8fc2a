"""Recall, search, related, context and stats answered from PostgreSQL (``serve --store``).

The same questions as :class:`~eventmem.service.queries.Queries`, with the same checks and the same
fusion (:func:`eventmem.service.database_search.hybrid`: the in-process one), over the memories of every project in the
database: by default this project's and the global memory's (the in-process answer), with ``project``
another project's (its own memories and the global ones saved from it), or ``*`` every project's. A
hit of another project is built from its row's folded record. When the database cannot answer, the
in-process parts do, and the search notes say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from eventmem.core.errors import InvalidInput
from eventmem.core.ids import canonical_id, iso_to_epoch
from eventmem.core.query_rules import Filters
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.core.validation import check_count, check_length, check_whole
from eventmem.projectors.postgres import queries, reads
from eventmem.projectors.postgres.targets import is_global, is_project_name
from eventmem.runner.runner import Store
from eventmem.service import database_search
from eventmem.service.access import Accesses
from eventmem.service.database import Database, DatabaseDown
from eventmem.service.inputs import check_kind, check_mode, check_order, check_query, check_walk
from eventmem.service.lifecycle import walk
from eventmem.service.models import Hit, related_entry
from eventmem.service.part import Part, Shared
from eventmem.service.queries import Queries, checked_project, context_answer, hit_of, unknown_project_note
from eventmem.service.reads import Reads

__all__ = ["DatabaseQueries"]

Mode = Literal["hybrid", "vector", "keyword"]
R = TypeVar("R")


def _named(key: tuple[str, str]) -> str:
    """The project a row of the database is of: its project's name, none for the global memory's rows
    (:func:`hit_of` then names the project a global memory was saved from)."""
    return "" if is_global(key[0]) else key[0]


class DatabaseQueries(Part, Reads):
    """The reads of a service serving from a database; :attr:`local` answers when it is unreachable."""

    def __init__(self, shared: Shared, accesses: Accesses, database: Database, local: Queries) -> None:
        super().__init__(shared)
        self.accesses = accesses
        self.database = database
        self.local = local
        self._empty = database_search.EmptyProjects()
        """The database's projects that held nothing at the last search (the global memory, often)."""

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
    ) -> list[Hit]:
        check_query(query)
        whole = check_whole(limit, "limit")
        wanted = checked_project(project)
        chosen = filters or Filters()
        chosen.validate()
        check_mode(mode)
        try:
            hits = self.database.use(
                lambda conn: self._ranked(conn, query, whole, chosen, mode, now, wanted, include_content)
            )
        except DatabaseDown:
            return self._fall_back(
                lambda: self.local.recall(
                    query,
                    limit=limit,
                    filters=filters,
                    include_content=include_content,
                    mode=mode,
                    access=access,
                    now=now,
                    project=project,
                )
            )
        if access:
            self._count(hits)
        return [hit for hit, _ in hits]

    def search(
        self,
        query: str | None = None,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        project: str | None = None,
        mode: Mode = "hybrid",
        sort: Literal["relevance", "importance", "recent"] | None = None,
        include_content: bool = False,
        access: bool = False,
    ) -> list[Hit]:
        text = check_length(query, "query").strip() if query is not None else ""
        whole = check_whole(limit, "limit")
        wanted = checked_project(project)
        order = check_order(text, mode, sort)
        chosen = filters or Filters()
        chosen.validate()

        def answer(conn: Any) -> list[tuple[Hit, tuple[str, str]]]:
            if text:
                ranked = self._ranked(conn, text, whole, chosen, mode, None, wanted, include_content)
                if order == "importance":
                    return sorted(ranked, key=lambda hk: (-hk[0].importance, -_epoch(hk[0]), hk[0].id))
                if order == "recent":
                    return sorted(ranked, key=lambda hk: (-_epoch(hk[0]), hk[0].id))
                return ranked
            among, narrowed, unknown = self._among(conn, chosen, wanted)
            listing: Literal["importance", "recent"] = "recent" if order == "recent" else "importance"
            listed = reads.listed(conn, among, chosen, whole, listing, project=narrowed)
            return self._noted(
                [
                    (hit_of(r, r.importance, 0.0, 0.0, include_content=include_content, project=_named(key)), key)
                    for key, r, _ in listed
                ],
                unknown,
            )

        try:
            hits = self.database.use(answer)
        except DatabaseDown:
            return self._fall_back(
                lambda: self.local.search(
                    query,
                    limit=limit,
                    filters=filters,
                    project=project,
                    mode=mode,
                    sort=sort,
                    include_content=include_content,
                    access=access,
                )
            )
        if access and text:
            self._count(hits)
        return [hit for hit, _ in hits]

    def related(
        self,
        memory_id: str,
        *,
        depth: int = 1,
        relations: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: int = 50,
        include_superseded: bool = False,
    ) -> list[dict[str, Any]]:
        """Memories reachable along live links, from the database: a memory of any project in it."""
        whole_depth, whole_limit, wanted = check_walk(depth, limit, direction, relations)
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("memory id must be a non-empty string")
        check_length(memory_id, "memory_id")
        start = canonical_id(memory_id.strip())
        filters = Filters(include_superseded=include_superseded)

        def answer(conn: Any) -> list[dict[str, Any]] | None:
            home = reads.where_is(conn, [*self.database.names, *self._others(conn)], start)
            if home is None:
                return None  # (not projected: the journal's answer says why)
            # (the memory's project, this one and this user's global memory: a link between a global memory
            # and this project's lives in this project's journal, found from either end as in-process)
            among = sorted({home, *self.database.names})
            if not reads.visible_keys(conn, among, [start], Filters(include_superseded=True)):
                return None
            keys: dict[str, tuple[str, str] | None] = {}

            def links_of(memory: str) -> list[LinkRecord]:
                return reads.link_records(conn, among, memory)

            def keep(memory: str) -> bool:
                if memory not in keys:
                    keys[memory] = reads.visible_keys(conn, among, [memory], filters).get(memory)
                return keys[memory] is not None

            steps = walk(
                start, links_of, depth=whole_depth, relations=wanted, direction=direction, keep=keep, limit=whole_limit
            )
            found = reads.records(conn, [k for step in steps if (k := keys.get(step.memory)) is not None])
            out: list[dict[str, Any]] = []
            for step in steps:
                key = keys.get(step.memory)
                record = found.get(key) if key is not None else None
                if record is None:
                    continue
                out.append(related_entry(step, record))
            return out

        def local() -> list[dict[str, Any]]:
            return self.local.related(
                memory_id,
                depth=depth,
                relations=relations,
                direction=direction,
                limit=limit,
                include_superseded=include_superseded,
            )

        try:
            steps = self.database.use(answer)
        except DatabaseDown:
            return self._fall_back(local)
        return local() if steps is None else steps

    def context(
        self,
        *,
        max_chars: int = 4000,
        types: Sequence[str] | None = None,
        include_global: bool = True,
        per_type: int = 0,
    ) -> dict[str, Any]:
        """The session-start bundle of this project (and the global memory), from the database."""
        chars = check_whole(max_chars, "max_chars")
        per = check_whole(per_type, "per_type")
        filters = Filters(kinds=tuple(check_kind(t) for t in check_count(types or (), "types")))
        among = self.database.names if include_global else [self.database.name]

        def answer(conn: Any) -> dict[str, Any]:
            records: list[tuple[MemoryRecord, str]] = []
            counts: dict[str, int] = {}
            for _, record, _ in reads.listed(conn, among, filters, None, "importance"):
                records.append((record, record.scope))
                counts[record.kind] = counts.get(record.kind, 0) + 1
            return context_answer(records, counts, chars, f"Project memory: {self.database.name}", per)

        try:
            return self.database.use(answer)
        except DatabaseDown:
            return self._fall_back(
                lambda: self.local.context(
                    max_chars=max_chars, types=types, include_global=include_global, per_type=per_type
                )
            )

    def stats(self) -> dict[str, Any]:
        """The journal's figures, and the database's: what it holds of this project and of every other."""
        out = self.local.stats()
        try:
            held = self.database.use(lambda conn: reads.stats(conn, self.database.name))
            # (of the global memories, this user's alone: another user's, even its size, is theirs)
            mine = self.database.global_name
            held["projects"] = {p: n for p, n in held["projects"].items() if not is_global(p) or p == mine}
            out["database"] = self.database.status() | held
        except DatabaseDown:
            out["database"] = self.database.status()
        return out

    # -- inside ---------------------------------------------------------------------------------

    def _among(self, conn: Any, filters: Filters, project: str | None) -> tuple[list[str], str | None, str]:
        """The database projects a read looks in, the project it narrows to (``None``: none), and what to
        say if the read finds nothing of a project named that the database does not hold (a typo; a global
        memory may still name it as the project it was saved from; else empty). The read's notes begin here."""
        self._search_notes.notes = []
        unknown = ""
        if project is None:
            among = self.database.names
        else:
            others = self._others(conn)
            among = [*self.database.names[1:], *others]
            if project != "*" and project.casefold() not in {p.casefold() for p in others}:
                held = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
                unknown = unknown_project_note(project, f"the database holds {held or 'none'}")
        if filters.scope == "project":
            among = [p for p in among if not is_global(p)]
        elif filters.scope == "global":
            among = [p for p in among if is_global(p)]
        return among, None if project in (None, "*") else project, unknown

    def _others(self, conn: Any) -> list[str]:
        """Every project of the database, but the global memories (another user's is theirs alone; this
        user's is :attr:`Database.names`' second) and names no sync gives (rows written by hand: never
        put into an answer or a note)."""
        return [p for p in reads.projects(conn) if is_project_name(p)]

    def _ranked(
        self,
        conn: Any,
        text: str,
        limit: int,
        filters: Filters,
        mode: Mode,
        now: float | None,
        project: str | None,
        include_content: bool,
    ) -> list[tuple[Hit, tuple[str, str]]]:
        among, narrowed, unknown = self._among(conn, filters, project)
        vectors = mode != "keyword" and self.project.vector_status() == "ready"
        if mode != "keyword" and not vectors:
            with self.project.read() as view:
                self._search_notes.notes = [*self.search_notes(), view.vector_note()]
        # one transaction: the search and the records it found, in a pipeline whose BEGIN goes with
        # the first statements and COMMIT with the records' (each would be a round trip of its own)
        with queries.one_read(conn) as read:
            scored = database_search.hybrid(
                conn,
                among,
                self.project.embedder,
                text,
                limit,
                filters,
                config=self.config,
                use_vectors=vectors,
                use_keywords=mode != "vector" or not vectors,
                now=time.time() if now is None else now,
                project=narrowed,
                # (the in-process store's cache of the last questions' vectors: a question asked
                # again is not embedded again)
                embed_query=self.project.embedding.embed_query,
                empty=self._empty,
            )
            asked = conn.execute(*reads.records_query([(s.project, s.id) for s in scored])) if scored else None
            read.commit()
        found = reads.records_of(asked.fetchall()) if asked is not None else {}
        return self._noted(
            [
                (
                    hit_of(
                        found[key],
                        s.score,
                        s.vector_score,
                        s.keyword_score,
                        include_content=include_content,
                        project=_named(key),
                    ),
                    key,
                )
                for s in scored
                if (key := (s.project, s.id)) in found
            ],
            unknown,
        )

    def _noted(self, hits: list[tuple[Hit, tuple[str, str]]], unknown: str) -> list[tuple[Hit, tuple[str, str]]]:
        """``hits``, with ``unknown`` (:meth:`_among`'s note of a project the database does not hold) added
        to the read's notes when they are none."""
        if unknown and not hits:
            self._search_notes.notes = [*self.search_notes(), unknown]
        return hits

    def _count(self, hits: list[tuple[Hit, tuple[str, str]]]) -> None:
        """Count hits of this project and of the global memory as used, in their local usage logs."""
        owners: dict[str, Store] = {}
        for hit, (project, _) in hits:
            if project == self.database.name:
                owners[hit.id] = self.project
            elif project == self.database.global_name and self._global is not None:
                owners[hit.id] = self._global
        self.accesses.record_hits(owners, [hit for hit, _ in hits])

    def _fall_back(self, read: Callable[[], R]) -> R:
        """The in-process answer, noted as such."""
        out = read()
        self._search_notes.notes = [*self.search_notes(), self.database.note()]
        return out


def _epoch(hit: Hit) -> float:
    try:
        return iso_to_epoch(hit.updated_at)
    except (ValueError, OverflowError):
        return 0.0
