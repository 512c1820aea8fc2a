"""Smoke test of the performance benchmark: ``tools/bench.py --quick`` runs and prints the figures.

No timing is asserted: absolute numbers depend on the machine and its load.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_quick_benchmark


@pytest.mark.slow
def test_bench_quick_prints_every_figure_as_json(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench.py", tmp_path)

    assert {"cpu_count", "python", "load_average_at_start"} <= data["machine"].keys()
    sizes = [str(n) for n in data["settings"]["sizes"]]
    assert sizes == ["200", "1000"]
    for key in ("mcp_round_trip", "recall_in_process", "naive_sqlite_blob", "population"):
        assert sorted(data[key]) == sorted(sizes), key
    for size in sizes:
        rt = data["mcp_round_trip"][size]
        for figure in (rt["save"], rt["retrieve"], *rt["retrieve_filtered"].values()):
            assert {"eventmem_p50_ms", "eventmem_p95_ms", "noop_p50_ms", "ratio", "target"} <= figure.keys()
        assert sorted(rt["retrieve_filtered"]) == ["decision", "error"]
        assert data["verdicts"][f"mcp_retrieve_error_ratio_{size}"] in (True, False)
        assert {"p50_ms", "p95_ms"} <= rt["eventmem"]["save_context"].keys()
        same_signature = rt["noop_same_signature"]
        calls = rt["eventmem"]["save_context"]["n"]
        assert same_signature["save_context"]["n"] == same_signature["retrieve_context"]["n"] == calls
        assert same_signature["save_ratio"] > 0 and same_signature["retrieve_ratio"] > 0
        floor = rt["retrieve_vector_floor"]
        assert floor["floor_p50_ms"] > 0 and floor["ratio"] > 0 and floor["noop_p50_ms"] > 0
        assert "retrieve_ratio_less_floor_ratio" in floor
        recall = data["recall_in_process"][size]
        assert {"recall", "recall_filtered_type", "numpy_scan_baseline", "save", "ratio", "target"} <= recall.keys()
        assert {"query", "ratio", "target", "extrapolated"} <= data["naive_sqlite_blob"][size].keys()
        assert "warmup_open_close_s" in data["population"][size]
    assert {"save_p50_ms", "ratio", "target"} <= data["save_vs_journal_size"].keys()
    assert {"cached_embeddings_s", "empty_embedding_cache_s", "ratio", "target"} <= data["rebuild"].keys()
    assert {"eventmem", "noop", "difference_s", "ratio", "target"} <= data["cold_start"].keys()
    throughput = data["save_throughput"]
    assert {"fsync", "flush", "ratio", "target"} <= throughput.keys()
    assert throughput["fsync"]["saves_per_s"] > 0 and throughput["flush"]["saves_per_s"] > 0
    assert "verdicts" in data


@pytest.mark.slow
def test_bench_times_another_checkouts_server_in_the_same_rotations(tmp_path: Path) -> None:
    checkout = tmp_path / "other-checkout"
    shutil.copytree(REPO / "eventmem", checkout / "eventmem", ignore=shutil.ignore_patterns("__pycache__"))

    data = run_quick_benchmark("bench.py", tmp_path, "--sizes", "200", "--baseline-code", str(checkout))

    assert data["settings"]["baseline_code"] == str(checkout)
    beside = data["mcp_round_trip"]["200"]["baseline_code"]
    assert beside["code"] == "other-checkout"
    for figure in ("save_context", "retrieve_context", "recall_memories_decision", "recall_memories_error"):
        numbers = beside[figure]
        assert numbers["baseline_p50_ms"] > 0 and numbers["this_p50_ms"] > 0, figure
        assert numbers["baseline_ratio_to_noop"] > 0 and numbers["this_over_baseline"] > 0, figure


@pytest.mark.slow
def test_bench_refuses_a_baseline_folder_without_eventmem(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bench.py"), "--quick", "--baseline-code", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )

    assert result.returncode != 0
    assert "no eventmem package there" in result.stderr
