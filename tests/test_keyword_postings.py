"""Keyword searches ranked from in-memory postings give FTS5's hits, scores and order exactly: for
ASCII and other scripts, identifiers that are phrases, filters, and every change made while the
postings are being made or after."""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from keyword_texts import TextsKept

from eventmem.projectors import postings as postings_module
from eventmem.projectors.columns import SlotTable
from eventmem.projectors.keywords import KeywordIndex, KeywordsProjector
from eventmem.projectors.postings import PhraseScoresKept, Postings, StoredPostings

WORDS = (
    "parse parser parsing parses config configured parse_config ParseConfig Café cafe naïve Straße über "
    "fail failed failing retry retries x86_64 k8s v2 deploy deployment timeout 0x1f café_au_lait ＡＢＣ"
).split()
FILLER = "some neutral words about the project and its ordinary daily work".split()
Row = tuple[int, str, str, str, str]


def text(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS + FILLER) for _ in range(count))


def rows(seed: int, count: int, first: int = 0) -> list[Row]:
    rng = random.Random(seed)
    return [
        (
            first + i,
            text(rng, rng.randrange(4)),
            text(rng, rng.randrange(6)),
            text(rng, rng.randrange(40)),
            text(rng, 2),
        )
        for i in range(count)
    ]


def answers(index: KeywordIndex, queries: list[str], allowed: np.ndarray) -> list[list[tuple[int, float]]]:
    out = []
    for query in queries:
        out.append(index.search(query, 20))
        out.append(index.search(query, 7, allowed))
        out.append(index.search(query, 20, beside_vectors=True))
    return out


def fts5_only(final: list[Row]) -> KeywordIndex:
    index = TextsKept()
    index.upsert(final)
    return index


def ranked_in_memory(index: KeywordIndex) -> KeywordIndex:
    index.rank_in_memory()
    assert index.ranking is not None and index.ranking.wait(60)
    assert index.ranking.ready() is not None
    return index


QUERIES = ["parse config", "parse_config failed", "café", "Straße über", "k8s deploy timeout", "x86_64", "___ retry"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), count=st.integers(1, 120), queries=st.lists(st.sampled_from(WORDS), max_size=4))
def test_a_search_ranked_from_postings_gives_the_hits_and_scores_of_fts5_bit_for_bit(
    seed: int, count: int, queries: list[str]
) -> None:
    data = rows(seed, count)
    allowed = np.random.default_rng(seed).random(count + 5) < 0.6
    asked = [*QUERIES, " ".join(queries)]
    expected = answers(fts5_only(data), asked, allowed)
    assert answers(ranked_in_memory(fts5_only(data)), asked, allowed) == expected


def test_changes_made_while_the_postings_are_made_and_after_are_ranked_like_fts5_ranks_the_end_state() -> None:
    index = fts5_only(rows(1, 300))
    index.rank_in_memory()  # the thread works from the rows as they are now
    index.upsert(rows(2, 40, first=100))  # replaced while it works
    index.remove(range(0, 300, 7))
    index.upsert(rows(3, 20, first=300))  # new
    assert index.ranking is not None and index.ranking.wait(60) and index.ranking.ready() is not None
    index.upsert(rows(4, 30, first=50))  # and after
    index.remove([301, 302, 150])
    index.upsert(rows(5, 3, first=0))  # (0 was removed above: back again)

    final: dict[int, Row] = {}
    for batch in (rows(1, 300), rows(2, 40, first=100)):
        final.update((r[0], r) for r in batch)
    for slot in range(0, 300, 7):
        final.pop(slot, None)
    for batch in (rows(3, 20, first=300), rows(4, 30, first=50)):
        final.update((r[0], r) for r in batch)
    for slot in (301, 302, 150):
        final.pop(slot)
    final.update((r[0], r) for r in rows(5, 3, first=0))

    allowed = np.random.default_rng(9).random(330) < 0.5
    queries = [*QUERIES, "parse", "deploy retry", "ＡＢＣ naïve"]
    expected = answers(fts5_only(sorted(final.values())), queries, allowed)
    assert answers(index, queries, allowed) == expected
    assert sum(len(found) for found in expected) > 100


def test_searches_between_removals_and_replacements_rank_each_state_like_fts5() -> None:
    index = ranked_in_memory(fts5_only(rows(16, 200)))
    final = {r[0]: r for r in rows(16, 200)}
    allowed = np.ones(220, bool)
    for step in range(4):
        assert answers(index, QUERIES, allowed) == answers(fts5_only(sorted(final.values())), QUERIES, allowed)
        gone = list(range(step, 200, 9))
        index.remove(gone)
        for slot in gone:
            final.pop(slot, None)
        replaced = rows(17 + step, 15, first=30 * step)
        index.upsert(replaced)
        final.update((r[0], r) for r in replaced)
    assert answers(index, QUERIES, allowed) == answers(fts5_only(sorted(final.values())), QUERIES, allowed)


