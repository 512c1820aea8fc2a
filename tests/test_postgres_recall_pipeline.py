"""A recall from PostgreSQL spends less of its time waiting: the keyword list runs in the server
while a model embeds the query (its hits' cosines asked once the vector is known, with the same
answers; the built-in embedder's vector, made in less than a round trip, is made first), a question
asked again through ``serve --store`` takes its vector from the store's cache instead of the model,
and a learned model's vectors are searched through HNSW with fewer candidates than the built-in
embedder's near-random ones, and the built-in embedder's through an inverted file of their semantic
part, their candidates ranked by the whole vector."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from embedding_standins import StandIn
from embedding_standins import serve as serve_embeddings
from mcp_client import serve, server_env
from pg_answers import NOW
from test_postgres_serve import recall, store
from test_postgres_sync import new_project

from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.journal.config import Config
from eventmem.projectors.postgres import projector as projector_module
from eventmem.projectors.postgres import queries
from eventmem.projectors.postgres import vector_index as vector_index_module
from eventmem.projectors.postgres.projector import PostgresProjector
from eventmem.projectors.postgres.runner import SyncRunner
from eventmem.projectors.postgres.sync import JournalFeed, ProjectSync
from eventmem.projectors.postgres.targets import Target
from eventmem.service import MemoryService, database_search
from eventmem.service.search import hybrid_search

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
DEADLINE_S = 30.0
TEXTS = ("common caching rare", "note 3 about caching", "ruff lint", "rare", "no such word here")


@pytest.fixture
def loaded(service: MemoryService, project: Path, pg_uri: str) -> Iterator[Any]:
    """A project of 300 notes sharing words (so that the keyword list reaches memories the vector
    list's top 50 does not) projected into the database; a connection to it."""
    for n in range(300):
        extra = " rare" if n % 50 == 0 else ""
        service.save(f"common note {n} about caching{extra}", title=f"note {n % 7}", tags=[f"t{n % 4}"])
    with psycopg.connect(pg_uri) as conn:
        projector = PostgresProjector(psycopg.connect(pg_uri), "p", HashingEmbedder(), branch="main")
        projector.load(JournalFeed(project).full())
        projector.close()
        yield conn


class LearnedModel(HashingEmbedder):
    """The built-in embedder's vectors under a learned model's name: a recall treats it as a model
    (the database holds the built-in embedder's vectors, so the answers can be compared)."""

    @property
    def model_id(self) -> str:
        return "minilm-standin-384"


def _statement_of(watcher: Any, pid: int) -> str:
    row = watcher.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return str(row[0]) if row is not None else ""


def _before_this_change(
    conn: Any, text: str, filters: Filters, embedder: HashingEmbedder
) -> list[tuple[str, float, float, float]]:
    """The recall as it was asked before: the query embedded first, then each list fetched when the
    fusion asks for it, the keyword list with its hits' cosines in its own statement."""
    vector = embedder.embed([text])[0]
    with conn.transaction():
        view = database_search.DatabaseView(conn, "p", embedder, filters, NOW, None, None, vector)
        searched = queries.count(conn, ("p",), filters, NOW, up_to=database_search.BOUND)
        scored = hybrid_search(view, text, 10, np.ones(searched, bool), Config(), now=NOW)
        return [(view.id_at(s.slot), s.score, s.vector_score, s.keyword_score) for s in scored]


def _recall_watched(
    conn: Any, pg_uri: str, embedder: HashingEmbedder, text: str, filters: Filters
) -> tuple[list[tuple[str, float, float, float]], str]:
    """A recall through ``database_search.hybrid``, and what its connection was running in the server
    while the query was embedded (waiting up to 1 s for the keyword list to show)."""
    pid = conn.info.backend_pid
    seen: list[str] = []
    with psycopg.connect(pg_uri, autocommit=True) as watcher:

        def embed(asked: str) -> npt.NDArray[np.float32]:
            deadline = time.monotonic() + 1.0
            while "eventmem_postings" not in (statement := _statement_of(watcher, pid)):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            seen.append(statement)
            return embedder.embed([asked])[0]

        with conn.transaction():
            found = database_search.hybrid(conn, ("p",), embedder, text, 10, filters, now=NOW, embed_query=embed)
    assert len(seen) == 1
    return [(s.id, s.score, s.vector_score, s.keyword_score) for s in found], seen[0]


def test_the_keyword_list_runs_in_the_server_while_a_model_embeds_the_query_and_answers_as_before(
    loaded: Any, pg_uri: str
) -> None:
    for filters in (Filters(), Filters(tags=("t1",))):
        for text in TEXTS:
            got, running = _recall_watched(loaded, pg_uri, LearnedModel(), text, filters)
            assert "eventmem_postings" in running, (text, filters)
            assert got == _before_this_change(loaded, text, filters, LearnedModel()), (text, filters)


def test_the_built_in_embedders_vector_is_made_before_anything_is_sent_and_answers_as_before(
    loaded: Any, pg_uri: str
) -> None:
    for filters in (Filters(), Filters(tags=("t1",))):
        for text in TEXTS:
            got, running = _recall_watched(loaded, pg_uri, HashingEmbedder(), text, filters)
            assert "eventmem_postings" not in running, (text, filters)  # (no round trip spent waiting)
            assert got == _before_this_change(loaded, text, filters, HashingEmbedder()), (text, filters)


def test_a_learned_models_vectors_are_searched_through_hnsw_with_fewer_candidates_than_hashing_ones(
    loaded: Any,
) -> None:
    class Learned(HashingEmbedder):
        """The built-in vectors under a learned model's name (as a database of its vectors holds)."""

        @property
        def model_id(self) -> str:
            return "onnx-minilm-384"

    explored = {}
    for embedder in (HashingEmbedder(), Learned()):
        with loaded.transaction():  # (the setting holds for the search's transaction only)
            database_search.hybrid(loaded, ("p",), embedder, "common caching", 10, Filters(), now=NOW)
            explored[embedder.model_id] = int(loaded.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0])
    # (a hybrid's depth of 50: the built-in embedder's candidates found by their semantic part)
    assert explored == {"hashing-v4-384": 600, "onnx-minilm-384": 400}


