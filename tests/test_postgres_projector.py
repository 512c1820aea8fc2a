"""The PostgreSQL projector on a real server, fed real journals: what the shared contract suite
(tests/contracts/test_projector_contract.py, which also runs it) does not cover. Incremental applies
and a bulk load that rebuilds the HNSW index agree, with the positions and events too; a restore goes
on from the committed position; the schema migrates; NUL characters, a segment name that is not
UTF-8 and an awaited event arriving later are handled."""

from __future__ import annotations

import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import git
from pg_answers import NOW, answers
from test_postgres_recall_pipeline import LearnedModel

from eventmem.core.codec import encode_event
from eventmem.core.errors import InvalidInput
from eventmem.core.events import LinkAdded, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso
from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.journal.project import RootChoice
from eventmem.projectors.base import Batch
from eventmem.projectors.keywords import query_words
from eventmem.projectors.postgres import keywords, queries
from eventmem.projectors.postgres import projector as projector_module
from eventmem.projectors.postgres.bulk import postings_data
from eventmem.projectors.postgres.keywords import memory_number
from eventmem.projectors.postgres.projector import PostgresProjector
from eventmem.projectors.postgres.schema import LATEST, applied_version, migrate
from eventmem.projectors.postgres.sync import FoldFeed, JournalFeed, ProjectSync
from eventmem.service import MemoryService, database_search, open_service
from eventmem.service.database import StoreFold

pytestmark = pytest.mark.postgres

Factory = Callable[[str], PostgresProjector]


@pytest.fixture
def projector_factory(pg_uri: str) -> Iterator[Factory]:
    """Projectors of the test's database, one per project name, each on its own connection."""
    made: list[PostgresProjector] = []

    def make(project: str) -> PostgresProjector:
        projector = PostgresProjector(psycopg.connect(pg_uri), project, HashingEmbedder(), branch="main")
        made.append(projector)
        return projector

    yield make
    for projector in made:
        projector.close()


@pytest.fixture
def conn(pg_uri: str) -> Iterator[Any]:
    with psycopg.connect(pg_uri) as connection:
        yield connection


def steps(service: MemoryService) -> Iterator[None]:
    """A history touching every kind of change, a step at a time."""
    lint = service.save("We lint with ruff; the line length is 120.", title="ruff lint", tags=["tooling"])
    yield
    decision = service.save(
        "Schema changes go through versioned migrations.", title="database migrations", kind="decision", importance=0.8
    )
    flaky = service.save("The watcher test is flaky under load.", title="flaky test", kind="problem")
    yield
    service.update(lint.id, content="We lint and format with ruff; the line length is 120.", tags=["tooling", "ci"])
    service.link(flaky.id, decision.id, "related_to")
    yield
    newer, _ = service.supersede(decision.id, "Migrations are SQL files applied on start.", title="migrations on start")
    yield
    service.delete(flaky.id, reason="fixed")
    service.save("Never deploy on a Friday.", title="deploy friday", kind="convention", ttl_seconds=3600)
    yield
    service.restore(flaky.id)
    service.update(newer.id, importance=0.9)
    yield


@pytest.mark.parametrize(
    "index_rebuilt", [False, True], ids=["indexes kept", "indexes made again by the load and by each batch"]
)
def test_incremental_applies_answer_like_one_bulk_load(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    index_rebuilt: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 1 if index_rebuilt else 10**9)
    incremental, bulk = projector_factory("incremental"), projector_factory("bulk")
    feed = JournalFeed(project)
    incremental.load(feed.full())
    for _ in steps(service):
        batch = feed.tail()
        assert batch is not None
        incremental.apply(batch)
    bulk.load(JournalFeed(project).full())
    assert answers(conn, "incremental") == answers(conn, "bulk")
    assert incremental.position() == bulk.position() == feed.position()
    assert incremental.event_ids() == bulk.event_ids() == {e.id for s, r in _scans(project) for e in r}


_NARROW = (
    "id, kind, scope, tags, importance, origin_project, created_at, updated_at, expires_at, superseded, embedding::text"
)
"""The columns of a memory's narrow copy (schema 7), the embedding as text."""


