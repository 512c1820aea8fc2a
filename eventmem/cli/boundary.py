"""The CLI's error boundary: one line on stderr and an exit code for every failure, logs on stderr."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import TextIO, cast

from eventmem.errors import EventmemError, InvalidInput
from eventmem.terminal import EscapingStream, print_json, printable

__all__ = [
    "EXIT_CODES",
    "configure_logging",
    "failure",
    "protocol_on_stdout",
    "run_command",
    "set_verdict",
    "warn",
]

Command = Callable[[argparse.Namespace], int]


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
    print(f"eventmem: warning: {printable(message)}", file=sys.stderr)


def failure(exc: BaseException) -> str:
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


_RAW_STDOUT: set[Command] = set()
"""Commands whose stdout is a protocol (``serve``): never passed through the escaping stream."""


def protocol_on_stdout(func: Command) -> Command:
    """Mark a command whose stdout carries a protocol, left as it is by :func:`run_command`."""
    _RAW_STDOUT.add(func)
    return func


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


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, *, prog: str = "eventmem") -> int:
    """Run one command behind the error boundary: every failure is one line on stderr and an exit code
    (:data:`EXIT_CODES`); human-readable output passes through :class:`~eventmem.terminal.EscapingStream`."""
    as_json = bool(getattr(args, "json", False))
    stdout = sys.stdout
    if not as_json and func not in _RAW_STDOUT:
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
        return _fail(str(exc), 2, as_json, prog)
    except (EventmemError, OSError) as exc:
        return _fail(failure(exc), 1, as_json, prog)
    except Exception as exc:
        debug = os.environ.get("EVENTMEM_DEBUG", "").strip() not in ("", "0")
        if debug:
            traceback.print_exc()
        where = "the traceback is above" if debug else "run it again with EVENTMEM_DEBUG=1 for the traceback"
        command = " ".join(
            str(part) for part in (getattr(args, "command", None), getattr(args, "replay_command", None)) if part
        )
        what = f"`{prog} {command}`" if command else f"`{prog}`"
        return _fail(f"{what} failed unexpectedly ({type(exc).__name__}: {failure(exc)}); {where}", 1, as_json, prog)
    finally:
        sys.stdout = stdout
