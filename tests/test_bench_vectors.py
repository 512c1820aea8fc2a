"""tools/bench_vectors.py runs end to end on a small size and reports both paths side by side."""

from __future__ import annotations

from pathlib import Path

from conftest import run_quick_benchmark


def test_the_vector_benchmark_reports_exact_and_approximate_figures_for_every_dataset_and_filter(
    tmp_path: Path,
) -> None:
    data = run_quick_benchmark("bench_vectors.py", tmp_path)
    assert data["size"] == 3000
    for name in ("retrieval", "random", "random-near"):
        figures = data[name]
        assert figures["vectors"] == 3000
        shares = [row["allowed_share"] for row in figures["by_filter"]]
        assert shares == sorted(shares, reverse=True) and shares[0] == 1.0
        for row in figures["by_filter"]:
            assert row["exact"]["p50_ms"] > 0 and row["approximate"]["p50_ms"] > 0
            assert 0.99 <= row["recall_at_10"] <= 1.0  # (400 candidates of 3000)
        assert 0.95 <= figures["top_50"]["recall"] <= 1.0
        assert figures["re_rank"]["identical"] is True  # (the scores read by their bits are numpy's)
        assert figures["re_rank"]["candidates"] == 500
    assert data["retrieval"]["queries"] == 160 + 516  # every question of both evaluations
