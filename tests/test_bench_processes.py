"""Smoke test of the many-processes benchmark: ``--quick`` runs and prints the expected JSON.

No timing is asserted: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import pytest
from conftest import run_tool_as_a_user

pytestmark = pytest.mark.slow


def test_quick_run_prints_every_section_with_baselines_and_ratios() -> None:
    data = run_tool_as_a_user("bench_processes.py", "--quick")
    assert "errors" not in data, data.get("errors")

    assert {
        "machine",
        "settings",
        "population",
        "save_throughput",
        "propagation",
        "cold_start",
        "crash_recovery",
        "durability_modes",
        "server_memory",
        "summary",
        "total_s",
    } <= data.keys()
    assert data["summary"]["every_acknowledged_save_kept_and_seen"] is True
    assert data["settings"]["quick"] is True
    machine = data["machine"]
    assert len(machine["load_average_at_start"]) == 3 and len(machine["load_average_at_end"]) == 3
    assert machine["stray_processes_killed"] == 0

    levels = data["save_throughput"]["levels"]
    assert set(levels) == {"1", "2", "4"}
    for level in levels.values():
        assert {"eventmem_saves_per_s", "raw_appends_per_s", "ratio", "eventmem_scaling_vs_1_process"} <= level.keys()
        assert level["journal_checks_ok"] is True
        assert level["raw_file_checks_ok"] is True

    (size,) = [str(n) for n in data["settings"]["sizes"]]
    catch_up = data["propagation"]["catch_up_on_call"][size]
    assert {"retrieve_with_one_new_event", "retrieve_with_nothing_new", "ratio"} <= catch_up.keys()
    found, total = catch_up["found_by_the_other_process"].split("/")
    assert found == total, "a save acknowledged by one server was not found by the other"
    push = data["propagation"]["watcher_push"]
    assert "latency_from_append" in push["baseline_raw_watchfiles"]
    assert {"latency_from_save_return", "ratio", "missed"} <= push[size].keys()

    cold = data["cold_start"][size]
    assert set(cold) == {"valid_snapshot", "snapshot_deleted_embeddings_kept", "cache_deleted"}
    for mode in cold.values():
        assert {"eventmem_spawn_to_first_retrieve_s", "noop_spawn_to_first_answer_s", "ratio"} <= mode.keys()

    crash = data["crash_recovery"][size]
    assert crash["torn_half_line"]["tail_cut_and_save_whole"] is True
    assert crash["torn_half_16k_line"]["tail_cut_and_save_whole"] is True
    assert "ratio" in crash["torn_half_line"]
    assert crash["journal_after"]["corrupt"] == 0 and crash["journal_after"]["torn_bytes"] == 0

    durability = data["durability_modes"]
    assert {"fsync", "flush", "ratio", "baseline_ratio", "notes"} <= durability.keys()
    assert durability["fsync"]["journal_checks_ok"] and durability["flush"]["journal_checks_ok"]
