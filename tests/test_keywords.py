"""The FTS5 keyword index: BM25 with weighted columns, stemming, safe queries, filter before the cut."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from keyword_texts import TextsKept

from eventmem.projectors.keywords import KeywordIndex, fts_query

FILLER = "some neutral words about the project and its ordinary daily work"


def row(slot: int, title: str = "", content: str = FILLER, summary: str = "", tags: str = ""):
    return (slot, title, summary, content, tags)


def padded(rows: list[tuple[int, str, str, str, str]]) -> KeywordIndex:
    """An index holding ``rows`` among unrelated documents (BM25 needs them for a positive IDF)."""
    index = TextsKept()
    index.upsert([*rows, *(row(100 + i, "unrelated", FILLER) for i in range(20))])
    return index


def slots(hits: list[tuple[int, float]]) -> list[int]:
    return [slot for slot, _ in hits]


def test_a_title_hit_ranks_above_a_body_hit() -> None:
    index = padded([row(0, "notes", FILLER + " migrations"), row(1, "migrations", FILLER + " notes")])
    hits = index.search("migrations", 5)
    assert slots(hits) == [1, 0]
    assert hits[0][1] > hits[1][1] > 0


def test_the_cut_follows_the_weighted_ranking() -> None:
    index = padded([row(0, "notes", FILLER + " migrations"), row(1, "migrations", FILLER + " notes")])
    assert slots(index.search("migrations", 1)) == [1]
    assert slots(index.search("migrations", 1, np.ones(200, bool))) == [1]


def test_a_tag_hit_ranks_above_a_body_hit() -> None:
    index = padded([row(0, "notes", FILLER + " frontend"), row(1, "notes", FILLER, tags="frontend")])
    assert slots(index.search("frontend", 5)) == [1, 0]


def test_stemming_matches_other_forms_of_a_word() -> None:
    index = TextsKept()
    index.upsert([row(0, "CI", "running the integration tests takes ten minutes"), row(1, "other", FILLER)])
    assert slots(index.search("run", 5)) == [0]
    assert slots(index.search("runs", 5)) == [0]
    assert slots(index.search("minute", 5)) == [0]


def test_any_word_of_the_query_may_match() -> None:
    index = TextsKept()
    index.upsert([row(0, "alpha"), row(1, "beta"), row(2, "gamma")])
    assert sorted(slots(index.search("alpha gamma missing", 5))) == [0, 2]


@pytest.mark.parametrize(
    "text",
    [
        'say "hello',
        '"unbalanced',
        "(open paren",
        "close) paren)",
        "NEAR(alpha beta, 2)",
        "alpha NEAR beta",
        "alph*",
        "*",
        "alpha AND OR NOT beta",
        "NOT",
        "title:alpha",
        "-alpha +beta ^gamma",
        "{alpha beta}",
        "a'b \"c\" 'd'",
        "SELECT * FROM docs; DROP TABLE docs; --",
        "ünïcödé wörds ß",
        '::: ((( ))) """',
        "",
        "   ",
    ],
)
def test_user_text_with_fts_syntax_never_raises(text: str) -> None:
    index = TextsKept()
    index.upsert([row(0, "alpha beta", "gamma near docs title"), row(1, "hello world")])
    hits = index.search(text, 5)
    assert all(isinstance(slot, int) for slot, _ in hits)
    assert len(index) == 2


def test_fts_query_quotes_every_word_and_joins_them_with_or() -> None:
    assert fts_query('NEAR(a "b") OR c*') == '"near" OR "a" OR "b" OR "or" OR "c"'
    assert fts_query("Alpha alpha ALPHA") == '"alpha"'
    assert fts_query("!!! ???") == ""


def test_operator_words_are_searched_as_plain_words() -> None:
    index = TextsKept()
    index.upsert([row(0, "the NOT operator in sql"), row(1, "unrelated")])
    assert slots(index.search("NOT", 5)) == [0]


def test_the_allowed_mask_filters_before_the_cut() -> None:
    index = TextsKept()
    strong = [row(slot, "deploy deploy deploy", "deploy deploy") for slot in range(300)]
    weak = [row(300 + i, "notes", FILLER + f" deploy item{i}") for i in range(5)]
    index.upsert(strong + weak)
    allowed = np.zeros(305, bool)
    allowed[300:] = True
    assert set(slots(index.search("deploy", 5))) <= set(range(300))
    hits = index.search("deploy", 5, allowed)
    assert sorted(slots(hits)) == [300, 301, 302, 303, 304]
    assert slots(index.search("deploy", 3, allowed)) == slots(hits)[:3]


