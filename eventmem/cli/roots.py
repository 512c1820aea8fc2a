"""Which project a command works on: the root from ``--root`` or the environment, and its service."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eventmem.errors import InvalidInput
from eventmem.project import RootChoice, find_root

__all__ = ["chosen_root", "open_service_of", "root_of"]


def chosen_root(flag: str | None, *, create: bool = False) -> RootChoice:
    """The project root from ``--root``, else :func:`~eventmem.project.find_root`; it must be an existing
    folder (a mistyped path must not quietly start a new memory), unless ``create`` (``eventmem init``)."""
    root = RootChoice(Path(flag).expanduser().resolve(), "flag:--root") if flag else find_root()
    if create and not root.root.exists():
        root.root.mkdir(parents=True)
    if not root.root.exists():
        raise InvalidInput(
            f"the project root {root.root} (chosen by {root.source}) does not exist; "
            "check the path, or create a memory there with `eventmem init --root PATH`"
        )
    if not root.root.is_dir():
        raise InvalidInput(f"the project root {root.root} (chosen by {root.source}) is not a folder")
    return root


def root_of(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


def open_service_of(args: argparse.Namespace) -> Any:
    from eventmem.service import open_service

    return open_service(root_of(args))
