"""The projects one HTTP server serves: names, roots, and each project's open service.

A project is named on the command line (``--project NAME=PATH``, repeatable), found as the
sub-folders of a directory of projects (``--projects-dir DIR``), or is the one project the
working directory belongs to. Names are plain words, so a name can never be a path trick.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eventmem.core.errors import InvalidInput
from eventmem.core.validation import shown
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService

__all__ = ["NAME_PATTERN", "Project", "Projects", "check_name", "parse_project_option", "projects_in"]

log = logging.getLogger("eventmem.http")

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A project's name: a letter or digit, then up to 63 letters, digits and ``_.-``."""


def check_name(name: str) -> str:
    """``name`` if it is a valid project name, else :class:`InvalidInput` (``..`` and ``a/b`` are not)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or ".." in name:
        raise InvalidInput(
            f"project name {shown(name)} is not valid: 1 to 64 letters, digits and _.- starting with a letter or digit"
        )
    return name


def parse_project_option(value: str) -> tuple[str, Path]:
    """``NAME=PATH`` from ``--project``: a valid name and an existing folder."""
    name, sep, path = value.partition("=")
    if not sep or not path:
        raise InvalidInput(f"--project takes NAME=PATH, not {shown(value)}")
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise InvalidInput(f"--project {check_name(name)}: {root} is not an existing folder")
    return check_name(name), root


def projects_in(directory: Path) -> list[tuple[str, Path]]:
    """The sub-folders of ``directory`` that hold a memory (``.eventmem/``) or a git repository,
    by folder name; folders whose name is not a valid project name are skipped with a log line."""
    base = directory.expanduser().resolve()
    if not base.is_dir():
        raise InvalidInput(f"--projects-dir: {base} is not an existing folder")
    found: list[tuple[str, Path]] = []
    for child in sorted(base.iterdir()):
        if not child.is_dir() or not ((child / ".eventmem").is_dir() or (child / ".git").exists()):
            continue
        if not NAME_PATTERN.match(child.name) or ".." in child.name:
            log.warning("skipping %s: its name is not a valid project name", child)
            continue
        found.append((child.name, child.resolve()))
    if not found:
        raise InvalidInput(f"--projects-dir: no project (a folder with .eventmem/ or .git) in {base}")
    return found


@dataclass
class Project:
    """One served project: its name, root, and service (opened in the background at start)."""

    name: str
    root: RootChoice
    opener: Callable[[RootChoice], MemoryService]
    ready: threading.Event = field(default_factory=threading.Event)
    service_: MemoryService | None = None
    error: str = ""
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held by conditional updates (``If-Match``): the version check and the write are one step here."""

    def load(self) -> None:
        try:
            self.service_ = self.opener(self.root)
        except Exception as exc:
            self.error = str(exc)
            log.exception("could not open the memory of project %s", self.name)
        finally:
            self.ready.set()

    def service(self) -> MemoryService:
        """The open service; waits for it to load. :class:`InvalidInput` if it could not be opened."""
        self.ready.wait()
        if self.service_ is None:
            raise InvalidInput(f"the memory of project {self.name} could not be opened: {self.error}")
        return self.service_


class Projects:
    """The projects by name, in the order given. The project a request that names none is about:
    the only one served, or the one ``--default-project`` names."""

    def __init__(
        self,
        entries: list[tuple[str, Path]],
        opener: Callable[[RootChoice], MemoryService],
        *,
        default_name: str | None = None,
    ) -> None:
        if not entries:
            raise InvalidInput("no project to serve")
        self.by_name: dict[str, Project] = {}
        for name, root in entries:
            if name in self.by_name:
                raise InvalidInput(f"project {name} is named twice")
            self.by_name[name] = Project(name, RootChoice(root, "http:--project"), opener)
        if default_name is not None and default_name not in self.by_name:
            raise InvalidInput(
                f"--default-project {shown(default_name)} is not served here (served: {', '.join(self.by_name)})"
            )
        self.default_name = default_name

    @property
    def default(self) -> Project:
        """The default project if there is one, else the first one named."""
        if self.default_name is not None:
            return self.by_name[self.default_name]
        return next(iter(self.by_name.values()))

    def get(self, name: str | None) -> Project:
        """The project called ``name``; when ``None``, the default (the only one served, or the one
        ``--default-project`` names)."""
        if name is None or name == "":
            if len(self.by_name) == 1 or self.default_name is not None:
                return self.default
            raise InvalidInput(
                "several projects are served and none is the default: name one in the path "
                "(/api/v1/projects/NAME/...: "
                + ", ".join(self.by_name)
                + "), or start the server with --default-project"
            )
        project = self.by_name.get(name)
        if project is None:
            raise UnknownProject(name)
        return project

    def start(self) -> None:
        for project in self.by_name.values():
            threading.Thread(target=project.load, name=f"eventmem-open-{project.name}", daemon=True).start()

    def close(self) -> None:
        for project in self.by_name.values():
            project.ready.wait()
            if project.service_ is not None:
                project.service_.close()
                project.service_ = None


class UnknownProject(InvalidInput, KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no project called {shown(self.name)} is served here"
