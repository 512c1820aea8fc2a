"""Which project a command works on: the root from ``--root`` or the environment, and its service."""

from __future__ import annotations

import argparse
from typing import Any

from eventmem.adapters.command_line import chosen_root
from eventmem.journal.project import RootChoice

__all__ = ["chosen_root", "open_service_of", "root_of"]


def root_of(args: argparse.Namespace) -> RootChoice:
    return chosen_root(args.root)


def open_service_of(args: argparse.Namespace) -> Any:
    from eventmem.service import open_service

    return open_service(root_of(args))
