"""The layers of ARCHITECTURE.md, checked on every run: imports point inward only."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "eventmem"

INNER = ("core", "journal", "embedders", "projectors", "runner")
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "journal": {"core", "journal"},
    "embedders": {"core", "journal", "embedders"},
    "projectors": {"core", "journal", "embedders", "projectors"},
    "runner": {"core", "journal", "embedders", "projectors", "runner"},
    "service": {*INNER, "service", "context"},
    "context": {*INNER, "service", "context"},
    "review": {"core", "journal", "review", "context"},
    "interchange": {"core", "journal", "embedders", "service", "context", "interchange"},
}
"""Layer -> the layers its modules may import (``context`` and ``service`` meet: the project-memory
protocol is built on the service, and the service writes its sections through it)."""

SHARED_BY_COMMAND_LINES = {"adapters.command_line", "adapters.progress", "adapters.replay"}
COMMAND_LINES = {"adapters.cli", "adapters.hooks"}
"""The adapters that are command lines (``eventmem hooks …`` is one) and may use what command lines share."""


def layer_of(dotted: str) -> str:
    parts = dotted.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "adapters" and len(parts) > 1:
        return "adapters." + parts[1].removesuffix(".py")
    return parts[0]


def imports() -> list[tuple[str, str]]:
    """(importing module, imported module) for every import of eventmem inside eventmem, lazy ones too."""
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "eventmem":
                found.append((module, node.module))
            elif isinstance(node, ast.Import):
                found += [(module, alias.name) for alias in node.names if alias.name.split(".")[0] == "eventmem"]
    return found


def test_the_inner_layers_import_only_themselves_and_what_lies_further_in() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, target in imports()
        if (layer := layer_of(module)) in ALLOWED and layer_of(target) not in ALLOWED[layer] | {""}
    ]
    assert not wrong, "imports that point outward (see ARCHITECTURE.md):\n" + "\n".join(wrong)


def test_adapters_reach_neither_the_runner_nor_the_journal_file_nor_another_adapter() -> None:
    wrong = []
    for module, target in imports():
        layer, into = layer_of(module), layer_of(target)
        if not layer.startswith("adapters.") or module.endswith("__main__"):
            continue
        if into == "runner" or target == "eventmem.journal.journal":
            wrong.append(f"{module} imports {target}: adapters go through the service")
        elif into.startswith("adapters.") and into != layer:
            shared = into in SHARED_BY_COMMAND_LINES and layer in {*COMMAND_LINES, *SHARED_BY_COMMAND_LINES}
            if not shared:
                wrong.append(f"{module} imports {target}: adapters do not import each other")
    assert not wrong, "\n".join(wrong)


def test_only_the_entry_point_knows_more_than_one_adapter() -> None:
    knowing = {
        module
        for module, target in imports()
        if layer_of(target) in {"adapters.mcp", "adapters.http"} and not layer_of(module).startswith("adapters.")
    }
    assert knowing <= {"eventmem.main"}, knowing
