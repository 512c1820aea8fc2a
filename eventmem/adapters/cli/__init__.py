"""The ``eventmem`` commands for people: the service on the command line (``eventmem serve``, for MCP
clients, is added by :mod:`eventmem.main`, the program's entry point).

Human-readable output by default; ``--json`` prints the objects the MCP tools return.
"""

from __future__ import annotations

from eventmem.adapters.cli.parser import build_parser

__all__ = ["build_parser"]
