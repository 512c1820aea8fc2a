"""Smoke test of the import benchmark: ``tools/bench_interchange.py --quick`` imports a store of
each format into a fresh project, then again as a dry run. No timing is asserted: absolute numbers
depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_quick_benchmark


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