def _contents(conn: Any, project: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the projector keeps for ``project``, each table in its key's order, the project's
    name left out (the embedding as text)."""
    memory_columns = [
        str(r[0])
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'eventmem_memories'::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attname <> 'project' ORDER BY attnum"
        )
    ]
    selected = ", ".join("embedding::text" if c == "embedding" else c for c in memory_columns)
    tables = {
        "memories": f"SELECT {selected} FROM eventmem_memories WHERE project = %s ORDER BY id",
        "postings": "SELECT e.stem, e.memory, e.freq, e.tokens FROM eventmem_postings e "
        "JOIN eventmem_projects p ON p.no = e.project WHERE p.project = %s ORDER BY 1, 2",
        "postings of the rows": "SELECT s.stem, eventmem_memory_number(m.id), s.freq, m.tokens "
        "FROM eventmem_memories m CROSS JOIN LATERAL unnest(m.stems, m.freqs) AS s(stem, freq) "
        'WHERE m.project = %s ORDER BY s.stem COLLATE "C", 2',
        "words": "SELECT word, memories FROM eventmem_words WHERE project = %s ORDER BY word",
        "counts": "SELECT memories, tokens FROM eventmem_projects WHERE project = %s",
        "links": "SELECT id, source, target, relation, strength, context, added_by, record FROM eventmem_links "
        "WHERE project = %s ORDER BY id",
        "events": "SELECT id, type, ts, line FROM eventmem_events WHERE project = %s ORDER BY id",
        "positions": "SELECT segment, byte_offset, digest FROM eventmem_positions WHERE project = %s ORDER BY segment",
        "narrow copies": f"SELECT {_NARROW} FROM eventmem_searched WHERE project = %s ORDER BY id",
        "narrow copies of the rows": f"SELECT {_NARROW.replace('embedding', 'embedding::halfvec')} "
        "FROM eventmem_memories WHERE project = %s ORDER BY id",
        "lasting counts": "SELECT kind, scope, memories FROM eventmem_lasting_kinds "
        "WHERE project = %s AND memories <> 0 ORDER BY 1, 2",
        "lasting counts of the rows": "SELECT kind, scope, count(*) FROM eventmem_memories "
        "WHERE project = %s AND NOT superseded AND expires_at = 'Infinity' GROUP BY 1, 2 ORDER BY 1, 2",
        "lasting tags": "SELECT tag, memories FROM eventmem_lasting_tags "
        "WHERE project = %s AND memories <> 0 ORDER BY 1",
        "lasting tags of the rows": "SELECT t, count(*) FROM eventmem_memories "
        "CROSS JOIN LATERAL (SELECT DISTINCT unnest(tags) AS t) u "
        "WHERE project = %s AND NOT superseded AND expires_at = 'Infinity' GROUP BY 1 ORDER BY 1",
    }
    with conn.transaction():
        return {name: conn.execute(sql, [project]).fetchall() for name, sql in tables.items()}


@pytest.mark.parametrize(
    "index_rebuilt",
    [False, True],
    ids=["indexes kept, postings copied", "indexes made again by the load, postings made by the server"],
)
@pytest.mark.parametrize(
    "removed_by_scan", [False, True], ids=["removed through the key", "removed by reading the postings once"]
)
def test_the_bulk_load_and_the_incremental_applies_keep_the_same_rows(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    index_rebuilt: bool,
    removed_by_scan: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 1 if index_rebuilt else 10**9)
    monkeypatch.setattr(projector_module, "REMOVED_BY_SCAN_SHARE", 0.0 if removed_by_scan else 10.0**9)
    monkeypatch.setattr(projector_module, "LOAD_CHUNK", 2)  # (a load's postings copied a chunk at a time)
    incremental, bulk = projector_factory("incremental"), projector_factory("bulk")
    feed = JournalFeed(project)
    incremental.load(feed.full())
    for _ in steps(service):
        batch = feed.tail()
        assert batch is not None
        incremental.apply(batch)
        incremental.apply(batch)  # (a batch delivered again: the rows it names are as they were)
    bulk.load(JournalFeed(project).full())
    kept, loaded = _contents(conn, "incremental"), _contents(conn, "bulk")
    assert kept == loaded
    assert kept["postings"] == kept["postings of the rows"] and len(kept["postings"]) > 20
    assert kept["narrow copies"] == kept["narrow copies of the rows"]
    # (a superseded memory and one with a time to live are not lasting: 3 of the 5)
    assert kept["lasting counts"] == kept["lasting counts of the rows"]
    assert sum(n for *_, n in kept["lasting counts"]) == 3
    assert kept["lasting tags"] == kept["lasting tags of the rows"] == [("ci", 1), ("tooling", 1)]
    assert len(kept["memories"]) == 5 and kept["links"] and kept["words"]
    with conn.transaction():  # (a project's narrow copies and counts go with its rows, through the cascade too)
        conn.execute("DELETE FROM eventmem_projects WHERE project = 'bulk'")
    gone = _contents(conn, "bulk")
    assert gone["narrow copies"] == gone["lasting counts"] == gone["lasting tags"] == []
    assert _contents(conn, "incremental")["narrow copies"] == kept["narrow copies"]
    assert _contents(conn, "incremental")["lasting counts"] == kept["lasting counts"]
    with conn.transaction():
        conn.execute("TRUNCATE eventmem_memories CASCADE")
    assert conn.execute("SELECT count(*) FROM eventmem_searched").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM eventmem_lasting_kinds").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM eventmem_lasting_tags").fetchone() == (0,)


def test_a_server_reading_its_own_fold_keeps_the_rows_a_sync_of_the_journal_makes(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """``serve --store`` takes its batches' records from its in-process store's fold instead of folding
    the journal a second time: step by step, with another process writing beside it and a hand-written
    line moving a ``supersedes`` link to other ends, its rows are those a fresh ``eventmem sync`` of the
    same journal makes."""
    served = ProjectSync(projector_factory("served"), project, StoreFold(service.stores()[0]))
    assert isinstance(served.feed, FoldFeed)
    served.start()
    other = open_service(RootChoice(project, "test"))
    try:
        for step, _ in enumerate(steps(service)):
            other.save(f"Another agent's note number {step}.", title=f"note {step}", tags=["other"])
            if step % 2:  # (some of the other's writes reach the fold only at the server's next look)
                assert served.catch_up() > 0
        superseding = [r for r in _contents(conn, "served")["links"] if r[3] == "supersedes"]
        assert len(superseding) == 1
        link_id, source, target = superseding[0][:3]
        lint = next(h.id for h in service.search("ruff lint", limit=1))
        moved = LinkAdded(id=new_id(), ts=now_iso(), link=link_id, source=source, target=lint, relation="related_to")
        with (project / ".eventmem" / "journal" / "hand.main.jsonl").open("ab") as handle:
            handle.write(encode_event(moved))
        served.catch_up()
    finally:
        other.close()
    again = ProjectSync(projector_factory("served"), project, StoreFold(service.stores()[0]))
    assert again.start() == 0 and again.catch_up() == 0  # (a server started later goes on from the rows)
    projector_factory("bulk").load(JournalFeed(project).full())
    kept, loaded = _contents(conn, "served"), _contents(conn, "bulk")
    assert kept == loaded
    superseded = {row[0] for row in conn.execute("SELECT id FROM eventmem_memories WHERE superseded")}
    assert target not in superseded  # (no live memory supersedes it now: the link was moved off it)
    assert len(kept["memories"]) == 5 + 6 and len(kept["events"]) == 20


def test_a_server_whose_database_starts_in_the_background_reads_its_stores_folds(project: Path, pg_uri: str) -> None:
    """A server (``open_service`` as ``serve`` opens it) reaches the database from a thread of its own
    start: that thread's runner, put in place once it is done, takes its batches from the in-process
    stores' folds too, so the server never holds a second fold of its journals."""
    served = open_service(RootChoice(project, "test"), background_vectors=True, store=pg_uri, store_name="bg")
    try:
        saved = served.save("Feature flags live in config/flags.toml.", title="feature flags")
        assert [hit.id for hit in served.search("feature flags")] == [saved.id]
        assert served.database is not None and served.database.connected
        feeds = {name: type(sync.feed) for name, sync in served.database.runner.syncs.items()}
        assert feeds and set(feeds.values()) == {FoldFeed}, feeds
    finally:
        served.close()


def test_a_segment_that_is_a_symbolic_link_reaches_the_database_through_no_feed(
    service: MemoryService, project: Path, tmp_path: Path, projector_factory: Factory, conn: Any
) -> None:
    """A branch's segment that is a symbolic link to a file outside the project (journal lines there
    included) is read neither by ``eventmem sync``'s feed nor by a server's, as the journal's own scan
    does not read it."""
    kept = service.save("Deploys go out on Tuesdays.", title="deploy day")
    outside = tmp_path / "outside.jsonl"
    planted = MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), title="planted", content="from outside")
    outside.write_bytes(encode_event(planted))
    (project / ".eventmem" / "journal" / "planted.main.jsonl").symlink_to(outside)
    projector_factory("synced").load(JournalFeed(project).full())
    served = ProjectSync(projector_factory("served"), project, StoreFold(service.stores()[0]))
    served.start()
    outside.write_bytes(encode_event(planted) * 2)  # (grown: a later look reads nothing of it either)
    served.catch_up()
    for name in ("synced", "served"):
        assert [row[0] for row in _contents(conn, name)["memories"]] == [kept.id], name


