"""One suite for every projector (see eventmem/projectors/base.py): a projector is added to
``projector_factory`` and must pass it unchanged.

The journal is played by a reference fold (:class:`eventmem.core.state.State`) fed random events; the
suite turns each cut of them into a :class:`Batch` as the runner does, and compares each projector's
answers to its own kind of query, in memory ids, between: every batch applied, one load of the end
state, a snapshot taken midway and restored with the rest applied, a reset and load again (a
rebuild), and every batch delivered twice.

The PostgreSQL projector (``eventmem/projectors/postgres/``) runs the same suite on a real server (the
``pg_uri`` fixture: a database of the test's own; each projector a project of its own in it, a
"snapshot" being the database itself, reopened). Its own answers are compared between the ways of
feeding it as the others' are. Against the in-process projectors it is held to what the contract
promises, not to their ranking: the same ids for every filter, the same set of memories matching a
keyword query (PostgreSQL ranks by ``ts_rank``, FTS5 by BM25), the same exact top-k vectors with
the same cosines. Without a server (no pgserver, no ``EVENTMEM_TEST_PG``) its cases are skipped."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventmem.core.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryDeleted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
)
from eventmem.core.ids import iso_to_epoch
from eventmem.core.query_rules import Filters
from eventmem.core.records import MemoryRecord
from eventmem.core.state import State
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.projectors.base import Batch, Projected, Projector
from eventmem.projectors.columns import ColumnsProjector, SlotTable
from eventmem.projectors.keywords import KeywordsProjector, RowsLater, keyword_texts
from eventmem.projectors.keywords_bulk import Row
from eventmem.projectors.postgres.projector import PostgresProjector
from eventmem.projectors.vectors import EmbedItem, VectorsProjector

NOW = iso_to_epoch("2026-06-01T00:00:00.000000Z")
KINDS = ("decision", "fix", "general")
TAGS = ("db", "ci", "api")
WORDS = ("pool", "deploy", "staging", "parser", "cache", "flaky", "retry", "timeout", "schema", "index", "branch")
QUERIES = ("pool deploy", "parser cache", "flaky retry timeout", "schema index branch", "staging")
EMBEDDER = HashingEmbedder()


# -- the reference runner -------------------------------------------------------------------------


@dataclass
class Journal:
    """A fold of the events so far, cut into batches as a runner would deliver them."""

    state: State = field(default_factory=State)
    visible: set[str] = field(default_factory=set)
    batches: list[Batch] = field(default_factory=list)

    def fold(self, events: list[AnyEvent]) -> Batch:
        before = {}  # the records whose texts the events may change, as they were (copies: folds change them in place)
        for event in events:
            if isinstance(event, MemorySaved | MemoryUpdated) and event.memory not in before:
                record = self.state.memories.get(event.memory)
                if record is not None:
                    before[event.memory] = msgspec.structs.replace(record)
        touched, _ = self.state.fold(events)
        ids = set(touched)
        for memory_id in list(ids):  # a memory's superseded flag depends on its superseder
            ids.update(link.target for link in self.state.links_of(memory_id) if link.relation == "supersedes")
        upserts, removals = [], []
        for memory_id in sorted(ids):
            record = self.state.visible(memory_id)
            if record is None:
                if memory_id in self.visible:
                    removals.append(memory_id)
                    self.visible.discard(memory_id)
                continue
            self.visible.add(memory_id)
            upserts.append(self.projected(record))
        previous = {  # (as the runner gives them: the batches are applied after every fold, as deferred ones are)
            memory_id: (*((before[memory_id],) if memory_id in before else ()), self.state.memories[memory_id])
            for memory_id in [*removals, *(p.record.id for p in upserts)]
        }
        batch = Batch(tuple(upserts), tuple(removals), events=tuple(events), previous=previous)
        self.batches.append(batch)
        return batch

    def projected(self, record: MemoryRecord) -> Projected:
        superseded = any(
            link.relation == "supersedes" and link.target == record.id and self.state.visible(link.source)
            for link in self.state.links_of(record.id)
        )
        expires = math.inf if record.ttl_seconds is None else iso_to_epoch(record.ttl_set_at) + record.ttl_seconds
        return Projected(record, superseded, expires)

    def everything(self) -> Batch:
        """One batch of every visible memory (what a rebuild loads)."""
        records = [r for m in self.state.memories if (r := self.state.visible(m)) is not None]
        return Batch(tuple(map(self.projected, records)), ())

    def superseded(self) -> set[str]:
        return {p.record.id for p in self.everything().upserts if p.superseded}


# -- projectors under test ----------------------------------------------------------------------------


@dataclass
class Subject:
    """A projector and how the runner feeds it (an in-process one shares the runner's slot table)."""

    projector: Projector
    table: SlotTable | None

    def _slots(self, batch: Batch) -> None:
        if self.table is not None:
            for projected in batch.upserts:
                self.table.assign(projected.record.id)

    def apply(self, batch: Batch) -> None:
        self._slots(batch)
        self.projector.apply(batch)

    def load(self, batch: Batch) -> None:
        self._slots(batch)
        self.projector.load(batch)


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[Journal, SlotTable], Projector]
    answers: Callable[[Projector, Journal], Hashable]
    """Its answers to its kind of queries, in memory ids."""
    ids: Callable[[Projector], set[str]]
    """Every memory id any default answer of it holds."""
    reopen: Callable[[Projector, Journal, SlotTable], Projector] | None = None
    """A projector that goes on from where ``projector`` stands (default: a new one, restored from its
    snapshot); one that keeps itself (a database) opens the same rows again."""
    needs_database: bool = False
    """Made on the test's own PostgreSQL database (see :func:`projector_factory`)."""


