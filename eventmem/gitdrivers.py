"""Optional comfort for git: readable diffs of journal segments, and the union merge attribute.

Nothing depends on these: every clone and branch appends to its own segment, so plain ``git merge``
does not conflict without them. ``eventmem init --git-drivers`` adds, to ``.eventmem/.gitattributes``
(tracked, so every clone gets the attributes), ``diff=eventmem`` for journal and archive segments,
and to this clone's ``.git/config`` (git never shares it) the driver behind that name:

- ``diff.eventmem.command``: ``eventmem diff --git-driver``, so ``git diff`` shows the memories
  that were added, changed (which fields), deleted, expired or promoted, instead of JSON lines;
- ``diff.eventmem.textconv``: ``eventmem diff --textconv``, one sentence per event, used where git
  does not run external diff commands (``git log -p``, ``git show``).

``eventmem init --git-hooks`` installs a ``pre-push`` hook in this clone that runs ``eventmem check``.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Final

from eventmem.history import git
from eventmem.project import GITATTRIBUTES, ProjectPaths

__all__ = ["ATTRIBUTE_LINES", "install", "install_pre_push"]

ATTRIBUTE_LINES: Final = ("journal/*.jsonl diff=eventmem", "archive/*.jsonl diff=eventmem")


def eventmem_command() -> str:
    """How git should run eventmem: by name when it is on the PATH, else with this interpreter."""
    return "eventmem" if shutil.which("eventmem") else f"{shlex.quote(sys.executable)} -m eventmem"


def install(paths: ProjectPaths) -> dict[str, Any]:
    """Write the attributes (keeping any already there) and configure the diff driver in this clone."""
    paths.ensure()
    attributes = paths.base / ".gitattributes"
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
        config = {
            "diff.eventmem.command": f"{command} diff --git-driver",
            "diff.eventmem.textconv": f"{command} diff --textconv",
        }
        for key, value in config.items():
            git(paths.root, "config", "--local", key, value)
    return {"attributes": str(attributes), "added_lines": wanted, "git_config": config}


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
