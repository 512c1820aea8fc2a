"""Optional comfort for git: readable diffs of journal segments, and the union merge attribute.

Nothing depends on these: every clone and branch appends to its own segment, so plain ``git merge``
does not conflict without them. ``eventmem init --git-drivers`` adds, to ``.eventmem/.gitattributes``
(tracked, so every clone gets the attributes), ``diff=eventmem`` for journal and archive segments,
and to this clone's ``.git/config`` (git never shares it) the driver behind that name:

- ``diff.eventmem.command``: ``eventmem diff --git-driver``, so ``git diff`` shows the memories
  that were added, changed (which fields), deleted, expired or promoted, instead of JSON lines;
- ``diff.eventmem.textconv``: ``eventmem diff --textconv``, one sentence per event, used where git
  does not run external diff commands (``git log -p``, ``git show``).

Both name eventmem by the absolute path of the interpreter that installed them (``/…/.venv/bin/python
-m eventmem``), so they run from any shell, IDE or git GUI, whatever its ``PATH``: a bare ``eventmem``
made ``git diff`` die ("external diff died") wherever the virtualenv was not on the ``PATH``.
:func:`check` (run by ``eventmem doctor``) tells whether the configured commands still run.

``eventmem init --git-hooks`` installs a ``pre-push`` hook in this clone that runs ``eventmem check``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from eventmem.journal.history import HistoryError, git
from eventmem.journal.project import GITATTRIBUTES, ProjectPaths

__all__ = ["ATTRIBUTE_LINES", "DRIVER_KEYS", "check", "install", "install_pre_push"]

ATTRIBUTE_LINES: Final = ("journal/*.jsonl diff=eventmem", "archive/*.jsonl diff=eventmem")
DRIVER_KEYS: Final = ("diff.eventmem.command", "diff.eventmem.textconv")
FIX: Final = "run `eventmem init --git-drivers` again with the eventmem you use"


def eventmem_command() -> str:
    """How git should run eventmem: this interpreter by its absolute path, quoted for git's shell."""
    return f"{shlex.quote(sys.executable)} -m eventmem"


def install(paths: ProjectPaths) -> dict[str, Any]:
    """Write the attributes (keeping any already there) and configure the diff driver in this clone."""
    paths.ensure()
    attributes = paths.inside(paths.base / ".gitattributes")  # never through a link
    text = attributes.read_text(encoding="utf-8") if attributes.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    wanted = [line for line in ATTRIBUTE_LINES if line not in present]
    if "merge=union" not in text:
        wanted += [line for line in GITATTRIBUTES.splitlines() if line and not line.startswith("#")]
    if wanted:
        separator = "" if text.endswith("\n") or not text else "\n"
        attributes.write_text(text + separator + "\n".join(wanted) + "\n", encoding="utf-8")
    config: dict[str, str] = {}
    if paths.git_dir() is not None:
        command = eventmem_command()
        config = dict(zip(DRIVER_KEYS, (f"{command} diff --git-driver", f"{command} diff --textconv"), strict=True))
        for key, value in config.items():
            git(paths.root, "config", "--local", key, value)
    return {"attributes": str(attributes), "added_lines": wanted, "git_config": config}


def check(paths: ProjectPaths) -> list[dict[str, Any]]:
    """Each configured driver of this clone, whether its program runs (``--version`` answers), and if
    not, why and how to fix it. Empty when no driver is configured or the root is not a repository."""
    if paths.git_dir() is None:
        return []
    results: list[dict[str, Any]] = []
    for key in DRIVER_KEYS:
        try:
            value = git(paths.root, "config", "--get", key).decode("utf-8", "replace").strip()
        except HistoryError:  # not set (git config exits 1), or git is missing
            continue
        problem = _problem(value)
        results.append({"key": key, "command": value, "runs": problem is None, "problem": problem})
    return results


def _problem(command: str) -> str | None:
    """Why ``command`` (a driver's shell command, before git's arguments) would not run everywhere, or None."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"the command cannot be parsed ({exc}); {FIX}"
    program = words[: words.index("diff")] if "diff" in words else words
    if not program:
        return f"the command names no program; {FIX}"
    try:
        result = subprocess.run([*program, "--version"], capture_output=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return f"{program[0]} did not answer `--version`; {FIX}"
    except OSError as exc:
        return f"{program[0]} cannot be run ({exc.strerror or exc}); {FIX}"
    if result.returncode != 0:
        return f"`{shlex.join(program)} --version` failed (exit {result.returncode}); {FIX}"
    if not os.path.isabs(program[0]):
        return f"{program[0]} is not an absolute path: it runs only where it is on the PATH; {FIX}"
    return None


_HOOK_MARK: Final = "# installed by eventmem init --git-hooks"


def install_pre_push(root: Path) -> str:
    """Install a ``pre-push`` hook in this clone that runs ``eventmem check``; an existing hook of
    someone else's is left alone. Returns what was done, in words."""
    hook = root / git(root, "rev-parse", "--git-path", "hooks/pre-push").decode("utf-8", "surrogateescape").strip()
    if hook.exists() and _HOOK_MARK not in hook.read_text(encoding="utf-8", errors="replace"):
        return f"left alone: {hook} exists and is not eventmem's"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(
        f"#!/bin/sh\n{_HOOK_MARK}: a push fails while the branch's journal does not pass\n"
        f"exec {eventmem_command()} check\n",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return f"installed in {hook}"