def _columns(journal: Journal, table: SlotTable) -> Projector:
    return ColumnsProjector(table, journal.state.visible)


def _columns_answers(projector: Projector, journal: Journal) -> Hashable:
    assert isinstance(projector, ColumnsProjector)
    contents = sorted({r.content for r in journal.state.memories.values()})
    return (
        tuple(sorted(projector.select(now=NOW))),
        tuple(sorted(projector.select(now=NOW, include_superseded=True))),
        tuple(tuple(sorted(projector.select(now=NOW, kinds=(kind,)))) for kind in KINDS),
        tuple(tuple(sorted(projector.select(now=NOW, tags=(tag,)))) for tag in TAGS),
        tuple(tuple(sorted(projector.select(now=NOW + 3600 * hours))) for hours in (1, 48)),
        tuple(tuple(projector.duplicates(content)) for content in contents),
    )


def _keywords_answers(projector: Projector, journal: Journal) -> Hashable:
    assert isinstance(projector, KeywordsProjector)
    return tuple(
        tuple(sorted((memory_id, round(score, 6)) for memory_id, score in projector.search(query, 50)))
        for query in QUERIES
    )


def _keywords_postings_answers(projector: Projector, journal: Journal) -> Hashable:
    """The keyword answers once ranked from in-memory postings (made from the first row on)."""
    assert isinstance(projector, KeywordsProjector)
    assert len(projector) == 0 or projector.ranked_in_memory(60)
    return _keywords_answers(projector, journal)


def _rows_of(journal: Journal, table: SlotTable) -> RowsLater:
    """The keyword rows of slots from the fold's texts (the keyword index holds none), as the runner reads them."""

    def rows_of(slots: list[int]) -> Callable[[], list[Row]]:
        rows = [(slot, *keyword_texts(journal.state.memories[table.ids[slot]])) for slot in slots]
        return lambda: rows

    return rows_of


def _vectors(journal: Journal, table: SlotTable) -> Projector:
    def embed(items: list[EmbedItem]) -> None:
        projector.put(np.asarray([slot for slot, _, _ in items], np.int64), EMBEDDER.embed([t for _, t, _ in items]))

    projector = VectorsProjector(table, EMBEDDER.dim, embed)
    return projector


def _vectors_ann(journal: Journal, table: SlotTable) -> Projector:
    """The vector projector with its approximate index from the first vector on (the default is 50k)."""

    def embed(items: list[EmbedItem]) -> None:
        projector.put(np.asarray([slot for slot, _, _ in items], np.int64), EMBEDDER.embed([t for _, t, _ in items]))

    projector = VectorsProjector(table, EMBEDDER.dim, embed, ann_from=1)
    return projector


def _vectors_answers(projector: Projector, journal: Journal) -> Hashable:
    assert isinstance(projector, VectorsProjector)
    assert projector.settle(60)  # (answers through the approximate index when it is due)
    return tuple(
        tuple(sorted((memory_id, round(score, 3)) for memory_id, score in projector.search(vector, 50)))
        for vector in EMBEDDER.embed(list(QUERIES))
    )


