"""Smoke test of the git benchmark: ``tools/bench_git.py --quick`` runs and prints every figure.

No timing is asserted: absolute numbers depend on the machine and its load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark


@pytest.mark.slow
def test_bench_git_quick_prints_every_figure_with_its_baseline_as_json(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_git.py", tmp_path)
    merge = data["merge_catch_up"]
    assert merge["arriving_events"] == 200
    assert {"git_merge_s", "catch_up_s", "baseline_same_events_without_git_s", "ratio_vs_without_git"} <= merge.keys()
    assert data["diff"]["events_b"] > data["diff"]["events_a"] == 1000
    assert data["diff"]["memories_changed"] > 0
    assert {"library_s", "command_s", "baseline_one_fold_s", "ratio_library_vs_one_fold"} <= data["diff"].keys()
    assert {"library_s", "command_s", "baseline_full_fold_s", "ratio_library_vs_full_fold"} <= data["at"].keys()
