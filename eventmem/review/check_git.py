"""What ``eventmem check`` reads from git objects: the branch's files, its config, and when each line was committed."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from eventmem.core.limits import MAX_CHECKED_BLOB_BYTES
from eventmem.journal.config import network_settings, setting_problems
from eventmem.journal.history import HistoryError, cat_file, git
from eventmem.journal.setting_rules import named_paths
from eventmem.review.audit_report import Finding
from eventmem.review.trust_audit import setting_line

__all__ = [
    "SYMLINK",
    "Blob",
    "Line",
    "commit_of",
    "commit_times",
    "error_finding",
    "ls_links",
    "ls_tree",
    "odd_segments",
    "read_blobs",
    "read_config",
    "render_folder",
]

CONFIG_BYTES: Final = 1 << 20
SYMLINK: Final = "120000"


@dataclass(frozen=True, slots=True)
class Blob:
    mode: str
    oid: str
    size: int


@dataclass(frozen=True, slots=True)
class Line:
    path: str
    number: int
    offset: int
    data: bytes


def error_finding(code: str, path: str, line: int, offset: int, message: str) -> Finding:
    return Finding(code=code, severity="error", path=path, line=line, offset=offset, message=message)


def commit_of(root: Path, rev: str) -> str:
    try:
        return git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").decode().strip()
    except HistoryError:
        raise HistoryError(f"{rev!r} is not a git revision of {root}") from None


def ls_tree(root: Path, commit: str, folders: Iterable[str]) -> dict[str, Blob]:
    """Every file under ``folders`` at ``commit``: path (from the repository's top) to its blob."""
    out = git(root, "--literal-pathspecs", "ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", *folders)
    tree: dict[str, Blob] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        if not tab or len(fields) != 4 or fields[1] != b"blob":
            continue
        size = int(fields[3]) if fields[3].isdigit() else 0
        tree[name.decode("utf-8", "surrogateescape")] = Blob(fields[0].decode(), fields[2].decode(), size)
    return tree


def odd_segments(root: Path, commit: str, memory_dir: str) -> dict[str, str]:
    """Entries of the journal and archive folders at ``commit`` named like a segment that are not
    files (a folder, a submodule): path to its object id."""
    folders = [f"{memory_dir}/journal/", f"{memory_dir}/archive/"]
    out = git(root, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", *folders)
    odd: dict[str, str] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if tab and len(fields) == 3 and fields[1] != b"blob" and path.endswith(".jsonl"):
            odd[path] = fields[2].decode()
    return odd


def ls_links(root: Path, commit: str, paths: list[str]) -> dict[str, Blob]:
    """Which of ``paths`` (exact paths, not walked) are symlinks at ``commit``."""
    if not paths:
        return {}
    out = git(root, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", *paths)
    links: dict[str, Blob] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if tab and len(fields) == 3 and fields[0].decode() == SYMLINK and path in paths:
            links[path] = Blob(fields[0].decode(), fields[2].decode(), 0)
    return links


def read_blobs(root: Path, blobs: dict[str, Blob], findings: list[Finding]) -> dict[str, bytes]:
    """The bytes of each blob, those over the size limit left unread and reported."""
    readable = {path: blob for path, blob in blobs.items() if blob.size <= MAX_CHECKED_BLOB_BYTES}
    for path in blobs.keys() - readable.keys():
        message = f"{blobs[path].size} bytes, more than the {MAX_CHECKED_BLOB_BYTES} the check reads: not checked"
        findings.append(error_finding("too-large", path, 0, -1, message))
    paths = sorted(readable)
    contents = cat_file(root, [readable[path].oid for path in paths])
    return {path: data or b"" for path, data in zip(paths, contents, strict=True)}


def read_config(
    root: Path,
    memory_dir: str,
    head: dict[str, Blob],
    base: dict[str, Blob],
    findings: list[Finding],
    name: str = "config.toml",
    commit: str | None = None,
) -> dict[str, Any]:
    """The branch's tracked config table; its network settings reported when the branch changed it."""
    path = f"{memory_dir}/{name}"
    blob = head.get(path)
    if blob is None or blob.mode == SYMLINK:
        return {}
    changed = base.get(path) != blob
    if blob.size > CONFIG_BYTES:
        if changed:
            findings.append(error_finding("too-large", path, 0, -1, f"{blob.size} bytes, more than a config may hold"))
        return {}
    text = (cat_file(root, [blob.oid])[0] or b"").decode("utf-8", "replace")
    try:
        table: dict[str, Any] = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        if changed:
            line = getattr(exc, "lineno", 1)
            findings.append(error_finding("invalid-config", path, line, -1, f"not valid TOML: {exc}"))
        return {}
    if changed:
        for setting in network_settings(table):
            line = setting_line(text, setting.split(" =", 1)[0])
            message = f"tracked setting {setting}; a tracked setting may only choose what stays on the machine"
            findings.append(error_finding("network-setting", path, line, -1, message))
        problems = setting_problems(table)
        if commit is not None:
            problems = _linked_paths(root, commit, memory_dir, table) | problems
        for key, reason in problems.items():  # (ignored where merged: its default is used)
            shown = _one_line(repr(table[key]))[:80]
            message = f"invalid setting: {key} = {shown}: {reason}; eventmem would ignore it and use the default"
            findings.append(error_finding("invalid-config", path, setting_line(text, key), -1, message))
    return table


def _linked_paths(root: Path, commit: str, memory_dir: str, table: dict[str, Any]) -> dict[str, str]:
    """Settings naming a path that passes through a symbolic link at ``commit``, with why."""
    prefix = memory_dir.removesuffix(".eventmem")
    found: dict[str, str] = {}
    for key, value in table.items():
        if key == "render_ai_dir":
            continue  # (a link on the way to the render folder is told as a symlink finding)
        for given, _kind in named_paths(str(key), value):
            relative = Path(given)
            if relative.is_absolute() or ".." in relative.parts:
                continue  # (told by setting_problems)
            steps = [prefix + step.as_posix() for step in (relative, *relative.parents) if step.parts]
            links = ls_links(root, commit, steps)
            if links:
                found[str(key)] = f"{min(links)} is a symbolic link; a tracked setting names no path through a link"
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_folder(config: dict[str, Any], memory_dir: str) -> list[str]:
    render = config.get("render_ai_dir")
    if not isinstance(render, str) or not render.strip() or render.startswith("/") or "\0" in render:
        return []
    if ".." in Path(render).parts:
        return []
    prefix = memory_dir.removesuffix(".eventmem")
    return [prefix + render.strip().strip("/")]


def commit_times(root: Path, head: str, lines: list[Line], now: float) -> dict[tuple[str, int], float]:
    """When the commit that added each line was made (``git blame``); a line blame cannot place
    gets the head commit's time."""
    by_path: dict[str, list[int]] = {}
    for line in lines:
        by_path.setdefault(line.path, []).append(line.number)
    try:
        fallback = float(git(root, "show", "-s", "--format=%ct", head).decode().strip() or now)
    except (HistoryError, ValueError):
        fallback = now
    times: dict[tuple[str, int], float] = {}
    for path, numbers in by_path.items():
        try:
            out = git(root, "blame", "--line-porcelain", "-L", f"{min(numbers)},{max(numbers)}", head, "--", path)
        except HistoryError:
            out = b""
        final = 0
        for row in out.split(b"\n"):
            fields = row.split(b" ")
            if len(fields) >= 3 and len(fields[0]) == 40 and fields[2].isdigit():
                final = int(fields[2])
            elif len(fields) == 2 and fields[0] == b"committer-time" and fields[1].isdigit():
                times[(path, final)] = float(fields[1])
        for number in numbers:
            times.setdefault((path, number), fallback)
    return times