def _selected(projector: Projector) -> set[str]:
    assert isinstance(projector, ColumnsProjector)
    return set(projector.select(now=NOW))


def _searched(projector: Projector) -> set[str]:
    if isinstance(projector, KeywordsProjector):
        return {m for q in QUERIES for m, _ in projector.search(q, 1000)}
    assert isinstance(projector, VectorsProjector)
    assert projector.settle(60)
    return {m for v in EMBEDDER.embed(list(QUERIES)) for m, _ in projector.search(v, 1000)}


# -- PostgreSQL: each projector a project of its own in the test's database ------------------------

PG_FILTERS = (
    Filters(),
    Filters(include_superseded=True),
    *(Filters(kinds=(kind,)) for kind in KINDS),
    *(Filters(tags=(tag,)) for tag in TAGS),
)
EVERY_ROW = Filters(include_superseded=True)
"""What the in-process keyword and vector indexes hold: superseded memories too (the filter columns
leave them out of a default query)."""


def _unbound(journal: Journal, table: SlotTable) -> Projector:
    raise AssertionError("a PostgreSQL projector is made by projector_factory, on the test's database")


def _postgres_answers(projector: Projector, journal: Journal) -> Hashable:
    assert isinstance(projector, PostgresProjector)
    return (
        tuple(tuple(projector.matching(filters, NOW)) for filters in PG_FILTERS),
        tuple(tuple(projector.matching(Filters(), NOW + 3600 * hours)) for hours in (1, 48)),
        tuple(
            tuple(sorted((m, round(score, 6)) for m, score in projector.keyword_search(query, 50, EVERY_ROW, NOW)))
            for query in QUERIES
        ),
        tuple(
            tuple(sorted((m, round(score, 3)) for m, score in projector.vector_search(vector, 50, EVERY_ROW, NOW)))
            for vector in EMBEDDER.embed(list(QUERIES))
        ),
    )


def _postgres_ids(projector: Projector) -> set[str]:
    assert isinstance(projector, PostgresProjector)
    found = set(projector.matching(Filters(), NOW))
    found.update(m for q in QUERIES for m, _ in projector.keyword_search(q, 1000, Filters(), NOW))
    found.update(m for v in EMBEDDER.embed(list(QUERIES)) for m, _ in projector.vector_search(v, 1000, Filters(), NOW))
    return found


class PostgresProjectors:
    """Projectors of one database, each a project of its own, all on one connection (the test's)."""

    def __init__(self, uri: str) -> None:
        import psycopg

        self.conn: Any = psycopg.connect(uri)
        self.names = itertools.count()

    def make(self, journal: Journal, table: SlotTable) -> Projector:
        return PostgresProjector(self.conn, f"p{next(self.names)}", EMBEDDER)

    def reopen(self, projector: Projector, journal: Journal, table: SlotTable) -> Projector:
        assert isinstance(projector, PostgresProjector)
        return PostgresProjector(self.conn, projector.project, EMBEDDER)

    def close(self) -> None:
        self.conn.close()


KINDS_OF_PROJECTOR = [
    Kind("columns", _columns, _columns_answers, _selected),
    Kind("keywords", lambda j, t: KeywordsProjector(t, rows_of=_rows_of(j, t)), _keywords_answers, _searched),
    Kind(
        "keywords-bulk",
        lambda j, t: KeywordsProjector(t, bulk_from=0, rows_of=_rows_of(j, t)),
        _keywords_answers,
        _searched,
    ),
    Kind(
        "keywords-postings",
        lambda j, t: KeywordsProjector(t, postings_from=1, rows_of=_rows_of(j, t)),
        _keywords_postings_answers,
        _searched,
    ),
    Kind("vectors", _vectors, _vectors_answers, _searched),
    Kind("vectors-ann", _vectors_ann, _vectors_answers, _searched),
    Kind("postgres", _unbound, _postgres_answers, _postgres_ids, needs_database=True),
]


@pytest.fixture(
    params=[
        pytest.param(kind, marks=pytest.mark.postgres) if kind.needs_database else kind for kind in KINDS_OF_PROJECTOR
    ],
    ids=lambda kind: kind.name,
)
def projector_factory(request: pytest.FixtureRequest) -> Iterator[Kind]:
    kind: Kind = request.param
    if not kind.needs_database:
        yield kind
        return
    projectors = PostgresProjectors(request.getfixturevalue("pg_uri"))
    try:
        yield replace(kind, make=projectors.make, reopen=projectors.reopen)
    finally:
        projectors.close()