HELD_OR_NOT = [*WORDS, *FILLER, "parsed", "configs", "zebra", "nowhere", "x86", "64", "CAFÉ", "über_alles"]


def test_whether_a_memory_holds_a_word_is_answered_from_the_postings_as_fts5_answers_it_through_every_change() -> None:
    index = ranked_in_memory(fts5_only(rows(21, 150)))
    final = {r[0]: r for r in rows(21, 150)}
    for step in range(4):
        expected = [fts5_only(sorted(final.values())).holds(word) for word in HELD_OR_NOT]
        assert [index.holds(word) for word in HELD_OR_NOT] == expected
        assert True in expected and False in expected
        gone = list(range(step, 150, 4))
        index.remove(gone)
        for slot in gone:
            final.pop(slot, None)
        replaced = [(slot, "zebra parsed", "", " ".join(FILLER[step:]), "") for slot in range(10 * step, 10 * step + 3)]
        index.upsert(replaced)
        final.update((r[0], r) for r in replaced)
    assert index.holds("zebras")
    index.remove([slot for slot, row in final.items() if "zebra" in row[1]])
    assert not index.holds("zebras")  # (the word's stem is known: its rows are gone)
    assert not fts5_only(sorted(r for r in final.values() if "zebra" not in r[1])).holds("zebras")


def test_a_tie_in_score_is_ordered_by_slot_by_both_rankings() -> None:
    same = [(slot, "zebra", "", " ".join(FILLER), "") for slot in (9, 3, 7, 1)]
    index = fts5_only([*same, *rows(6, 30, first=20)])
    fts5 = index.search("zebra", 3)
    assert [slot for slot, _ in fts5] == [1, 3, 7]
    assert ranked_in_memory(index).search("zebra", 3) == fts5


def test_postings_kept_in_the_snapshot_rank_after_a_restore_exactly_like_fts5() -> None:
    index = ranked_in_memory(fts5_only(rows(7, 200)))
    index.upsert(rows(8, 10, first=40))
    index.remove([3, 5])
    restored = index.copy()
    assert restored.ranking is not None and restored.ranking.wait(60) and restored.ranking.ready() is not None
    allowed = np.random.default_rng(3).random(210) < 0.5
    expected = answers(index, QUERIES, allowed)
    assert answers(restored, QUERIES, allowed) == expected
    restored.upsert(rows(9, 5, first=60))
    fts5 = restored.copy()
    fts5.ranking = None
    assert answers(restored, QUERIES, allowed) == answers(fts5, QUERIES, allowed)


def test_postings_read_back_from_a_snapshot_rank_like_fts5_through_removals_replacements_and_another_restore() -> None:
    final = {r[0]: r for r in rows(31, 200)}
    index = ranked_in_memory(fts5_only(sorted(final.values()))).copy()  # (its postings read back)
    assert index.ranking is not None and index.ranking.wait(60) and index.ranking.ready() is not None
    allowed = np.random.default_rng(5).random(260) < 0.6

    def ranked_alike() -> bool:
        fts5 = fts5_only(sorted(final.values()))
        return answers(index, QUERIES, allowed) == answers(fts5, QUERIES, allowed) and [
            index.holds(word) for word in HELD_OR_NOT
        ] == [fts5.holds(word) for word in HELD_OR_NOT]

    for step in range(6):
        assert ranked_alike()
        plain = [(slot, "", "", " ".join(FILLER[step:]), "") for slot in range(100 + step, 200, 13)]
        index.upsert(plain)  # (rows kept under new texts that hold none of the asked words)
        final.update((r[0], r) for r in plain)
        assert ranked_alike()
        gone = list(range(step, 200, 11))
        index.remove(gone)
        for slot in gone:
            final.pop(slot, None)
        assert ranked_alike()  # (removals alone: the words' groups of the read-back postings lose rows)
        changed = [*rows(40 + step, 12, first=25 * step), *rows(50 + step, 3, first=200 + 10 * step)]
        index.upsert(changed)
        final.update((r[0], r) for r in changed)
        if step == 2:  # (read back again: rows changed since the first restore, some of their words compacted)
            index = index.copy()
            assert index.ranking is not None and index.ranking.wait(60) and index.ranking.ready() is not None
    assert len(postings_of(index)) == len(final)


@pytest.mark.parametrize("repeats", [3, 70_000])
def test_postings_read_back_hold_each_frequency_exactly_in_two_bytes_when_it_fits_and_in_four_else(
    repeats: int,
) -> None:
    data = [*rows(11, 60), (60, "retry", "", " ".join(["retry"] * repeats), "")]  # (a content of one word)
    index = ranked_in_memory(fts5_only(data)).copy()  # (its postings read back)
    allowed = np.ones(61, bool)
    queries = [*QUERIES, "retry", "retry timeout"]
    assert answers(index, queries, allowed) == answers(fts5_only(data), queries, allowed)
    base = postings_of(index)._base
    assert base.dtype["freq"] == (np.dtype(np.uint16) if repeats < 65_536 else np.dtype(np.float32))


