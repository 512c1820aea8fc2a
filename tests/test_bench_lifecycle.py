"""Smoke test of the lifecycle benchmark: ``tools/bench_lifecycle.py --quick`` runs and prints every
figure with its baseline. No timing is asserted: absolute numbers depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark


@pytest.mark.slow
def test_bench_lifecycle_quick_prints_every_figure_next_to_its_baseline(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_lifecycle.py", tmp_path, timeout=600)
    compaction = data["compaction"]
    assert compaction["events"] == 2000 and compaction["archived_memories"] > 0
    for key in ("compact_s", "bare_rewrite_s", "ratio_to_bare_rewrite", "cold_rebuild_s"):
        assert compaction[key] is not None, key
    assert compaction["expiry"]["expired"] > 0 and compaction["expiry"]["ratio_to_store_append"] is not None
    related = data["related_depth3"]
    assert related["links"] == 2000 and related["reached_p50"] > 0
    assert {"related", "bare_dict_bfs", "link_table_scan_bfs", "ratio_to_bare_bfs"} <= related.keys()
    recall = data["recall_filtered"]
    for name in ("type", "tags", "min_importance", "created_after", "all_four"):
        assert recall[f"recall_{name}"]["ratio_to_unfiltered"] is not None, name
        assert recall[f"recall_{name}"]["matching"] < recall["memories"], name
    assert recall["recall_none"]["ratio_to_bare_full_scan"] is not None
    assert {"bare_numpy_scan_full", "bare_numpy_scan_masked_all_four"} <= recall.keys()
    assert recall["search_listing_no_query"]["n"] > 0
