"""The one way eventmem runs git.

Every call has a timeout, stdin closed (or given bytes), no pager, no prompt for credentials, no
optional lock (looking never takes the index lock from a commit in progress), the C locale (git's
messages are the same everywhere) and ``core.quotepath=off``. A failure is :class:`GitError`, whose
message is one line: the git command and the last line git wrote to stderr.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from eventmem.core.errors import EventmemError

__all__ = ["GIT_TIMEOUT", "GitError", "GitResult", "git_bytes", "git_text", "run_git"]

GIT_TIMEOUT: Final = 120.0
"""Seconds a git command may take unless the caller says otherwise."""

_ENVIRONMENT: Final = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "LC_ALL": "C",
}


class GitError(EventmemError):
    """git could not be run, did not answer in time, or exited with an error."""

    def __init__(self, message: str, *, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        """Everything git wrote to stderr (decoded, replacing what is not UTF-8)."""
        self.returncode = returncode
        """git's exit status (``None`` when it did not run or did not finish)."""


@dataclass(frozen=True, slots=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (what is not UTF-8 replaced)."""
        return self.stdout.decode("utf-8", "replace")


def run_git(
    root: Path, *args: str, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT, check: bool = True
) -> GitResult:
    """Run ``git args`` in ``root``. Raises :class:`GitError` when git is missing or times out, and
    (with ``check``) when it exits with an error; without ``check`` the exit status is the caller's."""
    command = args[0] if args else "git"
    environment = dict(os.environ) | _ENVIRONMENT
    try:
        done = subprocess.run(
            ["git", "--no-pager", "-c", "core.quotepath=off", *args],
            cwd=root,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=timeout,
            env=environment,
            check=False,
        )
    except FileNotFoundError as exc:
        if exc.filename not in (None, "git"):  # the folder to run in is missing, not git
            raise GitError(f"git could not be run in {root}: {exc.strerror or exc}") from None
        raise GitError("git is not installed (no `git` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {command} did not answer within {timeout:g} seconds") from None
    except OSError as exc:
        raise GitError(f"git could not be run ({exc.strerror or exc})") from None
    stderr = done.stderr.decode("utf-8", "replace")
    if check and done.returncode != 0:
        lines = stderr.strip().splitlines()
        reason = lines[-1].strip() if lines else f"failed (exit {done.returncode})"
        raise GitError(f"git {command}: {reason}", stderr=stderr, returncode=done.returncode)
    return GitResult(done.returncode, done.stdout, stderr)


def git_bytes(root: Path, *args: str, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT) -> bytes:
    """stdout of ``git args`` in ``root``, as bytes; a failure is :class:`GitError`."""
    return run_git(root, *args, stdin=stdin, timeout=timeout).stdout


def git_text(root: Path, *args: str, timeout: float = GIT_TIMEOUT) -> str:
    """stdout of ``git args`` in ``root``, decoded as UTF-8; a failure is :class:`GitError`."""
    return run_git(root, *args, timeout=timeout).text