def test_a_branch_checked_out_under_a_server_on_postgresql_is_served_as_the_journal_now_is(
    project: Path, pg_uri: str, projector_factory: Factory, conn: Any
) -> None:
    """A checkout removes the segment a branch's saves went to: the server's store folds the journal
    again, and the database, read through that fold, is projected again as a fresh sync would."""
    served = open_service(RootChoice(project, "test"), store=pg_uri, store_name="served")
    try:
        kept = served.save("Deploys go out on Tuesdays.", title="deploy day")
        git(project, "add", "-A")
        git(project, "commit", "-qm", "on main")
        git(project, "checkout", "-qb", "feature")
        flag = served.save("The feature flag is named fast-path.", title="feature flag")
        git(project, "add", "-A")
        git(project, "commit", "-qm", "on the feature branch")
        assert {hit.id for hit in served.search(limit=10)} == {kept.id, flag.id}
        git(project, "checkout", "-q", "main")
        assert {hit.id for hit in served.search(limit=10)} == {kept.id}
        assert served.search("feature flag fast-path") == []
    finally:
        served.close()
    projector_factory("fresh").load(JournalFeed(project).full())
    assert answers(conn, "served") == answers(conn, "fresh")


def _scans(project: Path) -> list[tuple[Any, list[Any]]]:
    feed = JournalFeed(project)
    return [(segment, feed.journal.scan(segment.path).events) for segment in feed.journal.segments()]


def _index_definitions(conn: Any) -> set[str]:
    with conn.transaction():
        found = conn.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ANY(%s::regclass[])",
            [["eventmem_memories", "eventmem_searched", "eventmem_postings", "eventmem_events", "eventmem_links"]],
        ).fetchall()
    return {str(r[0]) for r in found}