def fresh(kind: Kind, journal: Journal) -> Subject:
    table = SlotTable()
    return Subject(kind.make(journal, table), table)


# -- events -------------------------------------------------------------------------------------------


class Writer:
    """Events about a few memories, stamped in order."""

    def __init__(self) -> None:
        self.count = 0
        self.memories: list[str] = []
        self.links: list[str] = []

    def _base(self) -> dict[str, str]:
        self.count += 1
        stamp = f"2026-05-31T{self.count // 3600 % 24:02d}:{self.count // 60 % 60:02d}:{self.count % 60:02d}.000000Z"
        return {"id": f"E{self.count:06d}", "ts": stamp, "by": "test"}

    def save(self, words: list[str], kind: str, tags: tuple[str, ...], ttl: int | None) -> MemorySaved:
        memory = f"M{len(self.memories):04d}"
        self.memories.append(memory)
        content = " ".join(words) or "empty"
        return MemorySaved(**self._base(), memory=memory, kind=kind, content=content, tags=tags, ttl_seconds=ttl)

    def update(self, memory: str, words: list[str], tags: tuple[str, ...]) -> MemoryUpdated:
        return MemoryUpdated(**self._base(), memory=memory, content=" ".join(words) or "empty", tags=tags)

    def delete(self, memory: str) -> MemoryDeleted:
        return MemoryDeleted(**self._base(), memory=memory)

    def restore(self, memory: str) -> MemoryRestored:
        return MemoryRestored(**self._base(), memory=memory)

    def supersede(self, source: str, target: str) -> LinkAdded:
        link = f"L{len(self.links):04d}"
        self.links.append(link)
        return LinkAdded(**self._base(), link=link, source=source, target=target, relation="supersedes")

    def unlink(self, link: str) -> LinkRemoved:
        return LinkRemoved(**self._base(), link=link)


@st.composite
def histories(draw: st.DrawFn) -> list[list[AnyEvent]]:
    """Random events cut into random batches."""
    writer = Writer()
    events: list[AnyEvent] = []
    words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)
    tags = st.lists(st.sampled_from(TAGS), max_size=2, unique=True).map(tuple)
    for _ in range(draw(st.integers(1, 40))):
        action = draw(st.sampled_from(("save", "save", "update", "delete", "restore", "supersede", "unlink")))
        if action == "save" or not writer.memories:
            ttl = draw(st.sampled_from((None, None, 3600 * 24, 60)))
            events.append(writer.save(draw(words), draw(st.sampled_from(KINDS)), draw(tags), ttl))
        elif action == "update":
            events.append(writer.update(draw(st.sampled_from(writer.memories)), draw(words), draw(tags)))
        elif action == "delete":
            events.append(writer.delete(draw(st.sampled_from(writer.memories))))
        elif action == "restore":
            events.append(writer.restore(draw(st.sampled_from(writer.memories))))
        elif action == "supersede" and len(writer.memories) > 1:
            source, target = draw(st.lists(st.sampled_from(writer.memories), min_size=2, max_size=2, unique=True))
            events.append(writer.supersede(source, target))
        elif action == "unlink" and writer.links:
            events.append(writer.unlink(draw(st.sampled_from(writer.links))))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(events) - 1)), max_size=6)))
    return [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True) if events[a:b]]


def example() -> list[list[AnyEvent]]:
    """A fixed history: saves, an update, a duplicate, a supersede, a delete, a TTL, a restore."""
    w = Writer()
    first = w.save(["pool", "deploy", "staging"], "decision", ("db",), None)
    second = w.save(["parser", "cache"], "fix", ("ci",), None)
    third = w.save(["flaky", "retry", "timeout"], "general", ("db", "api"), 60)
    same = w.save(["pool", "deploy", "staging"], "general", (), None)
    newer = w.save(["parser", "cache", "schema"], "fix", ("ci",), None)
    return [
        [first, second, third],
        [same, w.update(second.memory, ["parser", "cache", "index"], ("ci", "api"))],
        [newer, w.supersede(newer.memory, second.memory)],
        [w.delete(first.memory)],
        [w.delete(third.memory), w.restore(third.memory)],
    ]


def play(history: list[list[AnyEvent]]) -> Journal:
    journal = Journal()
    for events in history:
        journal.fold(events)
    return journal


