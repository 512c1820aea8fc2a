"""Smoke test of the import benchmark: ``tools/bench_interchange.py --quick`` imports a store of
each format into a fresh project, then again as a dry run. No timing is asserted: absolute numbers
depend on the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_quick_benchmark


@pytest.mark.slow
def test_bench_interchange_quick_imports_every_format_whole_and_a_second_import_changes_nothing(
    tmp_path: Path,
) -> None:
    data = run_quick_benchmark("bench_interchange.py", tmp_path, timeout=600)
    assert set(data["formats"]) == {"server-memory", "memorygraph", "mcp-memory-service", "markdown", "json"}
    for name, result in data["formats"].items():
        assert result["added"] == data["memories"] == result["second_import_unchanged"], name
        assert result["links_added"] == (0 if name == "mcp-memory-service" else data["memories"] - 1), name
        assert result["problems"] == 0 and result["memories_per_second"] > 0, name


@pytest.mark.slow
@pytest.mark.parametrize("rolled_only", [False, True], ids=["beside-the-baseline", "rolled-over-alone"])
def test_bench_interchange_large_imports_every_line_across_segments_with_or_without_the_baseline(
    tmp_path: Path, rolled_only: bool
) -> None:
    out = tmp_path / "large.json"
    command = [sys.executable, str(REPO / "tools" / "bench_interchange.py"), "--large", "2400", "--segment-mb", "1"]
    command += ["--out", str(out), *(["--rolled-only"] if rolled_only else [])]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    large = json.loads(out.read_text(encoding="utf-8"))["large_import"]
    rolled = large["rolled_over"]
    assert (rolled["added"], rolled["links_added"]) == (1200, 1199) and rolled["segments"] > 1
    assert rolled["seconds"] > 0 and rolled["peak_rss_mb"] > 0
    assert ("one_segment" in large) is not rolled_only
    assert ("time_ratio_rolled_over_to_one_segment" in large) is not rolled_only


@pytest.mark.slow
def test_bench_interchange_large_runs_the_same_import_with_a_baseline_checkout_and_measures_a_rebuild(
    tmp_path: Path,
) -> None:
    out = tmp_path / "large.json"
    command = [sys.executable, str(REPO / "tools" / "bench_interchange.py"), "--large", "2400", "--segment-mb", "1"]
    command += ["--rolled-only", "--baseline-tree", str(REPO), "--rebuild-floor", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    large = json.loads(out.read_text(encoding="utf-8"))["large_import"]
    rolled, base = large["rolled_over"], large["baseline_rolled_over"]
    assert (base["added"], base["links_added"], base["segments"]) == (1200, 1199, rolled["segments"])
    assert base["tree"] and large["rebuild_of_the_import"]["peak_rss_mb"] > 0
    assert large["memory_ratio_to_baseline_tree"] > 0 and large["memory_ratio_to_rebuild"] > 0