def test_a_large_batch_keeps_its_indexes_lets_readers_read_and_one_killed_midway_changes_nothing(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    pg_uri: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A merged branch's batch removes its postings by reading the posting table, not by dropping an
    index: a reader of the database is answered while the batch is being written (a dropped index
    would make it wait for the commit), and a batch killed before its commit leaves the rows as they
    were, so the next sync answers like a rebuild."""
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 1)  # (every batch large enough)
    history = steps(service)
    next(history)
    feed = JournalFeed(project)
    projector = projector_factory("p")
    projector.load(feed.full())
    indexes = _index_definitions(conn)
    assert any("ivfflat" in i for i in indexes) and any("eventmem_postings_key" in i for i in indexes)
    next(history)
    batch = feed.tail()
    assert batch is not None
    projector.apply(batch)
    assert _index_definitions(conn) == indexes
    next(history)
    batch = feed.tail()
    assert batch is not None
    blocker = psycopg.connect(pg_uri)  # (holds the batch's last write back, its indexes made again)
    blocker.execute("LOCK TABLE eventmem_positions IN EXCLUSIVE MODE")
    failed: list[BaseException] = []

    def write() -> None:
        try:
            projector.apply(batch)
        except psycopg.Error as exc:
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    pid = projector.conn.info.backend_pid
    deadline = time.monotonic() + 60
    while not conn.execute(
        "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'", [pid]
    ).fetchone():
        conn.rollback()
        assert time.monotonic() < deadline, "the batch never reached the positions"
        time.sleep(0.05)
    conn.rollback()
    conn.execute("SET lock_timeout = '5s'")  # (the batch's rows and postings are written, not committed)
    assert conn.execute("SELECT count(*) FROM eventmem_memories WHERE project = 'p'").fetchone()[0] > 0
    assert (
        conn.execute(
            "SELECT count(*) FROM eventmem_postings e JOIN eventmem_projects p ON p.no = e.project "
            "WHERE p.project = 'p'"
        ).fetchone()[0]
        > 0
    )
    conn.rollback()
    conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    conn.commit()
    writer.join(timeout=60)
    blocker.close()
    assert failed and isinstance(failed[0], psycopg.OperationalError)
    assert _index_definitions(conn) == indexes
    for _ in history:
        pass
    again = projector_factory("p")
    ProjectSync(again, project).start()
    projector_factory("rebuilt").load(JournalFeed(project).full())
    assert answers(conn, "p") == answers(conn, "rebuilt")
    assert _index_definitions(conn) == indexes


def test_resuming_from_the_committed_position_answers_like_a_rebuild(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    history = steps(service)
    next(history)
    next(history)
    first = ProjectSync(projector_factory("resumed"), project)
    assert first.start() > 0
    first.projector.close()
    for _ in history:
        pass
    again = projector_factory("resumed")
    assert again.restore(None)
    taken = ProjectSync(again, project).start()
    assert 0 < taken < len(JournalFeed(project).full().events)  # only the tail was read on from
    projector_factory("rebuilt").load(JournalFeed(project).full())
    assert answers(conn, "resumed") == answers(conn, "rebuilt")


def test_reset_forgets_the_journal_and_restore_then_says_so(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    projector = projector_factory("p")
    service.save("Something worth keeping.", title="kept")
    projector.load(JournalFeed(project).full())
    assert projector.restore(None)
    assert projector.snapshot() is None
    projector.reset()
    assert projector.position() is None
    assert not projector.restore(None)
    assert queries.matching(conn, ("p",), Filters(), NOW) == []
    assert projector.event_ids() == set()


def test_a_line_with_a_nul_character_is_kept_exactly(project: Path, projector_factory: Factory, conn: Any) -> None:
    segment = project / ".eventmem" / "journal" / "hostile.main.jsonl"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(
        b'{"type":"saved","id":"01J0000000000000000000000A","ts":"2026-01-01T00:00:00Z","memory":"m1",'
        b'"title":"nul\\u0000title","content":"a\\u0000b ruff","tags":["x\\u0000y"]}\n'
        b"not json at all\n"
    )
    projector = projector_factory("p")
    feed = JournalFeed(project)
    projector.load(feed.full())
    record = projector.record("m1")
    assert record is not None
    assert record == feed.state.memories["m1"]
    assert record.content == "a\x00b ruff"
    assert [key for key, _ in queries.keyword_hits(conn, ("p",), "ruff", 5, Filters(), NOW)] == [("p", "m1")]


def test_the_schema_migrates_from_empty_and_from_the_previous_version(pg_uri: str) -> None:
    with psycopg.connect(pg_uri) as conn:
        assert applied_version(conn) == 0
        assert migrate(conn, target=2) == 2
        insert = (
            "INSERT INTO eventmem_memories (project, id, branch, kind, scope, title, content, summary, tags, "
            "importance, origin_project, created_at, updated_at, created_by, updated_by, expires_at, "
            "superseded, archived, event_count, record) VALUES ('p', %s, 'main', 'general', 'project', "
            "'ruff', 'lint rules', '', '{}', 0.5, '', 0, 0, '', '', 'Infinity', false, false, 1, '')"
        )
        with conn.transaction():
            conn.execute("INSERT INTO eventmem_projects VALUES ('p', '', 'main', 1)")
            conn.execute(insert, ["m1"])
        assert migrate(conn, target=3) == 3
        # rows written before version 3 hold no keyword statistics: dropped, the next sync projects them again
        assert queries.matching(conn, ("p",), Filters(), NOW) == []
        assert conn.execute("SELECT count(*) FROM eventmem_projects").fetchone() == (0,)
        with conn.transaction():  # (a row of version 3, with its keyword columns)
            conn.execute(
                "INSERT INTO eventmem_projects (project, root, branch, projector_version, memories, tokens) "
                "VALUES ('p', '', 'main', 1, 1, 3)"
            )
            conn.execute(insert, ["m2"])
            conn.execute("UPDATE eventmem_memories SET tokens = 3, stems = '{ruff,lint,rule}', freqs = '{10,1,1}'")
        assert migrate(conn) == LATEST
        assert migrate(conn) == LATEST  # (again: nothing to do)
        assert applied_version(conn) == LATEST
        # version 4 makes the keyword postings of the rows held from their stems
        assert [key for key, _ in queries.keyword_hits(conn, ("p",), "ruff", 5, Filters(), NOW)] == [("p", "m2")]
        # version 9 names them by the project's number and the memory's
        number = conn.execute("SELECT no FROM eventmem_projects WHERE project = 'p'").fetchone()[0]
        postings = conn.execute("SELECT project, stem, memory, freq, tokens FROM eventmem_postings ORDER BY 2")
        assert postings.fetchall() == [
            (number, s, memory_number("m2"), f, 3) for s, f in (("lint", 1), ("ruff", 10), ("rule", 1))
        ]
        # version 10 counts the lasting memories held by type and scope, and by tag
        lasting = conn.execute("SELECT project, kind, scope, memories FROM eventmem_lasting_kinds").fetchall()
        assert lasting == [("p", "general", "project", 1)]
        with conn.transaction():  # (and a project's go with it)
            conn.execute("DELETE FROM eventmem_projects")
        assert conn.execute("SELECT count(*) FROM eventmem_postings").fetchone() == (0,)
        assert conn.execute("SELECT sum(memories) FROM eventmem_lasting_kinds").fetchone() == (0,)


def test_a_memory_has_the_same_number_in_the_database_as_the_sync_gives_its_postings(conn: Any) -> None:
    migrate(conn)
    ids = ["01JABCDEFGHJKMNPQRSTVWXYZ0", "m1", "section:project", "émigré", "a\u2603b\U0001f600", "x" * 500, " "]
    numbers = conn.execute("SELECT eventmem_memory_number(i) FROM unnest(%s::text[]) AS i", [ids]).fetchall()
    assert [n for (n,) in numbers] == [memory_number(i) for i in ids]
    assert len({memory_number(i) for i in ids}) == len(ids)


def test_keyword_hits_tied_past_the_kth_are_broken_by_id_as_in_process(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """(the postings name memories by number, in no order of their ids: the list returns the hits
    tied with its last one too, and the tie breaks by id, as the in-process index breaks it by the
    order of saving)"""
    saved = [service.save(f"a note {word} on caching", title="caching").id for word in "bcdfghj"]
    better = service.save("caching caching caching, a better note on caching", title="caching").id
    projector_factory("p").load(JournalFeed(project).full())
    for k in (1, 3, 7, 8):
        hits = [key[1] for key, _ in queries.keyword_hits(conn, ("p",), "caching", k, Filters(), NOW)]
        assert hits[0] == better and hits[1:] == sorted(saved)[: k - 1], k
    # (the numbers of the tied memories are in another order than their ids: else the test proves nothing)
    assert sorted(saved, key=memory_number) != sorted(saved)


def test_a_projector_of_another_embedder_is_refused(pg_uri: str, projector_factory: Factory) -> None:
    projector_factory("p")
    with psycopg.connect(pg_uri) as conn, pytest.raises(InvalidInput, match="holds vectors of the embedder"):
        PostgresProjector(conn, "p", HashingEmbedder(version=2))


def test_vector_answers_equal_the_in_process_ones(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    embedder = HashingEmbedder()
    for text in ("ruff lint", "database migrations", "flaky watcher test", "deploy on friday"):
        expected = service.search(text, mode="vector", limit=5)
        got = database_search.hybrid(conn, ("p",), embedder, text, 5, Filters(), use_keywords=False)
        assert [h.id for h in got] == [h.id for h in expected], text
        # (the service shows scores rounded, and both rank by recency as of their own now)
        assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-3), text


def test_a_batch_reaches_the_position_it_names(
    project: Path, service: MemoryService, projector_factory: Factory
) -> None:
    projector = projector_factory("p")
    assert projector.position() is None
    service.save("First.", title="first")
    feed = JournalFeed(project)
    projector.load(feed.full())
    assert projector.position() == feed.position()
    service.save("Second.", title="second")
    batch = feed.tail()
    assert isinstance(batch, Batch)
    projector.apply(batch)
    assert projector.position() == batch.position == feed.position()


def test_an_awaited_event_arriving_later_projects_the_journal_again(
    project: Path, projector_factory: Factory, conn: Any
) -> None:
    journal = project / ".eventmem" / "journal"
    journal.mkdir(parents=True)
    saved = MemorySaved(id="01J0000000000000000000000A", ts="2026-01-01T00:00:00Z", memory="m1", content="ruff lint")
    middle = MemoryUpdated(
        id="01J0000000000000000000000B", ts="2026-01-03T00:00:00Z", memory="m1", title="middle", prev=saved.id
    )
    last = MemoryUpdated(
        id="01J0000000000000000000000C", ts="2026-01-02T00:00:00Z", memory="m1", title="last", prev=middle.id
    )
    (journal / "one.main.jsonl").write_bytes(encode_event(saved) + encode_event(last))
    sync = ProjectSync(projector_factory("p"), project)
    sync.start()
    (journal / "two.other.jsonl").write_bytes(encode_event(middle))  # (a branch merged in)
    sync.catch_up()
    record = sync.projector.record("m1")  # type: ignore[attr-defined]  (a PostgresProjector)
    assert record is not None
    assert record.title == "last"  # it named "middle" as its prev: it comes after, whatever the clock said
    projector_factory("rebuilt").load(JournalFeed(project).full())
    assert answers(conn, "p") == answers(conn, "rebuilt")


def test_a_segment_whose_name_is_not_utf8_is_projected_and_resumed(
    project: Path, projector_factory: Factory, conn: Any
) -> None:
    journal = project / ".eventmem" / "journal"
    journal.mkdir(parents=True)
    saved = MemorySaved(id="01J0000000000000000000000A", ts="2026-01-01T00:00:00Z", memory="m1", content="ruff lint")
    with open(os.fsencode(journal) + b"/odd\xff.main.jsonl", "wb") as handle:
        handle.write(encode_event(saved))
    assert ProjectSync(projector_factory("p"), project).start() == 1
    assert ProjectSync(projector_factory("p"), project).start() == 0  # (resumed: nothing new)
    assert queries.matching(conn, ("p",), Filters(), NOW) == [("p", "m1")]


def test_an_hnsw_search_for_a_hybrids_depth_explores_more_candidates_than_for_a_top_ten(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    vector = HashingEmbedder().embed(["ruff lint"])[0]
    explored = {}
    for depth in (10, 50, 5000):
        with conn.transaction():  # (the setting holds for the search's transaction only)
            hits = queries.vector_hits(conn, ("p",), vector, depth, Filters(), exact=False)
            explored[depth] = int(conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0])
        assert hits and hits == queries.vector_hits(conn, ("p",), vector, depth, Filters(), exact=True)
    assert explored[10] >= 400  # (recall@10 0.72 at 200, 0.81 at 400, at 100,000 hashing vectors)
    assert explored[10] < explored[50] <= explored[5000] == 1000  # (pgvector's bound)


def test_hnsw_searches_asked_again_and_again_on_one_connection_keep_answering(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """(psycopg prepares a statement run five times: the HNSW settings must be one statement, and
    one that a pipeline can send, as a recall from ``serve --store`` does)."""
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    vector = HashingEmbedder().embed(["ruff lint"])[0]
    exact = queries.vector_hits(conn, ("p",), vector, 10, Filters(), exact=True)
    for _ in range(8):
        assert queries.vector_hits(conn, ("p",), vector, 10, Filters(), exact=False) == exact
        with conn.pipeline():
            setting, sql, values = queries.vector_query(("p",), vector, 10, Filters(), None, exact=False)
            conn.execute(*setting)
            found = conn.execute(sql, values)
        assert [row[0] for row in queries.vector_rows_of(found.fetchall())] == [key for key, _ in exact]


def test_an_hnsw_search_goes_through_the_index_even_when_a_sort_looks_cheaper(
    service: MemoryService, project: Path, pg_uri: str, conn: Any
) -> None:
    for _ in steps(service):
        pass
    model = LearnedModel()  # (a learned model's vectors are searched through its graph of the narrow copies)
    projector = PostgresProjector(psycopg.connect(pg_uri), "p", model, branch="main")
    projector.load(JournalFeed(project).full())
    projector.close()
    vector = model.embed(["ruff lint"])[0]
    with conn.transaction():
        setting, sql, values = queries.vector_query(
            ("p",), vector, 50, Filters(), None, exact=False, model=model.model_id
        )
        conn.execute(*setting)
        plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, values).fetchall())
        conn.execute(queries.SORTING_BACK)
        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)
    assert "eventmem_searched_hnsw" in plan, plan


def test_the_keyword_list_whose_words_sql_chooses_ranks_as_the_one_whose_words_python_chooses(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """(a recall from ``serve --store`` sends its keyword list without reading the statistics first:
    the words are chosen in SQL, rarest first within the postings budget, as in-process)"""
    for n in range(300):  # ("common" held by 300 memories: past the budget beside vectors, 250)
        extra = " rare" if n % 50 == 0 else ""
        kind = "decision" if n % 3 == 0 else "general"
        service.save(f"common note {n} about caching{extra}", title=f"note {n % 7}", kind=kind, tags=[f"t{n % 4}"])
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    texts = [
        "common caching rare",
        "rare common",
        "the common note about caching",
        "the of and",
        "ruff lint ruff",
        "line_length ruff",
        "Über naïve café common",
        "no such word here",
        "note 3",
    ]
    for filters in (Filters(), Filters(tags=("t1",)), Filters(kinds=("decision",))):
        where, params = queries.visible_where(["p"], filters, NOW)
        for text in texts:
            for beside in (False, True):
                expected = keywords.ranked(conn, "p", text, 50, where, params, beside_vectors=beside)
                query = keywords.ranking_at_once("p", text, 50, where, params, beside_vectors=beside)
                assert query is not None, text
                assert keywords.rows_of(conn.execute(*query).fetchall(), 50) == expected, (text, filters, beside)
    assert keywords.ranking_at_once("p", "parse_config_file", 50, "true", []) is None  # (a phrase of three)


def test_a_question_asking_one_common_word_scores_its_postings_once_without_grouping_them_and_as_in_process(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """(past the postings budget only the rarest word is asked: its holders have one posting each, so
    they are scored as they are read and not summed by memory; several words are still summed)"""
    for n in range(400):
        words = " ".join(["caching"] * (1 + n % 4)) + " filler" * (n % 9)
        extra = (" rare" if n % 50 == 0 else "") + (" odd" if n % 40 == 0 else "")
        service.save(f"{words} note {n} on widgets{extra}", title=f"note {n % 7}", tags=[f"t{n % 4}"])
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    derived = service.project.derived
    where, params = queries.visible_where(["p"], Filters(), NOW)
    for text, alone in (("caching", True), ("how is caching done with filler", True), ("rare odd caching", False)):
        stats = keywords.statistics(conn, "p", text)
        asked = query_words(
            text, lambda w, counts=stats.frequency: counts.get(w, 0), stats.memories, beside_vectors=True
        )
        assert (len(asked) == 1) == alone, asked
        found = derived.keywords.index.search(text, 30, beside_vectors=True)
        expected = [(derived.table.ids[slot], score) for slot, score in found]
        for query in (
            keywords.ranking(conn, "p", text, 30, where, params, beside_vectors=True),
            keywords.ranking_at_once("p", text, 30, where, params, beside_vectors=True),
        ):
            assert query is not None
            got = [(row[0], row[1]) for row in keywords.rows_of(conn.execute(*query).fetchall(), 30)]
            assert [i for i, _ in got] == [i for i, _ in expected], text
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9), text
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query[0], query[1]).fetchone()[0]
            summed = sum(
                node["Actual Rows"]
                for node in _plan_nodes(plan[0]["Plan"])
                if node["Node Type"] == "Aggregate" and node.get("Strategy") == "Sorted"
            )
            assert (summed == 0) == alone, (text, summed)


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


@pytest.mark.parametrize("bound", [2, 2_000], ids=["past the exact bound: HNSW", "within it: exact"])
def test_a_vector_list_counts_the_memories_its_filter_passes_and_answers_as_the_exact_scan(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    monkeypatch: pytest.MonkeyPatch,
    bound: int,
) -> None:
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    monkeypatch.setattr(queries, "EXACT_UP_TO", bound)
    monkeypatch.setattr(queries, "SCANNED_UP_TO", bound)
    vector = HashingEmbedder().embed(["ruff lint migrations"])[0]
    for filters in (Filters(), Filters(tags=("tooling",)), Filters(kinds=("decision", "general", "problem"))):
        exact = queries.vector_hits(conn, ("p",), vector, 10, filters, NOW, exact=True)
        passing = queries.count(conn, ("p",), filters, NOW)
        with conn.transaction():
            setting, sql, values = queries.counted_vector_query(("p",), vector, 10, filters, NOW)
            conn.execute(*setting)
            rows, searched = queries.counted_rows_of(conn.execute(sql, values).fetchall())
            conn.execute(queries.SORTING_BACK)
        assert [(key, pytest.approx(c)) for key, c, *_ in rows] == exact, filters
        held = conn.execute("SELECT memories FROM eventmem_projects WHERE project = 'p'").fetchone()[0]
        conn.rollback()
        if queries.narrows(filters) or held <= bound:
            assert searched == min(passing, bound + 1), filters
        else:  # (HNSW over the whole project: not counted, the memories it holds instead)
            assert searched == held, filters


def _scans_of_narrow_copies(node: dict[str, Any], under: str = "") -> list[tuple[str, int]]:
    """(the common table expression it is under, loops run) of each scan of the narrow copies in a
    plan (``EXPLAIN (ANALYZE, FORMAT JSON)``)."""
    under = node.get("Subplan Name") or under
    found = [(under, int(node["Actual Loops"]))] if node.get("Relation Name") == "eventmem_searched" else []
    for child in node.get("Plans", []):
        found += _scans_of_narrow_copies(child, under)
    return found


@pytest.mark.parametrize(
    "filters",
    [Filters(kinds=("decision", "general")), Filters(scope="project"), Filters(tags=("tooling",))],
    ids=["types", "a scope", "a tag"],
)
def test_a_filters_rows_are_read_once_and_not_at_all_when_its_lasting_memories_pass_the_scan_bound(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    monkeypatch: pytest.MonkeyPatch,
    filters: Filters,
) -> None:
    for _ in steps(service):
        pass
    projector_factory("p").load(JournalFeed(project).full())
    vector = HashingEmbedder().embed(["ruff lint migrations"])[0]

    def searched(bound: int, counts: bool) -> tuple[list[Any], int, list[tuple[str, int]]]:
        monkeypatch.setattr(queries, "SCANNED_UP_TO", bound)
        if not counts:
            monkeypatch.setattr(queries, "lasting_count", lambda *_, **__: None)
        with conn.transaction(force_rollback=True):
            setting, sql, values = queries.counted_vector_query(("p",), vector, 10, filters, NOW)
            conn.execute(*setting)
            rows, passing = queries.counted_rows_of(conn.execute(sql, values).fetchall())
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, values).fetchone()[0][0]["Plan"]
        monkeypatch.undo()
        return rows, passing, _scans_of_narrow_copies(plan)

    lasting_sql = queries.lasting_count(("p",), filters)
    assert lasting_sql is not None
    lasting = conn.execute(*lasting_sql).fetchone()[0]
    conn.rollback()
    assert lasting in (1, 2, 3)
    for bound in (0, 1, 2, 3, 2_000):  # (fewer lasting memories than that, as many, more)
        rows, passing, scans = searched(bound, counts=True)
        assert (rows, passing) == searched(bound, counts=False)[:2], bound
        read = [(under, loops) for under, loops in scans if loops]
        assert read == ([] if lasting > bound else [("CTE f", 1)]), (bound, scans)
    assert queries.lasting_count(("p",), Filters(tags=("a", "b"))) is None  # (two tags: no lower bound kept)
    assert queries.lasting_count(("p",), Filters(kinds=("decision",), min_importance=0.5)) is None


def test_a_filter_passing_more_memories_than_the_scan_bound_but_fewer_lasting_ones_goes_to_the_vector_index(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(the triggers count one lasting memory, under the bound; the rows read show seven, over it)"""
    service.save("a lasting note about caching", title="kept", tags=["cache"])
    for n in range(6):
        service.save(f"note {n} about caching the build", title=f"note {n}", tags=["cache"], ttl_seconds=7200)
    projector_factory("p").load(JournalFeed(project).full())
    monkeypatch.setattr(queries, "SCANNED_UP_TO", 3)
    filters = Filters(tags=("cache",))
    vector = HashingEmbedder().embed(["caching the build"])[0]
    now = time.time()
    exact = queries.vector_hits(conn, ("p",), vector, 10, filters, now, exact=True)
    assert len(exact) == 7
    lasting_sql = queries.lasting_count(("p",), filters)
    assert lasting_sql is not None
    with conn.transaction(force_rollback=True):
        lasting = conn.execute(*lasting_sql).fetchone()[0]
        setting, sql, values = queries.counted_vector_query(("p",), vector, 10, filters, now)
        conn.execute(*setting)
        rows, searched = queries.counted_rows_of(conn.execute(sql, values).fetchall())
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, values).fetchone()[0][0]["Plan"]
    assert lasting == 1 and searched == 4  # (read up to one more than the bound, then the index)
    assert [(key, pytest.approx(c)) for key, c, *_ in rows] == exact
    assert [under for under, loops in _scans_of_narrow_copies(plan) if loops] == ["CTE f"]