def incremental(kind: Kind, journal: Journal, *, twice: bool = False) -> Subject:
    subject = fresh(kind, journal)
    for batch in journal.batches:
        subject.apply(batch)
        if twice:
            subject.apply(batch)
    return subject


def bulk(kind: Kind, journal: Journal) -> Subject:
    subject = fresh(kind, journal)
    subject.load(journal.everything())
    return subject


def snapshot_and_tail(kind: Kind, history: list[list[AnyEvent]], cut: int) -> tuple[Subject, Journal]:
    """Batches up to ``cut`` applied, a snapshot taken; a new projector restores it and applies the rest."""
    journal = Journal()
    first = fresh(kind, journal)
    for events in history[:cut]:
        first.apply(journal.fold(events))
    data = first.projector.snapshot()
    table = SlotTable(list(first.table.ids)) if first.table is not None else None
    table_of_second = table if table is not None else SlotTable()
    if kind.reopen is not None:
        second = Subject(kind.reopen(first.projector, journal, table_of_second), table)
    else:
        second = Subject(kind.make(journal, table_of_second), table)
    assert second.projector.restore(data)
    for events in history[cut:]:
        second.apply(journal.fold(events))
    return second, journal


def all_answers(kind: Kind, history: list[list[AnyEvent]]) -> Iterator[tuple[str, Hashable]]:
    journal = play(history)
    yield "incremental", kind.answers(incremental(kind, journal).projector, journal)
    yield "delivered twice", kind.answers(incremental(kind, journal, twice=True).projector, journal)
    yield "bulk", kind.answers(bulk(kind, journal).projector, journal)
    rebuilt = incremental(kind, journal)
    rebuilt.projector.reset()
    rebuilt.load(journal.everything())
    yield "rebuild", kind.answers(rebuilt.projector, journal)
    for cut in range(1, len(history)):
        subject, tail_journal = snapshot_and_tail(kind, history, cut)
        yield f"snapshot after batch {cut} + tail", kind.answers(subject.projector, tail_journal)


def assert_same_answers(kind: Kind, history: list[list[AnyEvent]]) -> None:
    answers = dict(all_answers(kind, history))
    reference = answers["incremental"]
    for way, found in answers.items():
        assert found == reference, f"{kind.name}: {way} differs from applying every batch"


# -- the contract -----------------------------------------------------------------------------------


def test_every_way_of_feeding_a_projector_gives_the_same_answers(projector_factory: Kind) -> None:
    assert_same_answers(projector_factory, example())


def test_a_projector_answers_its_queries_from_what_it_was_given(projector_factory: Kind) -> None:
    journal = play(example())
    found = projector_factory.ids(incremental(projector_factory, journal).projector)
    assert found  # (the suite compares something)
    assert found <= {p.record.id for p in journal.everything().upserts}


def test_a_removed_memory_is_gone_from_every_answer(projector_factory: Kind) -> None:
    journal = play(example())
    removed = set(journal.state.memories) - journal.visible
    assert removed
    for subject in (incremental(projector_factory, journal), bulk(projector_factory, journal)):
        assert not projector_factory.ids(subject.projector) & removed


def test_a_superseded_memory_is_gone_from_the_default_filter_answers() -> None:
    journal = play(example())
    superseded = journal.superseded()
    assert superseded
    for subject in (incremental(KINDS_OF_PROJECTOR[0], journal), bulk(KINDS_OF_PROJECTOR[0], journal)):
        assert isinstance(subject.projector, ColumnsProjector)
        assert not set(subject.projector.select(now=NOW)) & superseded
        assert superseded <= set(subject.projector.select(now=NOW, include_superseded=True))


def test_a_reset_projector_is_empty(projector_factory: Kind) -> None:
    journal = play(example())
    subject = incremental(projector_factory, journal)
    subject.projector.reset()
    assert not projector_factory.ids(subject.projector)
    subject.projector.close()


def test_a_damaged_snapshot_is_refused_and_leaves_the_projector_empty(projector_factory: Kind) -> None:
    journal = play(example())
    subject = fresh(projector_factory, journal)
    assert not subject.projector.restore(b"not a snapshot")
    assert not projector_factory.ids(subject.projector)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_random_histories_cut_into_random_batches_give_the_same_answers_every_way(
    projector_factory: Kind, history: list[list[AnyEvent]]
) -> None:
    assert_same_answers(projector_factory, history)


