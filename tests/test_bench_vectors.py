"""tools/bench_vectors.py runs end to end on a small size and reports both paths side by side."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_quick_benchmark


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_quick_benchmark("bench_vectors.py", tmp_path_factory.mktemp("bench_vectors"))


def test_the_vector_benchmark_reports_exact_and_approximate_figures_for_every_dataset_and_filter(
    data: dict[str, Any],
) -> None:
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


def test_the_vector_benchmark_compares_candidate_widths_on_the_shipped_evaluations_alone_and_padded(
    data: dict[str, Any],
) -> None:
    real = data["real_text"]["hashing"]
    assert real["embedder"].startswith("hashing")
    assert sorted(real["alone"]) == ["eval", "hard"]  # (no conversational set named on the command line)
    assert real["alone"]["hard"]["vectors"] == 2400 and real["padded"]["vectors"] == 3000
    for part in (*real["alone"].values(), real["padded"]):
        assert part["same_answers_from_a_second_build"] is True
        assert part["filters"] and all(0.01 <= share < 1.0 for share in part["filters"].values())
        for figures in part["questions"].values():
            for k, default in ((10, 400), (50, 500)):
                widths = figures[f"top_{k}"]["by_candidates"]
                assert [row["candidates"] for row in widths] == [default, 2 * default]  # (--quick: two widths)
                assert widths[0]["time_to_default"] == 1.0
                for label in part["filters"]:
                    assert figures[f"top_{k}"][label]["allowed"] < part["vectors"]
                for row in widths:
                    assert 0.98 <= row["recall"] <= row["recall_ties"] <= 1.0 and row["p50_ms"] > 0
    assert real["padded"]["questions"]["eval"]["queries"] == 160
    assert real["padded"]["questions"]["random"]["queries"] == 30