def _asked(standin: StandIn, text: str) -> int:
    """The requests that asked the stand-in for the vector of ``text`` alone (a query)."""
    with standin.lock:
        return sum(1 for body in standin.requests if body["input"] in (text, [text]))


async def test_a_question_asked_again_through_serve_store_is_not_embedded_again(tmp_path: Path, pg_uri: str) -> None:
    import anyio

    root = new_project(tmp_path, "alpha")
    question = "which compiler version is pinned"
    with serve_embeddings(StandIn()) as standin:
        spec = f"ollama:nomic-embed-text@{standin.url}"
        env = server_env(EVENTMEM_EMBEDDER=spec)
        async with serve(root, env, tmp_path / "server.log", args=["--tools", "all", "--store", pg_uri]) as session:
            await session.initialize()
            await store(session, "Alpha pins the compiler to version 17.", "compiler pin")
            deadline = time.monotonic() + DEADLINE_S
            while True:  # (until the saved memory has its vector: the recall then embeds its query)
                hits = (await recall(session, question))["results"]
                if hits and hits[0]["vector_score"] > 0:
                    break
                assert time.monotonic() < deadline, "the memory's vector never came"
                await anyio.sleep(0.2)
            embedded = _asked(standin, question)
            assert embedded >= 1
            again = (await recall(session, question))["results"]
            assert _asked(standin, question) == embedded  # (from the cache of the last questions' vectors)
            assert [(h["id"], h["score"]) for h in again] == [(h["id"], h["score"]) for h in hits]
            await recall(session, "another question entirely")
            assert _asked(standin, "another question entirely") == 1


def _plan(conn: Any, vector: npt.NDArray[np.float32], filters: Filters, model: str) -> str:
    with conn.transaction():
        setting, sql, values = queries.vector_query(("p",), vector, 50, filters, NOW, exact=False, model=model)
        conn.execute(*setting)
        plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, values).fetchall())
        conn.execute(queries.SORTING_BACK)
    return plan


