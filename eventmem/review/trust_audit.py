"""The audit's trust checks: symlinks that could lead paths out of the project, a cache tracked in git,
and tracked settings that reach the network or read the environment."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from eventmem.core.limits import MAX_CONFIG_BYTES
from eventmem.journal.gitrunner import GitError, run_git
from eventmem.review.audit_report import Finding

__all__ = ["setting_line", "trust_findings"]


def trust_findings(root: Path) -> list[Finding]:
    """Symlinks in ``.eventmem/`` (its cache aside) or in the render folder, and settings of
    ``.eventmem/config.toml`` that reach the network or read the environment."""
    from eventmem.journal.config import is_approved, network_settings

    found: list[Finding] = []
    table = _config_table(root / ".eventmem" / "config.toml")
    folders = [".eventmem"]
    render = table.get("render_ai_dir")
    if isinstance(render, str) and _inside(render):
        folders.append(os.path.normpath(render))
        # a folder on the way to it that is a link leads the view's files out of the project too
        linked = [
            parent for parent in reversed(Path(folders[-1]).parents) if parent.parts and (root / parent).is_symlink()
        ]
        if linked:
            found.extend(_symlinks(root, linked[0].as_posix()))
            folders.pop()
    for folder in folders:
        found.extend(_symlinks(root, folder))
    found.extend(_tracked_cache(root))
    text = _read_capped(root / ".eventmem" / "config.toml")
    settings = network_settings(table)
    approved = bool(settings) and is_approved(root / ".eventmem" / "config.toml")
    for setting in settings:
        key = setting.split(" =", 1)[0]
        message = f"tracked setting {setting}; a tracked setting may only choose what stays on the machine"
        if approved:  # the user's own choice on this machine: noted, and still an error for `eventmem check`
            message = f"tracked setting {setting}; in effect here by `eventmem allow`"
        found.append(
            Finding(
                code="network-setting",
                severity="warning" if approved else "error",
                path=".eventmem/config.toml",
                line=setting_line(text, key),
                offset=-1,
                message=message,
            )
        )
    return found


def _tracked_cache(root: Path) -> list[Finding]:
    """Files of ``.eventmem/cache/`` or ``.eventmem/local/`` that git tracks: each clone's own, so a
    tracked one came from someone else (a snapshot can hold memories that no journal line has)."""
    if not os.path.lexists(root / ".git"):
        return []
    try:
        listed = run_git(root, "ls-files", "-z", "--", ".eventmem/cache", ".eventmem/local", timeout=30, check=False)
    except GitError:
        return []
    message = "a file of this clone's own cache is tracked by git: remove it from the index (`git rm --cached`)"
    return [
        Finding(code="tracked-cache", severity="error", path=name, line=0, offset=-1, message=message)
        for name in sorted(os.fsdecode(item) for item in listed.stdout.split(b"\0") if item)
    ]


def _inside(folder: str) -> bool:
    """A folder named in a setting that stays inside the project (anything else is not walked)."""
    return bool(folder.strip()) and not os.path.isabs(folder) and "\0" not in folder and ".." not in Path(folder).parts


def setting_line(text: str, key: str) -> int:
    """The 1-based line where ``key = …`` is set in a TOML text (1 when it cannot be told)."""
    for number, line in enumerate(text.splitlines(), 1):
        name = line.split("=", 1)[0].strip().strip("\"'")
        if "=" in line and name == key:
            return number
    return 1


def _symlinks(root: Path, folder: str) -> list[Finding]:
    found: list[Finding] = []
    message = "a symlink: paths must never leave the project (git stores it as mode 120000)"
    top = root / folder
    if top.is_symlink():
        return [Finding(code="symlink", severity="error", path=folder, line=0, offset=-1, message=message)]
    for here, dirs, files in os.walk(top):
        relative = os.path.relpath(here, root)
        if relative == os.path.join(".eventmem", "cache"):
            dirs.clear()
            continue
        for name in sorted(dirs + files):
            if os.path.islink(os.path.join(here, name)):
                path = os.path.join(relative, name)
                found.append(Finding(code="symlink", severity="error", path=path, line=0, offset=-1, message=message))
    return found


def _read_capped(path: Path) -> str:
    try:  # a symlinked config is reported, never followed
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")


def _config_table(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(_read_capped(path))
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}
