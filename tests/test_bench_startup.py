"""tools/bench_startup.py's smoke run (marked ``system`` by tests/conftest.py): every figure is printed
next to its baseline, and what the server imports before answering ``initialize`` is measured."""

from __future__ import annotations

from pathlib import Path

from conftest import run_quick_benchmark


def test_bench_startup_quick_times_serve_and_the_cli_against_their_baselines(tmp_path: Path) -> None:
    data = run_quick_benchmark("bench_startup.py", tmp_path)
    serve, cli = data["serve"], data["cli"]
    for key in ("initialize_s", "first_tool_s", "noop_initialize_s", "noop_first_tool_s"):
        assert serve[key] > 0, key
    assert serve["first_tool_s"] >= serve["initialize_s"]
    assert serve["initialize_ratio"] == round(serve["initialize_s"] / serve["noop_initialize_s"], 3)
    assert cli["stats_ratio"] == round(cli["stats_s"] / cli["python_pass_s"], 3)
    imports = data["imports"]
    assert imports["serve"]["modules"] > imports["version"]["modules"] > 0
    assert "numpy" not in imports["version"]["heavy"]
    for heavy in ("psycopg", "onnxruntime", "tokenizers"):
        assert heavy not in imports["serve"]["heavy"] and heavy not in imports["stats"]["heavy"]
    for heavy in ("numpy", "faiss"):  # (the service's modules load after the initialize answer)
        assert heavy not in imports["serve"]["heavy"], imports["serve"]
