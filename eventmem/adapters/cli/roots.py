"""Which project a command works on: the root from ``--root`` or the environment, and its service."""

from __future__ import annotations

import argparse
from typing import Any

from eventmem.adapters.command_line import chosen_root, describe_failure, warn
from eventmem.core.errors import EventmemError
from eventmem.journal.project import RootChoice

__all__ = ["chosen_root", "close_service", "open_service_of", "render_view", "root_of"]


def root_of(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


def open_service_of(args: argparse.Namespace) -> Any:
    from eventmem.context.project_context import write_section
    from eventmem.service import open_service

    return open_service(root_of(args), sections=write_section)


def render_view(service: Any, wrote: Any = None) -> None:
    """Render the ``.ai/`` view after a command's write, as a running server does: when ``wrote`` (the
    memory written) is a project-context section's, or, with no memory named (a rebuild, an import),
    whenever the project has any project context or a view already rendered. Only files whose text
    changed are written; a render folder that is refused is said in one line and the write stands."""
    from eventmem.context.project_context import ProjectContext
    from eventmem.context.reading import is_section_memory
    from eventmem.core.errors import InvalidInput

    if wrote is not None and not is_section_memory(wrote.id, wrote.kind):
        return
    try:
        context = ProjectContext(service, by="cli")
        if wrote is None and not context.has_entries() and not context.view_dir().is_dir():
            return  # no project context, and no view that could be stale
        context.render_view()
    except InvalidInput as exc:
        warn(f"the .ai view was not rendered: {exc}")


def close_service(service: Any, *, done: str = "", wrote: Any = None) -> None:
    """Close a command's service, so that a long tail it caught up (a merged branch) goes into the
    snapshot and the next command does not read it again. A cache that cannot be written is only
    said: the journal holds everything. ``done``: what the command did, said first (``saved``);
    ``wrote``: the memory it wrote, whose write re-renders the ``.ai/`` view if it is a section's."""
    if done:
        render_view(service, wrote)
    try:
        service.close()
    except (OSError, EventmemError) as exc:
        said = f"{done}, but the cache" if done else "the cache"
        warn(f"{said} could not be written ({describe_failure(exc)}); it is rebuilt on a later call")