def _copy_stream_rows(data: bytes) -> list[list[bytes]]:
    """The fields of each row of a binary COPY stream of the postings' five columns, read to its trailer."""
    assert data.startswith(b"PGCOPY\n\xff\r\n\x00") and data.endswith(b"\xff\xff")
    rows, at = [], 19  # (the signature, the flags and the header's length)
    while data[at : at + 2] != b"\xff\xff":
        assert int.from_bytes(data[at : at + 2], "big") == 5
        at += 2
        fields = []
        for _ in range(5):
            size = int.from_bytes(data[at : at + 4], "big")
            fields.append(data[at + 4 : at + 4 + size])
            at += 4 + size
        rows.append(fields)
    assert at + 2 == len(data)
    return rows


def _copied_postings(data: bytes) -> list[tuple[str, int, str]]:
    """(stem, memory number, freq bytes) of each row of a binary COPY stream of the postings' columns."""
    rows = []
    for project, number, _tokens, stem, freq in _copy_stream_rows(data):
        assert int.from_bytes(project, "big") == 7
        rows.append((stem.decode(), int.from_bytes(number, "big", signed=True), freq.hex()))
    return rows


def test_postings_sent_in_key_order_are_the_same_rows_in_the_keys_order() -> None:
    memories = [
        ("m2", 3, ["zeta", "alpha", "émigré"], [1.0, 2.0, 0.5]),
        ("m1", 4, ["alpha", "beta", "Zulu"], [3.0, 1.0, 1.0]),
        ("m10", 2, ["beta", "alpha"], [1.0, 1.0]),
    ]
    plain = [  # (each memory's postings as it holds them)
        (stem, memory_number(i), struct.pack(">f", freq).hex())
        for i, _tokens, stems, freqs in memories
        for stem, freq in zip(stems, freqs, strict=True)
    ]
    ordered = _copied_postings(postings_data(7, iter(memories)))
    assert sorted(plain) == sorted(ordered) and len(plain) == 8
    # (stems by code point, as Python orders strings and COLLATE "C" orders UTF-8: upper case first;
    # then the memories' numbers)
    assert [(s.encode(), n) for s, n, _ in ordered] == sorted((s.encode(), n) for s, n, _ in plain)
    assert ordered[0][:2] == ("Zulu", memory_number("m1")) and ordered[-1][:2] == ("émigré", memory_number("m2"))
    assert {n for _, n, _ in plain} == {memory_number(i) for i, *_ in memories}