def test_the_built_in_embedders_vectors_past_the_exact_bounds_are_found_by_their_semantic_part_and_ranked_exactly(
    loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = HashingEmbedder()
    filters_asked = (Filters(), Filters(tags=("t1",)), Filters(scope="project"))
    exact_recalls = {
        (text, filters): database_search.hybrid(loaded, ("p",), embedder, text, 10, filters, now=NOW)
        for text in TEXTS
        for filters in filters_asked
    }
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)  # (300 memories: past both bounds, HNSW)
    monkeypatch.setattr(queries, "SCANNED_UP_TO", 2)
    for filters in filters_asked:
        for text in TEXTS:
            vector = embedder.embed([text])[0]
            hits = queries.vector_hits(loaded, ("p",), vector, 50, filters, NOW, model=embedder.model_id)
            assert hits == queries.vector_hits(loaded, ("p",), vector, 50, filters, NOW, exact=True), (text, filters)
            found = database_search.hybrid(loaded, ("p",), embedder, text, 10, filters, now=NOW)
            assert found == exact_recalls[(text, filters)], (text, filters)
        plan = _plan(loaded, vector, filters, embedder.model_id)
        assert "eventmem_searched_semantic_ivf_384" in plan and "eventmem_memories_hnsw" not in plan, plan
    # and no index of the whole vectors is made: no search of the built-in embedder's vectors reads it
    names = [row[0] for row in loaded.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'eventmem_%'")]
    assert "eventmem_searched_semantic_ivf_384" in names and "eventmem_memories_hnsw_384" not in names, names


def test_the_semantic_index_is_made_again_by_a_load_and_kept_by_the_syncs_after_it(
    service: MemoryService, project: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(40):
        service.save(f"common note {n} about caching", tags=[f"t{n % 4}"])
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 10)  # (a load of 40 drops and makes the indexes)
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)
    embedder = HashingEmbedder()
    sync = ProjectSync(PostgresProjector(psycopg.connect(pg_uri), "p", embedder, branch="main"), project)
    try:
        assert sync.start() == 40
        saved = service.save("the release checklist lives in docs/releasing.md", tags=["t9"])
        assert sync.catch_up() == 1
        with psycopg.connect(pg_uri) as conn:
            valid = conn.execute(
                "SELECT i.indisvalid FROM pg_index i "
                "WHERE i.indexrelid = 'eventmem_searched_semantic_ivf_384'::regclass"
            ).fetchone()
            assert valid == (True,)
            vector = embedder.embed(["release checklist docs releasing"])[0]
            hits = queries.vector_hits(conn, ("p",), vector, 10, Filters(), NOW, model=embedder.model_id)
            assert hits == queries.vector_hits(conn, ("p",), vector, 10, Filters(), NOW, exact=True)
            assert hits[0][0] == ("p", saved.id)
    finally:
        sync.projector.close()  # type: ignore[attr-defined]


def _lists(conn: Any) -> int:
    row = conn.execute(f"SELECT {queries.SEMANTIC_LISTS}").fetchone()
    conn.commit()
    return int(row[0])


def _semantic_indexes(conn: Any) -> list[tuple[str, bool]]:
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname LIKE 'eventmem_searched_semantic%' ORDER BY 1"
    ).fetchall()
    conn.commit()
    return [(str(name), bool(valid)) for name, valid in rows]


