"""The working tree's changes, from git: changed files, line counts, and a one-line summary.

Runs a few short ``git`` commands in the project root through :mod:`eventmem.journal.gitrunner` (never on a
hot path: only when a tool asks; looking never takes the index lock from a commit in progress).
Outside a git work tree, or without git, the answer says so instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from eventmem.journal.gitrunner import GitError, GitResult, run_git

__all__ = ["GitFile", "changes", "diff_summary", "parse_numstat", "parse_porcelain"]

GIT_TIMEOUT: Final = 20.0
UNTRACKED_READ_LIMIT: Final = 2 << 20


@dataclass
class GitFile:
    path: str
    status: str
    """``added``, ``modified``, ``deleted``, ``renamed``, ``untracked``, ``conflicted``…"""
    added: int | None = 0
    """Lines added (``None`` for a binary file)."""
    deleted: int | None = 0
    renamed_from: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "status": self.status, "added": self.added, "deleted": self.deleted}
        if self.renamed_from:
            out["renamedFrom"] = self.renamed_from
        return out


_STATUS: Final = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "C": "copied", "T": "modified"}


def parse_porcelain(output: str) -> list[GitFile]:
    """``git status --porcelain=v1 -z`` into files with a plain-word status."""
    parts = output.split("\0")
    files: list[GitFile] = []
    i = 0
    while i < len(parts):
        item = parts[i]
        i += 1
        if len(item) < 4:
            continue
        xy, path = item[:2], item[3:]
        renamed_from = ""
        if "R" in xy or "C" in xy:
            renamed_from = parts[i] if i < len(parts) else ""
            i += 1
        if xy == "??":
            status = "untracked"
        elif "U" in xy or xy in ("AA", "DD"):
            status = "conflicted"
        else:
            code = xy[0] if xy[0] not in (" ", "?") else xy[1]
            status = _STATUS.get(code, "modified")
        files.append(GitFile(path, status, renamed_from=renamed_from))
    return files


def parse_numstat(output: str) -> dict[str, tuple[int | None, int | None]]:
    """``git diff --numstat -z`` into lines added and deleted by path (``None`` for binary)."""
    stats: dict[str, tuple[int | None, int | None]] = {}
    parts = output.split("\0")
    i = 0
    while i < len(parts):
        item = parts[i]
        i += 1
        fields = item.split("\t")
        if len(fields) < 3:
            continue
        added, deleted, path = fields[0], fields[1], fields[2]
        if not path:  # a rename: the next two parts are the old and the new path
            path = parts[i + 1] if i + 1 < len(parts) else ""
            i += 2
        a = None if added == "-" else int(added)
        d = None if deleted == "-" else int(deleted)
        old = stats.get(path)
        if old is not None and None not in old and a is not None and d is not None:
            a, d = (old[0] or 0) + a, (old[1] or 0) + d
        stats[path] = (a, d)
    return stats


def diff_summary(files: Sequence[GitFile], *, listed: int = 10) -> str:
    """One line: ``3 files changed (+42 −7): src/a.py (+30 −2), README.md (new), …``."""
    if not files:
        return "No changes in the working tree."
    added = sum(f.added or 0 for f in files)
    deleted = sum(f.deleted or 0 for f in files)
    parts = []
    for f in files[:listed]:
        if f.status == "untracked":
            note = "new"
        elif f.status == "deleted":
            note = "deleted"
        elif f.added is None:
            note = "binary"
        else:
            note = f"+{f.added} −{f.deleted}"
        if f.renamed_from:
            note = f"renamed from {f.renamed_from}, {note}"
        parts.append(f"{f.path} ({note})")
    more = f", … and {len(files) - listed} more" if len(files) > listed else ""
    noun = "file" if len(files) == 1 else "files"
    return f"{len(files)} {noun} changed (+{added} −{deleted}): {', '.join(parts)}{more}"


def changes(root: Path, *, exclude: Sequence[str] = (), branch: str = "") -> dict[str, Any]:
    """Staged, unstaged and untracked changes under ``root`` against ``HEAD`` (or, before the first
    commit, against nothing), except paths under the ``exclude`` prefixes (relative to ``root``).
    ``branch`` is reported when there is no commit to name one."""
    try:
        inside = _git(root, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
    except GitError as exc:
        return _unavailable(str(exc))
    lines = inside.text.split("\n")
    if inside.returncode != 0 or lines[0].strip() != "true":
        return _unavailable(f"{root} is not inside a git work tree")
    top = Path(lines[1].strip()).resolve() if len(lines) > 1 and lines[1].strip() else root.resolve()
    try:
        prefix = root.resolve().relative_to(top).as_posix()
    except ValueError:
        prefix = "."
    prefix = "" if prefix == "." else prefix + "/"
    excluded = [prefix + p for p in exclude]
    has_head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD").returncode == 0
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".")
    if status.returncode != 0:
        return _unavailable(f"git status failed: {status.stderr.strip()[:200]}")
    if has_head:
        numstat = parse_numstat(_git(root, "diff", "--numstat", "-z", "-M", "HEAD", "--", ".").text)
    else:
        numstat = parse_numstat(_git(root, "diff", "--numstat", "-z", "--cached", "--", ".").text)
        for path, counts in parse_numstat(_git(root, "diff", "--numstat", "-z", "--", ".").text).items():
            old = numstat.get(path)
            if old is None or None in old or None in counts:
                numstat[path] = counts
            else:
                numstat[path] = ((old[0] or 0) + (counts[0] or 0), (old[1] or 0) + (counts[1] or 0))
    files: list[GitFile] = []
    for item in parse_porcelain(status.text):
        if any(item.path.startswith(p) for p in excluded):
            continue
        if item.path in numstat:
            item.added, item.deleted = numstat[item.path]
        elif item.status == "untracked":
            item.added, item.deleted = _count_lines(top / item.path), 0
        files.append(item)
    files.sort(key=lambda f: f.path)
    if has_head:
        branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD").text.strip() or branch
    return {
        "available": True,
        "branch": branch,
        "files": [f.to_dict() for f in files],
        "stats": {
            "files": len(files),
            "insertions": sum(f.added or 0 for f in files),
            "deletions": sum(f.deleted or 0 for f in files),
        },
        "summary": diff_summary(files),
    }


def _unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason, "files": [], "summary": ""}


def _git(root: Path, *args: str) -> GitResult:
    return run_git(root, *args, timeout=GIT_TIMEOUT, check=False)


def _count_lines(path: Path) -> int | None:
    """Lines of an untracked file (``None`` for a binary or an unreadable one)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(UNTRACKED_READ_LIMIT)
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