def _narrow_updates(pg_uri: str) -> tuple[int, int]:
    """(rows updated, of them heap-only) in eventmem_searched since the database was made, as far as
    the writers' counts have reached the statistics (a writer flushes them when idle)."""
    with psycopg.connect(pg_uri, autocommit=True) as reader:
        reader.execute("SELECT pg_stat_clear_snapshot()")
        row = reader.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'eventmem_searched'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.parametrize("index_rebuilt", [False, True], ids=["indexes kept", "indexes made again by the load"])
def test_a_memorys_new_importance_time_to_live_or_promotion_rewrites_its_narrow_copy_in_its_page_and_no_index(
    service: MemoryService,
    project: Path,
    projector_factory: Factory,
    conn: Any,
    pg_uri: str,
    index_rebuilt: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(a heap-only tuple: the semantic part's HNSW graph took about a millisecond a row, and an update
    of 2,000 importances 14-15 s at 20,000 memories; the rows must stay what a load makes)"""
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 1 if index_rebuilt else 10**9)
    saved = [
        service.save(
            f"note {n} about caching the build", title=f"note {n}", tags=["cache", f"t{n % 3}"], ttl_seconds=7200
        )
        for n in range(40)
    ]
    projector = projector_factory("p")
    feed = JournalFeed(project)
    projector.load(feed.full())

    def counted(write: Callable[[], object], writer: Any) -> tuple[int, int]:
        """The narrow copies ``write`` updated on ``writer``'s connection, and of them in their page."""
        before = _narrow_updates(pg_uri)
        write()
        writer.execute("SELECT pg_stat_force_next_flush()")
        writer.commit()  # (its counts flushed once its connection is idle)
        deadline = time.monotonic() + 10
        while (after := _narrow_updates(pg_uri))[0] == before[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        return after[0] - before[0], after[1] - before[1]

    def applied() -> tuple[int, int]:
        batch = feed.tail()
        assert batch is not None
        return counted(lambda: projector.apply(batch), projector.conn)

    # (one change a batch, as ``sync --follow`` takes a save at a time: a page keeps room for one more
    # version of a row, made free again once the version before it is dead)
    changes: list[Callable[[], object]] = [
        *(lambda m=m: service.update(m.id, importance=0.9) for m in saved[:8]),
        *(lambda m=m: service.update(m.id, ttl_seconds=600) for m in saved[8:16]),
        *(lambda m=m: service.promote(m.id) for m in saved[16:24]),
    ]
    for change in changes:
        change()
        assert applied() == (1, 1)  # (in its page)
    service.update(saved[30].id, tags=["cache", "renamed"])
    assert applied() == (1, 0)  # (new tags: the tags' index gets the row again, and so does every index)
    projector_factory("rebuilt").load(JournalFeed(project).full())
    assert _contents(conn, "p") == _contents(conn, "rebuilt")
    # the triggers keep the narrow copies whatever writes the memories: a statement of another writer too,
    # whose equal tags array was not stored the same byte for byte (never in its page before schema 8)
    update = "UPDATE eventmem_memories SET importance = 0.25 WHERE project = 'p' AND id = %s"
    for memory in saved[32:36]:
        assert counted(lambda memory=memory: conn.execute(update, [memory.id]), conn) == (1, 1)


def test_a_batch_keeping_a_memorys_texts_keeps_its_postings_unless_the_keyword_code_now_makes_others(
    service: MemoryService, project: Path, projector_factory: Factory, conn: Any
) -> None:
    """(a batch removes the postings of the memories whose texts changed before their keyword rows are
    made; one whose texts are as they were keeps its postings, checked against its new keyword rows)"""
    kept, older, nul = (
        service.save(f"{topic} is cached between builds.", title=topic, tags=["build"])
        for topic in ("the wheel", "the lock file", "the \x00 archive")
    )
    projector = projector_factory("p")
    feed = JournalFeed(project)
    projector.load(feed.full())
    # (``older`` as a sync of another keyword code left it: one stem more in its row and its postings)
    with conn.transaction():
        conn.execute(
            "UPDATE eventmem_memories SET stems = stems || ARRAY['olden'], freqs = freqs || ARRAY[1::real] "
            "WHERE project = 'p' AND id = %s",
            [older.id],
        )
        conn.execute(
            "INSERT INTO eventmem_postings (project, memory, tokens, stem, freq) SELECT p.no, %s, m.tokens, "
            "'olden', 1 FROM eventmem_projects p JOIN eventmem_memories m ON m.project = p.project "
            "WHERE p.project = 'p' AND m.id = %s",
            [memory_number(older.id), older.id],
        )

    def written(memory_id: str) -> set[str]:
        """The transactions that wrote the memory's postings."""
        with conn.transaction():
            rows = conn.execute(
                "SELECT DISTINCT xmin::text FROM eventmem_postings WHERE memory = %s", [memory_number(memory_id)]
            ).fetchall()
        return {str(r[0]) for r in rows}

    before = {m.id: written(m.id) for m in (kept, older, nul)}
    for memory in (kept, older, nul):
        service.update(memory.id, importance=0.9)
    service.update(kept.id, content="the wheel is cached between builds, by its hash.")
    service.update(kept.id, content="the wheel is cached between builds.")  # (the texts as they were)
    batch = feed.tail()
    assert batch is not None
    projector.apply(batch)
    assert written(kept.id) == before[kept.id] and written(nul.id) == before[nul.id]
    assert written(older.id) != before[older.id]
    projector_factory("rebuilt").load(JournalFeed(project).full())
    after, rebuilt = _contents(conn, "p"), _contents(conn, "rebuilt")
    assert after == rebuilt and after["postings"] == after["postings of the rows"]
    assert not any(stem == "olden" for stem, *_ in after["postings"])


def test_postings_made_at_once_are_each_memorys_own_fields_row_by_row_in_the_keys_order() -> None:
    rng = random.Random(11)
    alphabet = ["a", "b", "z", "Z", "é", "ß", "Ω", "𝔘", " ", "0"]
    memories = []
    for n in range(60):
        stems = list(dict.fromkeys("".join(rng.choices(alphabet, k=rng.choice([1, 3, 9, 300]))) for _ in range(8)))
        stems = stems[: rng.randrange(len(stems) + 1)]  # (some memories hold no stem)
        memories.append((f"m{n}", rng.randrange(10_000), stems, [float(rng.randrange(1, 40)) for _ in stems]))
    rows = [
        (
            int.from_bytes(project, "big", signed=True),
            int.from_bytes(number, "big", signed=True),
            int.from_bytes(tokens, "big", signed=True),
            stem.decode(),
            struct.unpack(">f", freq)[0],
        )
        for project, number, tokens, stem, freq in _copy_stream_rows(postings_data(-3, memories))
    ]
    expected = sorted(
        (
            (-3, memory_number(i), tokens, stem, freq)
            for i, tokens, stems, freqs in memories
            for stem, freq in zip(stems, freqs, strict=True)
        ),
        key=lambda row: (row[3].encode(), row[1]),
    )
    assert rows == expected and len(rows) > 100
    assert (
        postings_data(-3, [])
        == postings_data(-3, [("m", 1, [], [])])
        == b"PGCOPY\n\xff\r\n\x00" + bytes(8) + b"\xff\xff"
    )