# -- PostgreSQL against the in-process projectors ---------------------------------------------------

COSINE_TOLERANCE = 1e-3
"""The in-process index keeps float16 codes, PostgreSQL float32 vectors (an identical text: 0.9999 and 1)."""
EVER = 0.0
"""A time before any memory of the suite expires: the in-process indexes hold expired memories too."""


def kind_named(name: str) -> Kind:
    return next(kind for kind in KINDS_OF_PROJECTOR if kind.name == name)


def promised_answers_in_process(journal: Journal) -> tuple[Hashable, Hashable, list[dict[str, float]]]:
    """What the contract promises, from the columns, keywords and vectors projectors fed every batch."""
    columns = incremental(kind_named("columns"), journal).projector
    keywords = incremental(kind_named("keywords"), journal).projector
    vectors = incremental(kind_named("vectors"), journal).projector
    assert isinstance(columns, ColumnsProjector)
    assert isinstance(keywords, KeywordsProjector)
    assert isinstance(vectors, VectorsProjector)
    selected = tuple(
        tuple(sorted(columns.select(now=NOW, kinds=f.kinds, tags=f.tags, include_superseded=f.include_superseded)))
        for f in PG_FILTERS
    )
    # the keyword scores too: PostgreSQL computes FTS5's BM25 from the statistics it keeps
    found = tuple(tuple(sorted((m, round(s, 9)) for m, s in keywords.search(query, 1000))) for query in QUERIES)
    nearest = [vectors.search(vector, 1000) for vector in EMBEDDER.embed(list(QUERIES))]
    return selected, found, _cosines(nearest)


def promised_answers_of_postgres(projector: PostgresProjector) -> tuple[Hashable, Hashable, list[dict[str, float]]]:
    selected = tuple(tuple(projector.matching(filters, NOW)) for filters in PG_FILTERS)
    found = tuple(
        tuple(sorted((m, round(s, 9)) for m, s in projector.keyword_search(q, 1000, EVERY_ROW, EVER))) for q in QUERIES
    )
    vectors = EMBEDDER.embed(list(QUERIES))
    nearest = [projector.vector_search(vector, 1000, EVERY_ROW, EVER) for vector in vectors]
    return selected, found, _cosines(nearest)


def _cosines(answers: list[list[tuple[str, float]]]) -> list[dict[str, float]]:
    """Every memory's cosine, by id (ids tied on a cosine may come in either order)."""
    return [dict(hits) for hits in answers]


def _top(answers: list[dict[str, float]], k: int = 5) -> list[list[float]]:
    return [sorted(cosines.values(), reverse=True)[:k] for cosines in answers]


def assert_postgres_promises_what_in_process_does(
    projectors: PostgresProjectors, history: list[list[AnyEvent]]
) -> None:
    journal = play(history)
    projector = projectors.make(journal, SlotTable())
    for batch in journal.batches:
        projector.apply(batch)
    assert isinstance(projector, PostgresProjector)
    selected, found, nearest = promised_answers_of_postgres(projector)
    expected_selected, expected_found, expected_nearest = promised_answers_in_process(journal)
    assert selected == expected_selected, "the filters select other memories"
    assert found == expected_found, "a keyword query matches other memories, or scores them otherwise"
    assert [set(c) for c in nearest] == [set(c) for c in expected_nearest], "the vector index holds other memories"
    for got, expected in zip(nearest, expected_nearest, strict=True):
        assert got == pytest.approx(expected, abs=COSINE_TOLERANCE), "another cosine"
    for got_top, expected_top in zip(_top(nearest), _top(expected_nearest), strict=True):
        assert got_top == pytest.approx(expected_top, abs=COSINE_TOLERANCE), "another exact top 5"


@pytest.fixture
def postgres_projectors(pg_uri: str) -> Iterator[PostgresProjectors]:
    projectors = PostgresProjectors(pg_uri)
    yield projectors
    projectors.close()


@pytest.mark.postgres
def test_postgres_answers_what_the_in_process_projectors_answer(postgres_projectors: PostgresProjectors) -> None:
    assert_postgres_promises_what_in_process_does(postgres_projectors, example())


@pytest.mark.postgres
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_postgres_answers_what_the_in_process_projectors_answer_on_random_histories(
    postgres_projectors: PostgresProjectors, history: list[list[AnyEvent]]
) -> None:
    assert_postgres_promises_what_in_process_does(postgres_projectors, history)
