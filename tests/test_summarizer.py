"""The extractive summarizer: short texts untouched, long ones cut to whole, content-bearing sentences."""

from __future__ import annotations

from eventmem.core.summarizer import ExtractiveSummarizer, Summarizer

KEY_1 = "Snapshots store the folded state and both indexes."
FILLER_1 = "It was raining."
KEY_2 = "Snapshots are ignored when their digests do not match the journal."
FILLER_2 = "Someone brought cake."


def test_short_text_is_returned_with_whitespace_collapsed() -> None:
    summarizer = ExtractiveSummarizer(max_chars=240)
    assert summarizer.summarize(["  Use   msgspec\n\nfor the\tcodec.  "]) == ["Use msgspec for the codec."]


def test_text_at_exactly_the_budget_is_kept_whole() -> None:
    text = "x" * 50
    assert ExtractiveSummarizer(max_chars=50).summarize([text]) == [text]


def test_long_text_keeps_the_most_content_bearing_sentences_in_original_order() -> None:
    text = " ".join([KEY_1, FILLER_1, KEY_2, FILLER_2])
    budget = len(KEY_1) + 1 + len(KEY_2) + 5  # room for both key sentences, not for a filler
    (summary,) = ExtractiveSummarizer(max_chars=budget).summarize([text])
    assert summary == f"{KEY_1} {KEY_2}"


def test_a_long_summary_is_made_of_whole_sentences_within_the_budget() -> None:
    sentences = [f"Decision {i} moves the {word} cache to the journal directory." for i, word in enumerate("abcdefgh")]
    text = "\n\n".join(sentences)
    (summary,) = ExtractiveSummarizer(max_chars=120).summarize([text])
    assert 0 < len(summary) <= 120
    kept = [s for s in sentences if s in summary]
    assert kept and " ".join(kept) == summary
    assert [sentences.index(s) for s in kept] == sorted(sentences.index(s) for s in kept)


def test_a_single_huge_sentence_is_clipped_with_an_ellipsis_at_a_word_boundary() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    (summary,) = ExtractiveSummarizer(max_chars=80).summarize([text])
    assert len(summary) <= 80
    assert summary.endswith("…")
    assert text.startswith(summary[:-1])
    assert text[len(summary) - 1] == " "


def test_summarize_keeps_one_summary_per_text_in_order() -> None:
    out = ExtractiveSummarizer(max_chars=30).summarize(["first", "second text", " ".join(["word"] * 40)])
    assert out[:2] == ["first", "second text"]
    assert len(out) == 3 and len(out[2]) <= 30


def test_the_model_id_names_the_budget_and_it_is_a_summarizer() -> None:
    assert ExtractiveSummarizer(max_chars=240).model_id == "extractive-v1-240"
    assert isinstance(ExtractiveSummarizer(), Summarizer)