@settings(max_examples=60, deadline=None)
@given(
    barred=st.sets(st.integers(0, 119), max_size=120),
    k=st.integers(1, 30),
    query=st.sampled_from(["deploy", "deploy notes", "cache key", "notes item7 deploy", "nothing"]),
)
def test_a_few_barred_slots_give_the_same_answer_as_streaming_every_match(barred: set[int], k: int, query: str) -> None:
    """With few slots barred, SQLite is asked for its best k + barred rows only; with many, the
    matches stream in rank order. Both give the best k allowed matches."""
    import eventmem.projectors.keywords as keywords

    index = TextsKept()
    words = ["deploy", "notes", "cache", "key"]
    index.upsert(
        [row(s, words[s % 4] * (1 + s % 3), f"{FILLER} {words[(s * 7) % 4]} item{s % 10}") for s in range(120)]
    )
    allowed = np.ones(120, bool)
    allowed[sorted(barred)] = False
    limited = index.search(query, k, allowed)
    saved = keywords.MAX_BARRED_FOR_LIMIT
    keywords.MAX_BARRED_FOR_LIMIT = -1
    try:
        streamed = index.search(query, k, allowed)
    finally:
        keywords.MAX_BARRED_FOR_LIMIT = saved
    assert limited == streamed
    assert all(allowed[slot] for slot, _ in limited)


def test_the_allowed_mask_excludes_slots_past_its_end() -> None:
    index = TextsKept()
    index.upsert([row(slot, "deploy") for slot in range(10)])
    hits = index.search("deploy", 10, np.ones(4, bool))
    assert sorted(slots(hits)) == [0, 1, 2, 3]


def test_upsert_replaces_a_slot_and_remove_drops_it() -> None:
    index = TextsKept()
    index.upsert([row(0, "alpha"), row(1, "beta")])
    index.upsert([row(0, "gamma")])
    assert len(index) == 2
    assert slots(index.search("alpha", 5)) == []
    assert slots(index.search("gamma", 5)) == [0]
    index.remove([1])
    assert len(index) == 1
    assert slots(index.search("beta", 5)) == []


def test_changes_given_in_any_slot_order_answer_as_in_slot_order() -> None:
    rows = varied_rows(120)
    changed = [row(slot, "retry", f"a new text about retry {slot}") for slot in range(0, 120, 7)]
    removed = [slot for slot in range(3, 120, 11) if slot % 7]
    ordered, shuffled = TextsKept(), TextsKept()
    ordered.upsert(rows)
    shuffled.upsert(rows[::-1])
    ordered.remove(removed)
    shuffled.remove([*removed[::-1], removed[0]])  # (a slot twice, a slot below the previous one)
    ordered.upsert(changed)
    shuffled.upsert(changed[::-1])
    assert len(shuffled) == len(ordered) == 120 - len(removed)
    assert shuffled.df == ordered.df
    for query in ("retry", "cache deploy", "worker token schema", "ops", "text 14"):
        assert shuffled.search(query, 20) == ordered.search(query, 20)


def test_serialize_round_trip_gives_the_same_answers_and_an_independent_copy() -> None:
    index = TextsKept()
    index.upsert([row(slot, f"title {slot}", f"{FILLER} token{slot % 7} shared") for slot in range(50)])
    copy = index.copy()
    assert len(copy) == 50
    allowed = np.arange(50) % 2 == 0
    for query in ("shared", "token3", "title 12", "nothing"):
        assert copy.search(query, 10) == index.search(query, 10)
        assert copy.search(query, 10, allowed) == index.search(query, 10, allowed)
    copy.remove([0])
    assert len(index) == 50 and len(copy) == 49


def test_an_empty_index_serializes_and_loads() -> None:
    copy = TextsKept().copy()
    assert len(copy) == 0
    assert copy.search("anything", 5) == []


# -- bulk load --------------------------------------------------------------------------------


def varied_rows(count: int) -> list[tuple[int, str, str, str, str]]:
    words = "cache database deploy parser queue redis tests lint schema retry worker token".split()
    return [
        row(
            slot,
            title=f"{words[slot % 12]} {words[(slot * 5) % 12]}",
            content=" ".join(words[(slot * k) % 12] for k in range(1, 2 + slot % 9)),
            summary=words[(slot * 7) % 12],
            tags="ops" if slot % 3 else "",
        )
        for slot in range(count)
    ]


def hashsize(index: KeywordIndex) -> int:
    return index.engine_state()[0]


@pytest.mark.parametrize("count", [0, 1, 120])
def test_a_bulk_load_answers_exactly_as_upserts_do(count: int) -> None:
    rows = varied_rows(count)
    expected = TextsKept()
    expected.upsert(rows)
    index = TextsKept()
    bulk = index.bulk_load(rows)
    bulk.finish()
    bulk.finish()  # (a second call does nothing)
    assert len(index) == len(expected) == count
    assert index.df == expected.df
    assert hashsize(index) == 1024 * 1024  # the bulk setting does not outlive the load
    assert index.engine_state()[1] == 0
    mask = np.arange(200) % 2 == 0
    queries = ["cache", "deploy redis", "worker token schema", "ops", "nothing here"]
    for query in queries:
        assert index.search(query, 10) == expected.search(query, 10)
        assert index.search(query, 10, mask) == expected.search(query, 10, mask)
    # later changes and a snapshot round trip behave as on an index filled by upserts
    for target in (index, expected):
        target.upsert([row(3, "retry", "a different text about retry")])
        target.remove([5, 8])
    loaded = index.copy()
    for query in queries:
        assert loaded.search(query, 20) == index.search(query, 20) == expected.search(query, 20)


