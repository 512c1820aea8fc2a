"""Which journals a sync projects: ``NAME=PATH`` targets, checked, and the global journal's name."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eventmem.core.errors import InvalidInput
from eventmem.core.limits import limit
from eventmem.core.validation import shown
from eventmem.journal.project import ProjectPaths, sanitize

__all__ = ["GLOBAL", "Target", "global_target", "is_global", "is_project_name", "parse_projects"]

GLOBAL = "global"
"""What the names of user-wide global journals in a database are made of (no project may take such a
name): ``global-`` and an id of the journal's folder (:func:`global_target`). A database named one global
journal ``global`` before; a writer drops such rows (:meth:`SyncRunner.start`)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    root: Path
    named: bool = True
    """Whether the name was given (``NAME=PATH``, ``--project-name``); else it is the folder's, and a
    database that already holds this folder under another name serves it under that one
    (:meth:`~eventmem.projectors.postgres.runner.SyncRunner.start`)."""


def global_target(root: Path) -> Target:
    """The user-wide global journal at ``root`` as a database names it: ``global-`` and an id made once
    for that folder and kept in it (:meth:`ProjectPaths.writer_id`; the folder is in no repository, so
    the id never travels): one name for each user and machine. A database is shared by a team: each
    user's global memory is kept apart from the others', found by that user's recalls alone."""
    return Target(f"{GLOBAL}-{sanitize(ProjectPaths(root).writer_id())}", root)


def is_global(name: str) -> bool:
    """Whether ``name`` is a global journal's in a database (``global``, or ``global-`` and an id)."""
    return name == GLOBAL or name.startswith(GLOBAL + "-")


def _well_formed(name: str) -> bool:
    """Letters, digits, ``._-``, beginning with a letter or digit, within the project name's limit."""
    return len(name) <= int(limit("project").high) and bool(_NAME.match(name))


def is_project_name(name: str) -> bool:
    """Whether ``name`` is one a project may take (well formed, not the global memory's): a name read
    back from a database is checked as a given one is."""
    return _well_formed(name) and not is_global(name)


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
        if is_global(name):
            raise InvalidInput(
                f"the project name {shown(name)} is taken by the global memories ({GLOBAL!r}, {GLOBAL + '-…'!r}); "
                "choose another"
            )
        if any(t.name == name for t in targets):
            raise InvalidInput(f"the project name {shown(name)} is given twice")
        root = Path(path).expanduser()
        if not root.is_dir():
            raise InvalidInput(f"the project {shown(name)}: {shown(path)} is not an existing folder")
        targets.append(Target(name, root.resolve()))
    if not targets:
        root = default_root()
        name = sanitize(root.name)
        targets.append(Target(f"project-{name}" if is_global(name) else name, root, named=False))
    return targets
