"""Smoke test of the hostile-line benchmark: ``tools/bench_hostile.py --quick`` opens a project with
and without a line over the size limit and prints both next to their ratio. No timing is asserted:
absolute numbers depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark

from eventmem.core.limits import MAX_LINE_BYTES


@pytest.mark.slow
def test_bench_hostile_quick_opens_both_projects_and_prints_peak_rss_and_time_side_by_side(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_hostile.py", tmp_path, timeout=600)
    assert data["hostile_line_bytes"] > MAX_LINE_BYTES
    for side in ("clean", "hostile"):
        assert data[side]["seconds_median"] > 0 and data[side]["peak_rss_mb_max"] > 0
    assert data["ratio"]["seconds"] > 0 and data["ratio"]["peak_rss"] > 0
    assert data["same_answer"] is True
    (problem,) = data["doctor_reported"]
    assert "longer than" in problem["reason"]
