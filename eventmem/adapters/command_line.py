"""What every command-line entry point shares (``eventmem``, ``eventmem replay``, ``tools/replay.py``):
the parser, the ``--json`` and ``--root`` options, the choice of the project root, logs on stderr,
and the error boundary that turns every failure into one line and an exit code."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TextIO, cast

from eventmem.core.errors import EventmemError, InvalidInput, told_to
from eventmem.core.terminal import EscapingStream, print_json, printable
from eventmem.journal.project import RootChoice, find_root

__all__ = [
    "EXIT_CODES",
    "Parser",
    "chosen_root",
    "command_options",
    "configure_logging",
    "describe_failure",
    "global_options",
    "run_command",
    "set_verdict",
    "warn",
]


def chosen_root(flag: str | None, *, create: bool = False) -> RootChoice:
    """The project root from ``--root``, else :func:`~eventmem.journal.project.find_root`; it must be an existing
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


class Parser(argparse.ArgumentParser):
    """argparse, with the user's input in its error messages shown escaped."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


JSON_HELP = "print JSON (the objects MCP tools return)"
ROOT_HELP = "project root, an existing folder (default: EVENTMEM_ROOT, else found from the cwd)"


def global_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--root`` before the command."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    parser.add_argument("--root", help=ROOT_HELP)


def command_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--root`` after the command too (given there, they win over the ones before)."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    parser.add_argument("--root", default=argparse.SUPPRESS, help=ROOT_HELP)


class _PrintableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), multiline=True)


def configure_logging() -> None:
    """Logs go to stderr (stdout belongs to the MCP protocol and to --json), at EVENTMEM_LOG_LEVEL,
    with control characters shown escaped (a log line may quote a journal's bytes)."""
    level = os.environ.get("EVENTMEM_LOG_LEVEL", "WARNING").strip().upper() or "WARNING"
    known = isinstance(logging.getLevelName(level), int)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("eventmem %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level if known else "WARNING", handlers=[handler])
    if not known:
        logging.getLogger("eventmem").warning(
            "EVENTMEM_LOG_LEVEL=%r is not a level (DEBUG, INFO, WARNING, ERROR); using WARNING", level
        )


EXIT_CODES = """exit codes: 0 done; 1 the command failed (a disk or journal problem, doctor or audit found
problems, log found no history); 2 bad usage or input (nothing was written). A closed pipe
(eventmem log | head) ends quietly with 0. EVENTMEM_DEBUG=1 shows the traceback of an unexpected error."""


def warn(message: str) -> None:
    """A warning line on stderr (the command goes on)."""
    print(f"eventmem: warning: {printable(message)}", file=sys.stderr)


def describe_failure(exc: BaseException) -> str:
    """One line saying what went wrong: for an OS error, the reason and the file."""
    if isinstance(exc, OSError) and exc.strerror:
        files = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
        return f"{exc.strerror}: {' -> '.join(files)}" if files else exc.strerror
    return str(exc) or type(exc).__name__


def _fail(message: str, code: int, as_json: bool, prog: str) -> int:
    if as_json:
        try:
            print_json({"status": "error", "error": message})
            sys.stdout.flush()
        except OSError:
            pass
    print(f"{prog}: {printable(message)}", file=sys.stderr)
    return code


_VERDICT: dict[str, int] = {}
"""The exit code a command that judges (doctor, check, replay audit) reached before printing."""


def set_verdict(code: int) -> None:
    """Record a judging command's exit code before it prints: a reader that goes away early
    (``eventmem check | head``) must not turn a failed check into a success."""
    _VERDICT["code"] = code


def _quiet_stdout() -> None:
    """The reader went away (``eventmem log | head -1``): drop the rest of the output, as Unix tools do."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_command(
    func: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
    *,
    prog: str = "eventmem",
    raw_stdout: bool = False,
) -> int:
    """Run one command behind the error boundary: every failure is one line on stderr and an exit code
    (:data:`EXIT_CODES`); human-readable output passes through :class:`~eventmem.core.terminal.EscapingStream`
    (not with ``raw_stdout``: ``eventmem serve``, whose stdout is the protocol's)."""
    as_json = bool(getattr(args, "json", False))
    stdout = sys.stdout
    if not as_json and not raw_stdout:
        sys.stdout = cast(TextIO, EscapingStream(stdout))
    _VERDICT.clear()
    try:
        code = func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return _VERDICT.get("code", 0)
    except KeyboardInterrupt:
        return 130
    except InvalidInput as exc:
        return _fail(told_to(exc, "cli"), 2, as_json, prog)
    except (EventmemError, OSError) as exc:
        return _fail(describe_failure(exc), 1, as_json, prog)
    except Exception as exc:
        debug = os.environ.get("EVENTMEM_DEBUG", "").strip() not in ("", "0")
        if debug:
            traceback.print_exc()
        where = "the traceback is above" if debug else "run it again with EVENTMEM_DEBUG=1 for the traceback"
        command = " ".join(
            str(part) for part in (getattr(args, "command", None), getattr(args, "replay_command", None)) if part
        )
        what = f"`{prog} {command}`" if command else f"`{prog}`"
        return _fail(
            f"{what} failed unexpectedly ({type(exc).__name__}: {describe_failure(exc)}); {where}", 1, as_json, prog
        )
    finally:
        sys.stdout = stdout