def test_a_search_reads_the_inverted_files_lists_by_their_square_root_and_its_filters_share_and_ranks_them_exactly(
    service: MemoryService, project: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(300):
        service.save(f"common note {n} about caching", title=f"note {n % 7}", tags=[f"t{n % 4}"])
    monkeypatch.setattr(vector_index_module, "IVF_LISTS_FROM", 100)  # (300 memories: 17 lists, made by the load)
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 10)
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)
    monkeypatch.setattr(queries, "SCANNED_UP_TO", 2)
    monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT", 2)  # (of 17 lists: ceil(2 * sqrt(17)) = 9)
    monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT_FILTERED", 3)  # (a narrow filter's: ceil(3 * sqrt(17)) = 13)
    embedder = HashingEmbedder()
    projector = PostgresProjector(psycopg.connect(pg_uri), "p", embedder, branch="main")
    try:
        projector.load(JournalFeed(project).full())
    finally:
        projector.close()
    with psycopg.connect(pg_uri) as conn:
        assert _lists(conn) == 17 == vector_index_module.ivf_lists(300)
        vector = embedder.embed(["note 3 about caching"])[0]
        for filters, probes in (
            (Filters(), "9"),
            (Filters(tags=("t1",)), "13"),  # (a quarter: 2 / sqrt(0.25) = 4 lists a root, at most 3)
            (Filters(kinds=("general",)), "9"),  # (every memory: as without a filter)
            (Filters(tags=("t1", "t2")), "13"),  # (two tags: their memories not counted by the triggers)
        ):
            with conn.transaction():
                setting, sql, values = queries.vector_query(
                    ("p",), vector, 10, filters, NOW, exact=False, model=embedder.model_id
                )
                conn.execute(*setting)
                assert conn.execute("SELECT current_setting('ivfflat.probes')").fetchone() == (probes,)
                plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + sql, values).fetchall())
                assert "eventmem_searched_semantic_ivf_384" in plan, plan
                conn.execute(queries.SORTING_BACK)
            monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT", 100)  # (every list read: the exact answer)
            monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT_FILTERED", 100)
            hits = queries.vector_hits(conn, ("p",), vector, 10, filters, NOW, model=embedder.model_id)
            assert hits == queries.vector_hits(conn, ("p",), vector, 10, filters, NOW, exact=True), filters
            monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT", 2)
            monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT_FILTERED", 3)
        monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT", 0.5)  # (below the bound: 0.5 / sqrt(share) a root)
        for filters, probes in ((Filters(), "3"), (Filters(tags=("t1",)), "5"), (Filters(kinds=("general",)), "3")):
            with conn.transaction(force_rollback=True):
                setting, _, _ = queries.vector_query(
                    ("p",), vector, 10, filters, NOW, exact=False, model=embedder.model_id
                )
                conn.execute(*setting)
                assert conn.execute("SELECT current_setting('ivfflat.probes')").fetchone() == (probes,), filters


