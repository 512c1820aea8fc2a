"""The package passes its own lint, format and strict type checks (part of the test command)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True)


def test_ruff_finds_no_lint_errors() -> None:
    result = run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_the_code_unchanged() -> None:
    result = run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes_on_the_package() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


LONG_MODULE_LINES = 500
"""Over this many lines a module is told on the test's output: a hint to look for a second concept in it."""
MAX_MODULE_LINES = 700
"""Over this many lines a module fails the test. Between the two, cohesion decides where code lives: a
module is split where it holds two concepts, not to get under a line count."""


def module_lengths() -> dict[str, int]:
    package = REPO / "eventmem"
    return {
        path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(package.rglob("*.py"))
    }


def test_no_module_of_the_package_is_over_700_lines_and_those_over_500_are_told() -> None:
    lengths = module_lengths()
    for name, lines in lengths.items():
        if LONG_MODULE_LINES < lines <= MAX_MODULE_LINES:
            print(f"long module: {name} has {lines} lines (over {LONG_MODULE_LINES}): does it hold two concepts?")
    over = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    assert not over, f"split these modules by concept (at most {MAX_MODULE_LINES} lines): {over}"
