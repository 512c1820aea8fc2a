"""Which project a command works on: the root from ``--root`` or the environment, and its service."""

from __future__ import annotations

import argparse
from typing import Any

from eventmem.adapters.command_line import chosen_root, describe_failure, warn
from eventmem.core.errors import EventmemError
from eventmem.journal.project import RootChoice

__all__ = ["chosen_root", "close_service", "open_service_of", "root_of"]


def root_of(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


def open_service_of(args: argparse.Namespace) -> Any:
    from eventmem.context.project_context import write_section
    from eventmem.service import open_service

    return open_service(root_of(args), sections=write_section)


def close_service(service: Any, *, done: str = "") -> None:
    """Close a command's service, so that a long tail it caught up (a merged branch) goes into the
    snapshot and the next command does not read it again. A cache that cannot be written is only
    said: the journal holds everything. ``done``: what the command did, said first (``saved``)."""
    try:
        service.close()
    except (OSError, EventmemError) as exc:
        said = f"{done}, but the cache" if done else "the cache"
        warn(f"{said} could not be written ({describe_failure(exc)}); it is rebuilt on a later call")
