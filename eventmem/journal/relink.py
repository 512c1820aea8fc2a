"""``eventmem doctor --fix``: a memory folder that arrived as a symbolic link (a ``git pull`` can bring
one) made real again, so that a stuck project works without anyone deleting things by hand.

A link at ``.eventmem/cache`` (derived) becomes an empty folder, rebuilt on the next read; a link at
``journal/``, ``archive/`` or ``local/`` becomes a folder holding copies of the regular files the link
showed (the segments, this clone's writer id), so nothing is lost; links inside the cache are removed
(derived). What is done is said first, one line each; nothing outside ``.eventmem/`` is touched,
and no file git tracks is removed (a tracked link is replaced by what it showed; the line says to
commit that).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from eventmem.journal.gitrunner import GitError, run_git
from eventmem.journal.project import ProjectPaths

__all__ = ["fix_linked_folders", "linked_folders"]

_KEPT = ("journal", "archive", "local")
"""Folders whose files are copied from the link's target (the cache's are derived)."""


def linked_folders(paths: ProjectPaths) -> list[Path]:
    """The folders of ``.eventmem/`` that are symbolic links, and links inside the cache."""
    found = [
        folder
        for folder in (paths.cache_dir, paths.journal_dir, paths.archive_dir, paths.local_dir)
        if _is_link(folder)
    ]
    if paths.cache_dir.is_dir() and not _is_link(paths.cache_dir):
        for parent, folders, files in os.walk(paths.cache_dir):
            found += [Path(parent) / name for name in folders + files if _is_link(Path(parent) / name)]
    return found


def fix_linked_folders(paths: ProjectPaths, say: Callable[[str], None]) -> list[str]:
    """Replace each of :func:`linked_folders` by a real folder (or remove a link inside the cache),
    saying what it does before doing it. Returns the paths fixed, relative to the root."""
    if _is_link(paths.base):
        say(
            f"{_shown(paths, paths.base)} itself is a symbolic link to {os.readlink(paths.base)}: "
            "not changed; remove it by hand"
        )
        return []
    fixed: list[str] = []
    for link in linked_folders(paths):
        shown = _shown(paths, link)
        target = os.readlink(link)
        tracked = (
            " git tracks the link: commit its removal so that other clones are fixed too."
            if _tracked(paths, link)
            else ""
        )
        if link.parent != paths.base:
            say(f"{shown} is a symbolic link to {target} inside the cache (derived): removing it.{tracked}")
            os.unlink(link)
        elif link.name in _KEPT:
            say(
                f"{shown} is a symbolic link to {target}: replacing it with a real folder holding copies of the "
                f"regular files it shows; {target} itself is left as it is.{tracked}"
            )
            _replace(link, copy=True)
        else:
            say(
                f"{shown} is a symbolic link to {target}: replacing it with an empty folder "
                f"(derived: rebuilt).{tracked}"
            )
            _replace(link, copy=False)
        fixed.append(shown)
    return fixed


def _replace(link: Path, *, copy: bool) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{link.name}-fix-", dir=link.parent))
    try:
        if copy:
            try:
                entries = list(os.scandir(link))
            except OSError:  # (a dangling link, or a target that is not a folder: nothing to keep)
                entries = []
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    shutil.copy2(entry.path, scratch / entry.name, follow_symlinks=False)
        os.unlink(link)
        os.rename(scratch, link)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _shown(paths: ProjectPaths, path: Path) -> str:
    return path.relative_to(paths.root).as_posix()


def _tracked(paths: ProjectPaths, path: Path) -> bool:
    try:
        result = run_git(paths.root, "ls-files", "--", _shown(paths, path), timeout=10, check=False)
    except GitError:
        return False
    return result.returncode == 0 and bool(result.stdout.strip())
