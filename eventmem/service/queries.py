"""The service's queries: get, recall, structured search, related memories, the session-start bundle and
the figures.

Each catches up with the journal first, so what any process wrote before the call began is visible to it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from eventmem.core.errors import InvalidInput
from eventmem.core.events import KINDS
from eventmem.core.query_rules import Filters
from eventmem.core.records import LinkRecord, MemoryRecord
from eventmem.core.validation import check_count, check_length, check_whole
from eventmem.embedders.providers import ProviderError
from eventmem.runner.readview import ReadView
from eventmem.runner.runner import Store
from eventmem.service.access import Accesses
from eventmem.service.inputs import check_kind, check_order, check_query, check_walk
from eventmem.service.lifecycle import context_bundle, walk
from eventmem.service.models import Hit, Memory, related_entry
from eventmem.service.part import Part, Shared
from eventmem.service.reads import Reads
from eventmem.service.search import build_mask, hybrid_search

__all__ = ["Queries"]


class Queries(Part, Reads):
    """Every read a caller asks for; ``access`` on a read counts its memories as used (see :class:`Accesses`)."""

    def __init__(self, shared: Shared, accesses: Accesses) -> None:
        super().__init__(shared)
        self.accesses = accesses

    def get(self, memory_id: str, *, access: bool = False) -> Memory:
        """One memory; ``access`` (the MCP tools) counts it as used, after the view is taken."""
        store, record = self._find(memory_id)
        memory = self.view(store, record)
        if access:
            self.accesses.record_access(store, [record.id])
        return memory

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        filters: Filters | None = None,
        include_content: bool = False,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        access: bool = False,
        now: float | None = None,
        project: str | None = None,
    ) -> list[Hit]:
        """``now``: the moment the question is asked (seconds since the epoch; the clock's by default),
        for expiry, recency and the times the query names (an evaluation replays questions asked in the past).
        ``project``: as :meth:`search`'s."""
        check_query(query)
        limit = check_whole(limit, "limit")
        project = checked_project(project)
        filters = filters or Filters()
        filters.validate()
        hits: list[Hit] = []
        owners: dict[str, Store] = {}
        now = time.time() if now is None else now
        self._search_notes.notes = []
        named = False
        for store, view, mask in self._searched(filters, now):
            if project is not None:
                of_project = self._project_mask(store, view, project)
                named = named or bool(of_project.any())
                mask &= of_project
            for hit, _ in self._ranked(view, query, limit, mask, mode, now, include_content=include_content):
                hits.append(self._named(hit, store))
                owners[hit.id] = store
        hits.sort(key=lambda h: (-h.score, h.id))
        hits = hits[:limit]
        self._note_unknown(project, named)
        if access:
            self.accesses.record_hits(owners, hits)
        return hits

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
        """Memories reachable from one along live links, breadth first (nearest, then strongest)."""
        depth, limit, wanted = check_walk(depth, limit, direction, relations)
        _, root = self._find(memory_id)
        stores = self.stores()
        now = time.time()
        owners: dict[str, ReadView | None] = {}

        def links_of(memory: str) -> list[LinkRecord]:
            return [link for v, _ in returnable for i in v.link_ids_of(memory) if (link := v.link(i)) is not None]

        def owner(memory: str) -> ReadView | None:
            if memory not in owners:
                found = None
                for v, ok in returnable:
                    slot = v.position_of(memory)
                    if slot is not None and slot < len(ok) and ok[slot]:
                        found = v
                        break
                owners[memory] = found
            return owners[memory]

        with contextlib.ExitStack() as locks:
            returnable: list[tuple[ReadView, npt.NDArray[np.bool_]]] = []
            for s in stores:
                v = locks.enter_context(s.read())
                returnable.append((v, v.mask(now=now, include_superseded=include_superseded)))
            steps = walk(
                root.id,
                links_of,
                depth=depth,
                relations=wanted,
                direction=direction,
                keep=lambda m: owner(m) is not None,
                limit=limit,
            )
            out: list[dict[str, Any]] = []
            for step in steps:
                where = owner(step.memory)
                assert where is not None
                record = where.memories()[step.memory]
                out.append(related_entry(step, record))
        return out

    def search(
        self,
        query: str | None = None,
        *,
        limit: int = 10,
        filters: Filters | None = None,
        project: str | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        sort: Literal["relevance", "importance", "recent"] | None = None,
        include_content: bool = False,
        access: bool = False,
    ) -> list[Hit]:
        """Structured search: filters, plus optional query text. Without a query, a listing of what
        the filters match, most important (or most recent) first. ``project``: memories of that
        project (this project's own, and global ones saved from it); ``*``: of every project."""
        text = check_length(query, "query").strip() if query is not None else ""
        limit = check_whole(limit, "limit")
        project = checked_project(project)
        order = check_order(text, mode, sort)
        filters = filters or Filters()
        filters.validate()
        now = time.time()
        hits: list[tuple[Hit, float]] = []
        owners: dict[str, Store] = {}
        self._search_notes.notes = []
        named = False
        for store, view, mask in self._searched(filters, now):
            if project is not None:
                of_project = self._project_mask(store, view, project)
                named = named or bool(of_project.any())
                mask &= of_project
            if text:
                answers = self._ranked(view, text, limit, mask, mode, now, include_content=include_content)
            else:
                answers = self._listed(view, mask, limit, order, include_content=include_content)
            for hit, updated in answers:
                hits.append((self._named(hit, store), updated))
                owners[hit.id] = store
        if order == "relevance":
            hits.sort(key=lambda h: (-h[0].score, h[0].id))
        elif order == "importance":
            hits.sort(key=lambda h: (-h[0].importance, -h[1], h[0].id))
        else:
            hits.sort(key=lambda h: (-h[1], h[0].id))
        found = [hit for hit, _ in hits[:limit]]
        self._note_unknown(project, named)
        if access and text:  # a listing is browsing, not use: only search hits count as accesses
            self.accesses.record_hits(owners, found)
        return found

    def _searched(self, filters: Filters, now: float) -> Iterator[tuple[Store, ReadView, npt.NDArray[np.bool_]]]:
        """Each store the filters' scope names, caught up, read, with the mask of what the filters let in."""
        for store in self.stores():
            if filters.scope not in (None, "all") and store is not self.store_for(filters.scope):
                continue
            store.catch_up()
            with store.read() as view:
                if view.size():  # (a memory none was ever saved to, often the global one: nothing to rank)
                    yield store, view, build_mask(view, filters, now)

    def _ranked(
        self,
        view: ReadView,
        text: str,
        limit: int,
        mask: npt.NDArray[np.bool_],
        mode: str,
        now: float,
        *,
        include_content: bool,
    ) -> list[tuple[Hit, float]]:
        """The one query path of recall and search: the best ``limit`` of ``mask`` for ``text``, with
        each hit's last update. Until a slow embedding model is ready, or when a model provider fails,
        the keyword index answers alone and the search notes say so."""
        vectors = mode != "keyword" and view.vector_status() == "ready"
        try:
            scored = hybrid_search(
                view,
                text,
                limit,
                mask,
                self.config,
                use_vectors=vectors,
                use_keywords=mode != "vector" or not vectors,
                now=now,
            )
        except ProviderError:
            vectors = False
            scored = hybrid_search(view, text, limit, mask, self.config, use_vectors=False, now=now)
        if mode != "keyword" and not vectors:
            self._search_notes.notes = [*self.search_notes(), view.vector_note()]
        rows = [(s.slot, s.score, s.vector_score, s.keyword_score) for s in scored]
        return _hits(view, rows, include_content=include_content)

    @staticmethod
    def _listed(
        view: ReadView, mask: npt.NDArray[np.bool_], limit: int, order: str, *, include_content: bool
    ) -> list[tuple[Hit, float]]:
        """Without a query: what ``mask`` holds, most recent (or most important, then recent) first."""
        slots = mask.nonzero()[0]
        updated = view.updated_at(slots)
        importance = view.importance_at(slots)
        keys = np.stack([updated] if order == "recent" else [updated, importance])
        order_of = np.lexsort(keys)[::-1][:limit]
        picked, picked_importance = slots[order_of], importance[order_of]
        rows = [
            (slot, weight, 0.0, 0.0) for slot, weight in zip(picked.tolist(), picked_importance.tolist(), strict=True)
        ]
        return _hits(view, rows, include_content=include_content)

    def _named(self, hit: Hit, store: Store) -> Hit:
        """``hit`` naming this project if it is of this project's store."""
        if store is self.project:
            hit.project = self.root.root.name
        return hit

    def _note_unknown(self, project: str | None, named: bool) -> None:
        """Say so when ``project`` names no project this memory holds memories of (a typo answers nothing)."""
        folder = self.root.root.name
        if project is None or project == "*" or named or project.casefold() == folder.casefold():
            return
        self._search_notes.notes = [*self.search_notes(), unknown_project_note(project, f"this project is {folder!r}")]

    def _project_mask(self, store: Store, view: ReadView, project: str) -> npt.NDArray[np.bool_]:
        n = view.size()
        if project == "*":
            return np.ones(n, bool)
        wanted = project.strip().casefold()
        if store is self.project:
            return np.full(n, wanted == self.root.root.name.casefold(), bool)
        memories = view.memories()
        return np.fromiter((memories[m].project.casefold() == wanted for m in view.positions()), bool, n)

    def context(
        self,
        *,
        max_chars: int = 4000,
        types: Sequence[str] | None = None,
        include_global: bool = True,
        per_type: int = 0,
    ) -> dict[str, Any]:
        """The session-start bundle: per type, the most important and the most recent memories, in
        turns, as markdown within ``max_chars`` (global memories marked as such)."""
        max_chars = check_whole(max_chars, "max_chars")
        per_type = check_whole(per_type, "per_type")
        filters = Filters(kinds=tuple(check_kind(t) for t in check_count(types or (), "types")))
        now = time.time()
        records: list[tuple[MemoryRecord, str]] = []
        counts: dict[str, int] = {}
        for store in self.stores():
            if store is not self.project and not include_global:
                continue
            store.catch_up()
            with store.read() as view:
                memories = view.memories()
                for memory_id in view.ids(build_mask(view, filters, now)):
                    record = memories[memory_id]
                    records.append((record, record.scope))
                    counts[record.kind] = counts.get(record.kind, 0) + 1
        return context_answer(records, counts, max_chars, f"Project memory: {self.root.root.name}", per_type)

    def stats(self) -> dict[str, Any]:
        """The project journal's figures: memories by status, type and tag, links, events, segments."""
        self.catch_up()
        store = self.project
        with store.read() as view:
            state = view.fold
            records = [r for r in state.memories.values() if r.exists]
            by_status: dict[str, int] = {}
            by_kind: dict[str, int] = {}
            tags: dict[str, int] = {}
            for record in records:
                by_status[record.status] = by_status.get(record.status, 0) + 1
                if record.status == "live":
                    by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
                    for tag in record.tags:
                        tags[tag] = tags.get(tag, 0) + 1
            segments = store.journal.segments()
            return {
                "root": str(self.root.root),
                "root_source": self.root.source,
                "memories": by_status.get("live", 0),
                "by_status": by_status,
                "by_kind": dict(sorted(by_kind.items())),
                "top_tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
                "links": sum(1 for link in state.links.values() if link.alive),
                "events": len(state.seen),
                "unknown_events": dict(state.unknown),
                "segments": len(segments),
                "journal_bytes": sum(s.size for s in segments),
                "embedder": store.embedder.model_id,
                "corrupt_lines": [{"segment": p.path, "offset": p.offset, "reason": p.reason} for p in view.problems()],
            }


def unknown_project_note(project: str, held: str) -> str:
    """What a read naming a project it holds no memory of says (``held``: which projects there are)."""
    if project.strip().casefold() == "global":
        return f"no project is called {project!r}: the global memory alone is asked with scope 'global'"
    return f"no memory here is of a project called {project!r} ({held}); '*' searches every project"


def checked_project(project: str | None) -> str | None:
    """A ``project`` argument checked: ``None`` (this project and the global memory), ``*`` (every
    project the memory reaches) or a project's name."""
    if project is None:
        return None
    check_length(project, "project")
    if not project.strip():
        raise InvalidInput("project must be a project's name, or '*' for every project")
    return project.strip()


def context_answer(
    records: list[tuple[MemoryRecord, str]], counts: dict[str, int], max_chars: int, title: str, per_type: int
) -> dict[str, Any]:
    """The session-start bundle of ``records`` ((record, scope) pairs) and the count of each type."""
    text, lines, omitted = context_bundle(records, max_chars=max_chars, title=title, per_kind=per_type)
    return {
        "text": text,
        "chars": len(text),
        "memories": [
            {
                "id": line.record.id,
                "kind": line.record.kind,
                "scope": line.scope,
                "title": line.record.title,
                "summary": line.record.summary,
                "importance": line.record.importance,
                "updated_at": line.record.updated_at or line.record.created_at,
            }
            for line in lines
        ],
        "counts": {k: counts[k] for k in sorted(counts, key=lambda k: (KINDS.index(k) if k in KINDS else 99, k))},
        "omitted": omitted,
    }


def _hits(
    view: ReadView, rows: list[tuple[int, float, float, float]], *, include_content: bool
) -> list[tuple[Hit, float]]:
    """(slot, score, vector score, keyword score) rows as hits, each with its last update."""
    if not rows:
        return []
    memories = view.memories()
    positions = np.asarray([slot for slot, _, _, _ in rows], np.int64)
    updated = view.updated_at(positions).tolist()
    hits: list[tuple[Hit, float]] = []
    for (slot, score, vector_score, keyword_score), when in zip(rows, updated, strict=True):
        record = memories[view.id_at(slot)]
        hit = hit_of(record, score, vector_score, keyword_score, include_content=include_content)
        hits.append((hit, float(when)))
    return hits


def hit_of(
    record: MemoryRecord,
    score: float,
    vector_score: float,
    keyword_score: float,
    *,
    include_content: bool,
    project: str = "",
) -> Hit:
    """A search result of a memory's folded record; ``project``: the project it is of (a global
    memory's record names the one it was saved from)."""
    return Hit(
        id=record.id,
        score=round(score, 4),
        kind=record.kind,
        scope=record.scope,
        project=project or record.project,
        title=record.title,
        summary=record.summary,
        tags=list(record.tags),
        importance=record.importance,
        created_at=record.created_at,
        updated_at=record.updated_at or record.created_at,
        vector_score=round(vector_score, 4),
        keyword_score=round(keyword_score, 4),
        content=record.content if include_content else None,
    )
