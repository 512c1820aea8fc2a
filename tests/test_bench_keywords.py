"""tools/bench_keywords.py runs end to end on a small size and reports both rankings side by side."""

from __future__ import annotations

from pathlib import Path

from conftest import run_quick_benchmark


def test_the_keyword_benchmark_reports_fts5_postings_and_file_figures_with_identical_answers(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_keywords.py", tmp_path)
    figures = data["sizes"]["3000"]
    assert figures["memories"] == 3000 and figures["identical_answers"] is True
    for case in ("beside_vectors", "keyword_only", "beside_vectors_half_allowed"):
        assert figures[case]["fts5"]["p50_ms"] > 0 and figures[case]["postings"]["p50_ms"] > 0
        assert figures[case]["ratio_p50"] > 0
    assert figures["postings_entries"] > 3000 and figures["postings_made_s"] > 0
    restored = figures["database_file"]
    assert restored["identical_answers"] is True
    for case in ("beside_vectors", "keyword_only", "beside_vectors_half_allowed"):
        assert restored[case]["memory"]["p50_ms"] > 0 and restored[case]["file"]["p50_ms"] > 0