def test_a_failed_bulk_load_raises_and_leaves_an_empty_index() -> None:
    index = TextsKept()
    with pytest.raises(sqlite3.IntegrityError):
        index.bulk_load([*varied_rows(10), row(3, "again")])  # a slot twice
    assert len(index) == 0 and not index.df
    assert hashsize(index) == 1024 * 1024
    assert index.search("cache", 5) == []
    index.upsert(varied_rows(10))
    assert index.search("cache", 5)


def test_a_bulk_load_needs_an_empty_index() -> None:
    index = TextsKept()
    index.upsert(varied_rows(2))
    with pytest.raises(ValueError):
        index.bulk_load(varied_rows(2))


texts = st.text(alphabet=st.sampled_from("aZ09_-.' \t\n!é\u00a0İßΣ中x"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(texts, texts, texts, texts), min_size=1, max_size=40))
def test_a_bulk_load_counts_the_document_frequencies_of_any_text_as_upserts_do(
    fields: list[tuple[str, str, str, str]],
) -> None:
    rows = [(slot, *four) for slot, four in enumerate(fields)]
    expected = TextsKept()
    expected.upsert(rows)
    index = TextsKept()
    index.bulk_load(rows).finish()
    assert index.df == expected.df


class FailingFill:
    """A connection whose FTS5 fill from the staged rows fails (as an out-of-memory error would)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if "FROM scratch.bulk_rows" in sql:
            raise sqlite3.OperationalError("injected")
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


def test_a_bulk_load_that_fails_in_its_thread_raises_from_finish_and_leaves_an_empty_index() -> None:
    real = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    index = TextsKept(connection=FailingFill(real))  # type: ignore[arg-type]
    bulk = index.bulk_load(varied_rows(30))
    with pytest.raises(sqlite3.OperationalError, match="injected"):
        bulk.finish()
    assert len(index) == 0 and not index.df
    assert not real.in_transaction and hashsize(index) == 1024 * 1024
    assert real.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0] == 0
    assert "scratch" not in [row[1] for row in real.execute("PRAGMA database_list")]
    assert index.search("cache", 5) == []
    index.upsert(varied_rows(10))
    assert index.search("cache", 5)


def test_beside_vectors_a_common_word_is_left_to_the_vectors_while_a_keyword_only_query_keeps_it() -> None:
    index = TextsKept()
    index.upsert([row(s, "", f"{FILLER} common item{s}" if s % 2 == 0 else FILLER) for s in range(1200)])
    index.upsert([row(2000 + s, "rare") for s in range(3)])
    assert index.query_words("rare common") == ["rare", "common"]
    assert index.query_words("rare common", beside_vectors=True) == ["rare"]
    assert index.query_words("common", beside_vectors=True) == ["common"]  # the rarest word is always asked
    assert {slot for slot, _ in index.search("rare common", 10, beside_vectors=True)} == {2000, 2001, 2002}


# -- a large upsert (a merged branch) -----------------------------------------------------------


def changed_rows(count: int) -> list[tuple[int, str, str, str, str]]:
    """Every second slot of :func:`varied_rows` with another text (some not ASCII), and new slots."""
    words = "branch merge ledger quokka wörd café_x zanzibar naïve lint schema".split()
    return [
        row(slot, title=f"{words[slot % 10]} merged", content=" ".join(words[(slot * k) % 10] for k in range(1, 6)))
        for slot in range(0, count * 2, 2)
    ]


@pytest.mark.parametrize("count", [600, 1200])
def test_a_large_upsert_counts_and_answers_as_the_same_rows_given_a_few_at_a_time(count: int) -> None:
    changes = changed_rows(count)
    large, few = TextsKept(), TextsKept()
    for index in (large, few):
        index.upsert(varied_rows(count))
    large.upsert(changes)  # (from this size on, written from a thread and counted by FTS5)
    for start in range(0, len(changes), 50):
        few.upsert(changes[start : start + 50])
    assert len(large) == len(few) == count + count // 2  # (the changes replace half the slots, and add as many)
    assert {w: n for w, n in large.df.items() if n} == {w: n for w, n in few.df.items() if n}
    assert large.engine_state()[1:] == (0, False)  # no temporary table, no transaction left
    for query in ["cache", "branch ledger", "wörd café_x", "schema merged", "quokka naïve"]:
        assert large.search(query, 10) == few.search(query, 10)
    loaded = large.copy()
    assert loaded.search("merge zanzibar", 10) == few.search("merge zanzibar", 10)
