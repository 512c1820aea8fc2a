"""Smoke test of the HTTP benchmark: ``--quick`` runs, prints every section with its ratios, and
the concurrent clients lose no acknowledged save. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark

pytestmark = pytest.mark.slow


def test_quick_run_reports_rest_stdio_and_noop_latencies_and_loses_no_concurrent_save(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_http.py", tmp_path)
    for path in ("rest", "stdio"):
        assert set(data[path]) == {"save", "recall"}
        assert all(data[path][op]["n"] == 20 and data[path][op]["p50_ms"] > 0 for op in ("save", "recall"))
    assert data["noop_starlette"]["p50_ms"] > 0
    assert set(data["ratios"]) == {
        "rest_save_vs_stdio_save",
        "rest_recall_vs_stdio_recall",
        "rest_save_vs_noop_route",
        "rest_recall_vs_noop_route",
    }
    ui = data["ui"]
    assert ui["memories"] == 200
    assert "skipped" in ui or (ui["table_first_page_ms"] > 0 and ui["table_next_page_ms"] > 0)
    concurrent = data["concurrent_saves"]
    assert concurrent["acknowledged"] == 4 * 50 and concurrent["lost"] == 0 and concurrent["refused"] == 0
