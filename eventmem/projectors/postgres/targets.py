"""Which journals a sync projects: ``NAME=PATH`` targets, checked, and the global journal's name."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eventmem.core.errors import InvalidInput
from eventmem.core.limits import limit
from eventmem.core.validation import shown
from eventmem.journal.project import sanitize

__all__ = ["GLOBAL", "Target", "is_project_name", "parse_projects"]

GLOBAL = "global"
"""The name the user-wide global journal's rows carry (no project may take it)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    root: Path
    named: bool = True
    """Whether the name was given (``NAME=PATH``, ``--project-name``); else it is the folder's, and a
    database that already holds this folder under another name serves it under that one
    (:meth:`~eventmem.projectors.postgres.runner.SyncRunner.start`)."""


def _well_formed(name: str) -> bool:
    """Letters, digits, ``._-``, beginning with a letter or digit, within the project name's limit."""
    return len(name) <= int(limit("project").high) and bool(_NAME.match(name))


def is_project_name(name: str) -> bool:
    """Whether ``name`` is one a project may take (well formed, not the global memory's): a name read
    back from a database is checked as a given one is."""
    return _well_formed(name) and name != GLOBAL


def parse_projects(values: list[str], *, default_root: Callable[[], Path]) -> list[Target]:
    """``NAME=PATH`` values, checked (a name of letters, digits, ``._-``, an existing folder, each
    name once); none given: the current project, named after its folder."""
    high = int(limit("project").high)
    targets: list[Target] = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise InvalidInput(f"--project takes NAME=PATH, not {shown(value)}")
        if not _well_formed(name):
            raise InvalidInput(
                f"project name {shown(name)} must be 1-{high} letters, digits, '.', '_' or '-', "
                "beginning with a letter or digit"
            )
        if name == GLOBAL:
            raise InvalidInput(f"the project name {GLOBAL!r} is taken by the global memory; choose another")
        if any(t.name == name for t in targets):
            raise InvalidInput(f"the project name {shown(name)} is given twice")
        root = Path(path).expanduser()
        if not root.is_dir():
            raise InvalidInput(f"the project {shown(name)}: {shown(path)} is not an existing folder")
        targets.append(Target(name, root.resolve()))
    if not targets:
        root = default_root()
        targets.append(Target(sanitize(root.name), root, named=False))
    return targets
