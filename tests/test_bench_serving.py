"""Smoke test of the serving benchmark's fresh-clone run: it prints both sides' first calls, with the
server's CPU seconds, and their ratios.

No timing is asserted: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_tool_as_a_user

pytestmark = pytest.mark.slow


def test_a_fresh_clone_run_prints_each_sides_first_call_with_its_cpu_seconds_and_the_ratios() -> None:
    data = run_tool_as_a_user(
        "bench_serving.py", "--memories", "600", "--fresh-only", "--rounds", "1", "--queries", "2", "--baseline", "HEAD"
    )
    assert data["memories"] == 600 and data["baseline"] == "HEAD"
    (only,) = data["fresh_clone"]["rounds"]
    for side in ("baseline", "this"):
        run = only[side]
        assert run["first_call_results"] > 0
        assert 0 < run["server_cpu_s_at_first_call"]
        assert run["first_call_s"] <= run["vectors_complete_s"]
    # (this side's server embeds the clone's 600 memories after its first answer, and says so)
    assert any("still being embedded" in warning for warning in only["this"]["first_call_warnings"])
    for key in ("first_call_s", "server_cpu_s_at_first_call", "vectors_complete_s"):
        assert {"baseline", "this", "ratio"} <= data["fresh_clone"][f"median_{key}"].keys()


def test_a_from_snapshot_run_prints_each_sides_retrieve_p50_alternated_with_the_ratios() -> None:
    data = run_tool_as_a_user(
        "bench_serving.py",
        *("--memories", "400", "--from-snapshot-only", "--rounds", "2", "--queries", "5", "--prepare-seconds", "1"),
        *("--baseline", "HEAD"),
    )
    rounds = data["from_snapshot"]["rounds"]
    assert len(rounds) == 2 and len(data["from_snapshot"]["ratios_p50"]) == 2
    for figures in rounds:
        for side in ("baseline", "this"):
            assert 0 < figures[side]["retrieve_p50_ms"] <= figures[side]["retrieve_mean_ms"] * 10
            assert figures[side]["first_call_s"] > 0
    assert list(rounds[0])[:2] == ["baseline", "this"] and list(rounds[1])[:2] == ["this", "baseline"]
    assert {"baseline", "this", "ratio"} <= data["from_snapshot"]["median_retrieve_p50_ms"].keys()


def test_an_after_rebuild_run_prints_each_sides_rebuild_and_its_servers_cpu_and_memory() -> None:
    data = run_tool_as_a_user(
        "bench_serving.py",
        *("--memories", "400", "--after-rebuild", "--rounds", "2", "--queries", "5", "--settle-seconds", "1"),
        *("--baseline", "HEAD"),
    )
    rounds = data["after_rebuild"]["rounds"]
    assert len(rounds) == 2 and list(rounds[1])[:2] == ["this", "baseline"]
    for figures in rounds:
        for side in ("baseline", "this"):
            run = figures[side]
            assert 0 < run["rebuild_ready_s"] <= run["rebuild_s"]
            assert run["server_cpu_s"] > 0 and run["rss_bytes_per_memory"] > 0 and run["retrieve_p50_ms"] > 0
    assert {"baseline", "this", "ratio"} <= data["after_rebuild"]["median_server_cpu_s"].keys()


def test_an_after_import_run_prints_each_sides_import_and_its_server_and_keeps_their_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    data = run_tool_as_a_user(
        "bench_serving.py",
        *("--memories", "400", "--after-import", "--rounds", "1", "--queries", "5", "--settle-seconds", "1"),
        *("--baseline", "HEAD", "--server-logs", str(logs)),
    )
    (only,) = data["after_import"]["rounds"]
    for side in ("baseline", "this"):
        run = only[side]
        assert run["import_s"] > 0 and run["first_call_s"] > 0
        assert run["server_cpu_s"] > 0 and run["rss_bytes_per_memory"] > 0 and run["retrieve_p50_ms"] > 0
        assert "400 added" in (logs / f"import-0-{side}.command.log").read_text(encoding="utf-8")
        assert (logs / f"import-0-{side}.log").is_file()
    assert {"baseline", "this", "ratio"} <= data["after_import"]["median_import_s"].keys()