def postings_of(index: KeywordIndex) -> Postings:
    assert index.ranking is not None and index.ranking.wait(60)
    postings = index.ranking.ready()
    assert postings is not None
    return postings


def test_the_tokens_whose_stems_were_asked_are_kept_with_the_postings_for_the_next_start() -> None:
    index = ranked_in_memory(fts5_only(rows(13, 60)))
    index.search("parsings zebrafish", 5)  # (a query's tokens are asked too; one no row holds is not kept)
    stems, known, numbers = postings_of(index).tokens.numbered_stems()
    assert {"parse", "config", "deploy", "parsings"} <= set(known) and "zebrafish" not in known

    restored = index.copy()
    assert postings_of(restored).tokens.numbered_stems() == (stems, known, numbers)
    assert answers(restored, QUERIES, np.ones(60, bool)) == answers(index, QUERIES, np.ones(60, bool))


def test_a_query_word_no_memory_held_is_found_once_a_memory_saved_later_holds_it() -> None:
    index = ranked_in_memory(fts5_only(rows(15, 50)))
    assert index.search("zebrafish deploy", 50) == fts5_only(rows(15, 50)).search("zebrafish deploy", 50)
    assert index.search("zebrafish", 5) == []
    later = (50, "zebrafishes", "", "the zebrafish tank", "")
    index.upsert([later])
    found = index.search("zebrafish", 5)
    assert [slot for slot, _ in found] == [50]
    assert found == fts5_only([*rows(15, 50), later]).search("zebrafish", 5)


def test_phrase_scores_are_asked_again_only_after_a_change_and_within_a_bound_on_rows_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def score(word: str) -> tuple[np.ndarray, np.ndarray]:
        asked.append(word)
        size = 3 if word == "small" else 8
        return np.arange(size, dtype=np.int64), np.ones(size)

    monkeypatch.setattr(postings_module, "MAX_PHRASE_ROWS_KEPT", 5)
    kept = PhraseScoresKept()
    first = kept.get("small", score)
    assert kept.get("small", score) is first and asked == ["small"]
    with pytest.raises(ValueError, match="read-only"):
        first[1][0] = 2.0  # (shared by later searches: nobody may change them)
    kept.get("large", score)
    kept.get("large", score)  # (more rows than are kept: asked each time)
    assert asked == ["small", "large", "large"]
    kept.clear()
    kept.get("small", score)
    assert asked == ["small", "large", "large", "small"]


KNOWN_DAMAGES = {
    "a stem number past the stems": lambda stored: msgspec.structs.replace(
        stored, known_stems=stored.known_stems[:-4] + np.array([1 << 30], "<i4").tobytes()
    ),
    "a negative stem number": lambda stored: msgspec.structs.replace(
        stored, known_stems=np.array([-1], "<i4").tobytes() + stored.known_stems[4:]
    ),
    "fewer numbers than tokens": lambda stored: msgspec.structs.replace(stored, known_stems=stored.known_stems[:-4]),
}


@pytest.mark.parametrize("damage", KNOWN_DAMAGES, ids=list(KNOWN_DAMAGES))
def test_stored_known_tokens_that_do_not_fit_the_stems_are_refused(damage: str) -> None:
    index = ranked_in_memory(fts5_only(rows(14, 40)))
    stored = msgspec.msgpack.decode(postings_of(index).encoded(), type=StoredPostings)
    assert len(Postings.decoded(msgspec.msgpack.encode(stored), 40)) == 40
    with pytest.raises(ValueError, match="known token"):
        Postings.decoded(msgspec.msgpack.encode(KNOWN_DAMAGES[damage](stored)), 40)


DAMAGES = {  # the stored postings come last in a serialized index
    "cut": lambda data: data[:-7],
    "garbage after": lambda data: data + b"\x00\x01",
}


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
def test_a_snapshot_with_damaged_stored_postings_is_used_and_fts5_ranks_alone_with_the_damage_reported(
    damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    index = ranked_in_memory(fts5_only(rows(7, 50)))
    allowed = np.random.default_rng(4).random(60) < 0.5
    expected = answers(index, QUERIES, allowed)
    projector = KeywordsProjector(SlotTable(), postings_from=1)
    with caplog.at_level(logging.WARNING, logger="eventmem.projectors"):
        assert projector.restore(DAMAGES[damage](index.serialize()))
        assert not projector.ranked_in_memory(60)
    assert "keyword postings not read from the snapshot" in caplog.text
    assert answers(projector.index, QUERIES, allowed) == expected


def test_a_keyword_snapshot_that_is_a_bare_database_or_cut_in_its_database_is_refused() -> None:
    index = ranked_in_memory(fts5_only(rows(7, 50)))
    data = index.serialize()
    projector = KeywordsProjector(SlotTable())
    assert projector.restore(data)
    with contextlib.closing(sqlite3.connect(":memory:")) as bare:
        bare.execute("CREATE TABLE docs(x)")
        assert not projector.restore(bytes(bare.serialize()))
    assert not projector.restore(data[:100])
    assert len(projector) == 0
