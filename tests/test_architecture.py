"""The layers of ARCHITECTURE.md, checked on every run: imports point inward only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "eventmem"

INNER = ("core", "journal", "embedders", "projectors", "runner")
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "journal": {"core", "journal"},
    "embedders": {"core", "journal", "embedders"},
    "projectors": {"core", "journal", "embedders", "projectors"},
    "runner": {"core", "journal", "embedders", "projectors", "runner"},
    "service": {*INNER, "service"},
    "context": {*INNER, "service", "context"},
    "review": {"core", "journal", "review", "context"},
    "interchange": {"core", "journal", "embedders", "service", "context", "interchange"},
}
"""Layer -> the layers its modules may import (``context``, the project-memory protocol, is built on the
service and sits beside it: the service writes a section through a port of its own,
``service.app.SectionWriter``, which the adapters plug the protocol into)."""

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


def test_adapters_reach_no_store_through_the_service() -> None:
    """``service.project`` is the project's store: an adapter that follows it (``service.project.rebuild``,
    ``store = service.project``) reaches past the service's face, which offers what adapters need."""
    wrong = []
    for path in sorted((PACKAGE / "adapters").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr == "project"):
                continue
            chained = isinstance(parents.get(node), ast.Attribute)
            if chained or "service" in ast.unparse(node.value):
                where = path.relative_to(PACKAGE.parent).as_posix()
                wrong.append(f"{where}:{node.lineno}: {ast.unparse(parents.get(node, node))}")
    assert not wrong, "adapters call the service, not its store:\n" + "\n".join(wrong)


def test_no_module_imports_a_private_name_of_another() -> None:
    """A name with a leading underscore is its module's own: a second module that needs it needs it public."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "eventmem":
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                wrong += [f"{module} imports {name} from {node.module}" for name in private]
    assert not wrong, "\n".join(wrong)


STILL_CIRCLING = [
    # the runner's helpers each take the Store and the Store calls them: they wait for the derived
    # state's own class (issue 29); take the circle off as it opens
    ["runner.cursors", "runner.projection", "runner.readview", "runner.runner", "runner.snapshots"],
]


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of eventmem it imports (``from package import module`` names the module;
    imports made only for type checking, or inside a function, count)."""
    modules: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "eventmem":
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    graph[module].add(submodule if submodule in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[module].update(alias.name for alias in node.names if alias.name in modules)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected parts of more than one module (Tarjan),
    each sorted, named without the package's own name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            part = []
            while True:
                top = stack.pop()
                part.append(top.removeprefix("eventmem."))
                if top == module:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for module in graph:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_no_modules_of_the_package_import_each_other_in_a_circle() -> None:
    new = [part for part in circles(import_graph()) if part not in STILL_CIRCLING]
    assert not new, "import circles (type-checking imports count too):\n" + "\n".join(" <-> ".join(c) for c in new)


def test_the_circles_still_waiting_to_open_are_still_there() -> None:
    found = circles(import_graph())
    opened = [part for part in STILL_CIRCLING if part not in found]
    assert not opened, f"these circles are open (or changed): take them off STILL_CIRCLING: {opened}"


STILL_REACHING = {
    # the Store's members its helpers reach: they wait for the derived state's own class (issue 29)
    "runner.cursors": {"_snapshot_due"},
    "runner.projection": {"_encoded_state"},
    "runner.snapshots": {"_encoded_state", "_hashers", "_reset", "_snapshot_lock", "_snapshot_thread"},
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches() -> dict[str, set[str]]:
    """Module -> the private names of other modules of eventmem it uses as ``something._name``: a
    name with a leading underscore that the module does not define (a function, a class, a name, an
    attribute of ``self``) and another module does. (A name both define is not seen.)"""
    defined: dict[str, set[str]] = {}
    used: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removeprefix("eventmem.")
        own, uses = set(), set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _private(node.name):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    if isinstance(node.ctx, ast.Store):
                        own.add(node.attr)
                else:
                    uses.add(node.attr)
        defined[module], used[module] = own, uses
    everywhere = set().union(*defined.values())
    reaches = {module: {name for name in uses - defined[module] if name in everywhere} for module, uses in used.items()}
    return {module: names for module, names in reaches.items() if names}


def test_no_module_uses_a_private_name_of_another() -> None:
    wrong = {
        module: sorted(extra)
        for module, names in private_reaches().items()
        if (extra := names - STILL_REACHING.get(module, set()))
    }
    assert not wrong, f"private names used across modules (make them part of a public interface): {wrong}"


def test_the_private_reaches_still_waiting_are_still_there() -> None:
    found = private_reaches()
    gone = {module: sorted(names - found.get(module, set())) for module, names in STILL_REACHING.items()}
    gone = {module: names for module, names in gone.items() if names}
    assert not gone, f"these are no longer reached: take them off STILL_REACHING: {gone}"
