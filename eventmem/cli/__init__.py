"""The ``eventmem`` command: ``serve`` for MCP clients, and the same service for people.

Human-readable output by default; ``--json`` prints the objects the MCP tools return.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventmem.cli.boundary import configure_logging, run_command, set_verdict
from eventmem.cli.parser import Parser, build_parser, command_options, global_options
from eventmem.cli.roots import chosen_root

__all__ = [
    "Parser",
    "build_parser",
    "chosen_root",
    "command_options",
    "configure_logging",
    "global_options",
    "main",
    "run_command",
    "set_verdict",
]


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = build_parser().parse_args(argv)
    return run_command(args.func, args)