def test_the_inverted_file_is_made_again_by_a_sync_starting_on_memories_that_want_twice_its_lists(
    service: MemoryService, project: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(made over an empty database, as a project's first saves make it, it has one list; the memories
    that came since are then found by reading all of them, however many they grow to)"""
    monkeypatch.setattr(vector_index_module, "IVF_LISTS_FROM", 20)
    monkeypatch.setattr(projector_module, "BULK_INDEX_FROM", 10**9)  # (no load makes it: only the start)
    embedder = HashingEmbedder()

    def started() -> tuple[int, list[tuple[str, bool]]]:
        runner = SyncRunner(pg_uri, [Target("p", project)], embedder)
        try:
            runner.start()
        finally:
            runner.close()
        with psycopg.connect(pg_uri) as conn:
            return _lists(conn), _semantic_indexes(conn)

    for n in range(10):
        service.save(f"first note {n} about caching", tags=[f"t{n % 4}"])
    assert started() == (1, [("eventmem_searched_semantic_ivf_384", True)])
    for n in range(40):
        service.save(f"later note {n} about the release", tags=[f"t{n % 4}"])
    assert started() == (7, [("eventmem_searched_semantic_ivf_384", True)])  # (50 memories: 7 lists)
    # (a try that died midway left its index half made: the next one drops it)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(
            "CREATE INDEX eventmem_searched_semantic_ivf_384_making ON eventmem_searched "
            "USING ivfflat ((subvector(embedding, 257, 128)::halfvec(128)) halfvec_ip_ops) WITH (lists = 3)"
        )
    for n in range(150):
        service.save(f"more notes {n} about the deploy", tags=[f"t{n % 4}"])
    assert started() == (14, [("eventmem_searched_semantic_ivf_384", True)])  # (200 memories: 14 lists)
    for n in range(100):
        service.save(f"last notes {n} about the deploy", tags=[f"t{n % 4}"])
    assert started() == (14, [("eventmem_searched_semantic_ivf_384", True)])  # (300 would have 17: kept)
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # (left by a try that died after its index was made)
        conn.execute(
            "CREATE INDEX eventmem_searched_semantic_ivf_384_making ON eventmem_searched "
            "USING ivfflat ((subvector(embedding, 257, 128)::halfvec(128)) halfvec_ip_ops) WITH (lists = 17)"
        )
    assert started() == (14, [("eventmem_searched_semantic_ivf_384", True)])
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)
    monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT", 100)
    monkeypatch.setattr(queries, "IVF_PROBES_PER_ROOT_FILTERED", 100)
    with psycopg.connect(pg_uri) as conn:
        for text in ("later note 7 release", "deploy notes", "first note caching"):
            vector = embedder.embed([text])[0]
            hits = queries.vector_hits(conn, ("p",), vector, 10, Filters(), NOW, model=embedder.model_id)
            assert hits == queries.vector_hits(conn, ("p",), vector, 10, Filters(), NOW, exact=True), text


def _vector_indexes(conn: Any) -> list[str]:
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE indexdef ILIKE '%USING hnsw%' OR indexdef ILIKE '%USING ivfflat%' "
        "ORDER BY 1"
    ).fetchall()
    conn.commit()
    return [str(row[0]) for row in rows]


def test_a_database_of_a_learned_models_vectors_gets_a_graph_of_the_narrow_copies_and_no_other_vector_index(
    pg_uri: str,
) -> None:
    PostgresProjector(psycopg.connect(pg_uri), "p", LearnedModel(), branch="main").close()
    with psycopg.connect(pg_uri) as conn:
        assert _vector_indexes(conn) == ["eventmem_searched_hnsw_384"]


def _learned_answers_as_exact(conn: Any, monkeypatch: pytest.MonkeyPatch, index: str) -> None:
    """Past the exact bounds, a learned model's searches read ``index`` and, the graph holding fewer
    memories than the candidates it keeps, answer as the exact scan."""
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)
    monkeypatch.setattr(queries, "SCANNED_UP_TO", 2)
    model = LearnedModel().model_id
    for filters in (Filters(), Filters(tags=("t1",))):
        for text in TEXTS:
            vector = LearnedModel().embed([text])[0]
            hits = queries.vector_hits(conn, ("p",), vector, 10, filters, NOW, model=model)
            assert hits == queries.vector_hits(conn, ("p",), vector, 10, filters, NOW, exact=True), (text, filters)
        assert index in _plan(conn, vector, filters, model)


def test_a_learned_models_vectors_are_searched_through_the_graph_of_the_narrow_copies_as_the_exact_scan_ranks_them(
    loaded: Any, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded.execute("DELETE FROM eventmem_meta WHERE key = 'embedder'")  # (the same vectors, a model's name)
    loaded.commit()
    PostgresProjector(psycopg.connect(pg_uri), "p", LearnedModel(), branch="main").close()
    assert "eventmem_searched_hnsw_384" in _vector_indexes(loaded)
    _learned_answers_as_exact(loaded, monkeypatch, "eventmem_searched_hnsw_384")


def test_a_sync_gives_an_earlier_versions_database_of_a_learned_models_vectors_the_narrow_graph_and_drops_the_old(
    service: MemoryService, project: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(an earlier version searched them through a graph of the memories' whole vectors: the next sync's
    start makes the new one beside it, holding off no reader or writer, then drops the old; searches
    meanwhile scan the narrow copies)"""
    for n in range(300):
        service.save(f"common note {n} about caching", title=f"note {n % 7}", tags=[f"t{n % 4}"])
    projector = PostgresProjector(psycopg.connect(pg_uri), "p", LearnedModel(), branch="main")
    try:
        projector.load(JournalFeed(project).full())
    finally:
        projector.close()
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # (the database as the earlier version left it)
        conn.execute("DROP INDEX eventmem_searched_hnsw_384")
        conn.execute(
            "CREATE INDEX eventmem_memories_hnsw_384 ON eventmem_memories "
            "USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
    PostgresProjector(psycopg.connect(pg_uri), "p", LearnedModel(), branch="main").close()  # (a server's opening)
    with psycopg.connect(pg_uri) as conn:
        assert _vector_indexes(conn) == ["eventmem_memories_hnsw_384"]  # (left to the sync's start)
        _learned_answers_as_exact(conn, monkeypatch, "Seq Scan on eventmem_searched")
    runner = SyncRunner(pg_uri, [Target("p", project)], LearnedModel())
    try:
        runner.start()
    finally:
        runner.close()
    with psycopg.connect(pg_uri) as conn:
        assert _vector_indexes(conn) == ["eventmem_searched_hnsw_384"]
        _learned_answers_as_exact(conn, monkeypatch, "eventmem_searched_hnsw_384")


@pytest.mark.parametrize(
    ("index", "table", "definition"),
    [
        ("eventmem_memories_hnsw_384", "eventmem_memories", "hnsw ((embedding::vector(384)) vector_cosine_ops)"),
        (
            "eventmem_searched_semantic_384",
            "eventmem_searched",
            "hnsw ((subvector(embedding, 257, 128)::halfvec(128)) halfvec_ip_ops)",
        ),
    ],
    ids=["of the whole vectors", "of the semantic part"],
)
def test_a_sync_drops_the_graph_an_earlier_version_made_for_the_built_in_embedder(
    loaded: Any, pg_uri: str, monkeypatch: pytest.MonkeyPatch, index: str, table: str, definition: str
) -> None:
    """(no search reads it, and every row a sync writes paid for it; while a reader holds the table,
    the sync does not wait on it: the index is left to the next one)"""
    loaded.execute(f"CREATE INDEX {index} ON {table} USING {definition}")
    loaded.commit()
    monkeypatch.setattr(vector_index_module, "DROP_LOCK_WAIT", "200ms")
    with psycopg.connect(pg_uri) as reader:
        reader.execute(f"SELECT count(*) FROM {table}").fetchone()  # (its transaction holds the table)
        PostgresProjector(psycopg.connect(pg_uri), "p", HashingEmbedder(), branch="main").close()
        assert loaded.execute("SELECT to_regclass(%s)::text", [index]).fetchone() == (index,)
        loaded.commit()
    PostgresProjector(psycopg.connect(pg_uri), "p", HashingEmbedder(), branch="main").close()
    assert loaded.execute("SELECT to_regclass(%s)", [index]).fetchone() == (None,)
    loaded.commit()
    assert _semantic_indexes(loaded) == [("eventmem_searched_semantic_ivf_384", True)]
    vector = HashingEmbedder().embed(["common caching rare"])[0]
    monkeypatch.setattr(queries, "EXACT_UP_TO", 2)
    hits = queries.vector_hits(loaded, ("p",), vector, 10, Filters(), NOW, model=HashingEmbedder().model_id)
    assert hits == queries.vector_hits(loaded, ("p",), vector, 10, Filters(), NOW, exact=True)


def test_a_recalls_prepared_statements_are_planned_for_their_parameters_each_time(loaded: Any) -> None:
    """(psycopg prepares a statement on its fifth run; PostgreSQL's generic plan of a recall's
    statements, asked for its project and for the global memory, cost more than planning them)"""
    embedder = HashingEmbedder()
    for n in range(12):
        for filters in (Filters(), Filters(tags=("t1",))):
            with queries.one_read(loaded) as read:
                database_search.hybrid(loaded, ("p", "q"), embedder, f"note {n} caching", 10, filters, now=NOW)
                read.commit()
    plans = loaded.execute(  # (a statement of no parameters has only its generic plan)
        "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements WHERE parameter_types <> '{}'"
    ).fetchone()
    assert plans[0] == 0 and plans[1] > 0, plans


@contextmanager
def _recording(conn: Any) -> Iterator[list[tuple[Any, Any]]]:
    """The statements (and parameters) sent on ``conn`` within the block, as they are sent."""
    sent: list[tuple[Any, Any]] = []
    execute = conn.execute

    def recording(query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((query, params))
        return execute(query, params, **kwargs)

    conn.execute = recording
    try:
        yield sent
    finally:
        conn.execute = execute


def _recorded_statements(conn: Any, text: str, filters: Filters, embedder: HashingEmbedder) -> list[tuple[Any, Any]]:
    """The statements (and parameters) a recall sends, as it sends them."""
    with _recording(conn) as sent:
        database_search.hybrid(conn, ("p",), embedder, text, 10, filters, empty=database_search.EmptyProjects())
    return sent


def _answers_and_statements(
    conn: Any, text: str, empty: database_search.EmptyProjects | None
) -> tuple[list[tuple[str, str, float, float, float]], list[tuple[Any, Any]]]:
    """A search of projects p and q (``empty``: what it knows of projects that held nothing), its
    answers and the statements it sent."""
    with _recording(conn) as sent, queries.one_read(conn) as read:
        found = database_search.hybrid(conn, ("p", "q"), HashingEmbedder(), text, 10, Filters(), now=NOW, empty=empty)
        read.commit()
    return [(s.project, s.id, s.score, s.vector_score, s.keyword_score) for s in found], sent


def _probed(sent: list[tuple[Any, Any]]) -> list[Any]:
    """The projects each statement asking whether projects hold memories named."""
    return [params[0] for query, params in sent if query is database_search.HOLDING]


def _asking(sent: list[tuple[Any, Any]], project: str) -> list[str]:
    """The statements sent for ``project``'s lists (those naming it in their parameters)."""
    return [
        str(query)[:80]
        for query, params in sent
        if params
        and project in [v for p in params for v in (p if isinstance(p, list) else [p])]
        and query is not database_search.HOLDING
    ]


def test_a_project_that_held_nothing_is_only_asked_whether_it_holds_something_and_its_first_memories_are_found_at_once(
    loaded: Any, project: Path, pg_uri: str
) -> None:
    empty = database_search.EmptyProjects()
    for text in TEXTS:
        assert _answers_and_statements(loaded, text, empty)[0] == _answers_and_statements(loaded, text, None)[0]
    assert empty.among(["p", "q"]) == ["q"]  # (q is in no row of the database)
    found, sent = _answers_and_statements(loaded, "common caching rare", empty)
    assert _asking(sent, "p") and not _asking(sent, "q"), _asking(sent, "q")
    assert _probed(sent) == [["q"]]  # (p was seen holding memories: not asked again)
    assert {p for p, *_ in found} == {"p"}
    # another process projects memories into q: the next search finds them, as a search that never skipped it
    projector = PostgresProjector(psycopg.connect(pg_uri), "q", HashingEmbedder(), branch="main")
    projector.load(JournalFeed(project).full())
    projector.close()
    for text in TEXTS:
        got, sent = _answers_and_statements(loaded, text, empty)
        assert got == _answers_and_statements(loaded, text, None)[0], text
        assert not empty.among(["p", "q"])
    assert {p for p, *_ in got} == {"p", "q"} or not got
    found, sent = _answers_and_statements(loaded, "common caching rare", empty)
    assert {p for p, *_ in found} == {"p", "q"} and _asking(sent, "q")
    assert _probed(sent) == []  # (both seen holding memories: nothing more to ask)
    # a project seen holding memories is searched in full from then on: emptied, it answers nothing
    with loaded.transaction():
        loaded.execute("DELETE FROM eventmem_projects WHERE project = 'q'")
    found, sent = _answers_and_statements(loaded, "common caching rare", empty)
    assert {p for p, *_ in found} == {"p"} and _asking(sent, "q") and _probed(sent) == []


def test_a_project_skipped_for_holding_nothing_is_always_asked_again_whatever_order_answers_came_in() -> None:
    # (two searches at once: the one that read before another process's sync committed answers last)
    empty = database_search.EmptyProjects()
    empty.saw({"q": True})
    empty.saw({"q": False})
    assert empty.among(["p", "q"]) == ["q"] and "q" in empty.to_ask(["p", "q"])
    empty.saw({"q": True})
    assert empty.among(["p", "q"]) == [] and empty.to_ask(["q"]) == []


@pytest.mark.parametrize("filters", [Filters(), Filters(tags=("t1",)), Filters(kinds=("general",))])
def test_every_statement_of_a_recall_can_find_its_rows_through_an_index(loaded: Any, filters: Filters) -> None:
    # (a comparison whose collation is not its index's cannot use that index: with the postings' ids
    # compared byte by byte, a keyword hit's row was found by reading the whole table, 14 s a recall
    # at 1M memories)
    for text in ("common caching rare", "ruff lint", "note 3 about caching"):
        for query, params in _recorded_statements(loaded, text, filters, HashingEmbedder()):
            if not str(query).lstrip().upper().startswith(("WITH", "SELECT")) or "pg_" in str(query):
                continue
            with loaded.transaction():
                loaded.execute("SET LOCAL enable_seqscan = off")  # (a scan then means no index could serve)
                plan = "\n".join(str(r[0]) for r in loaded.execute("EXPLAIN " + str(query), params).fetchall())
            # (a scan of a table, or a memory's key checked row by row after an index read others)
            scanned = [
                line.strip()
                for line in plan.splitlines()
                if "Seq Scan on eventmem_" in line or re.search(r"Filter: .*\bid\)?(::text)? = ", line)
            ]
            assert not scanned, (text, filters, str(query)[:300], scanned)
