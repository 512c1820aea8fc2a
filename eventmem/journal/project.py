"""Where a project's memory lives: the root, the ``.eventmem/`` layout, the writer and the branch.

Layout (tracked unless said otherwise)::

    .eventmem/
      journal/<writer>.<branch>.jsonl   append-only segments, the only source of truth
      archive/*.jsonl                   immutable segments written by compaction
      config.toml                       project settings
      config.local.toml                 this clone's own settings, never committed
      .gitignore                        ignores cache/, local/, config.local.toml and the lock
      cache/                            derived, disposable (snapshots, embeddings)
      local/                            this clone's own data (usage counts), never committed
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from eventmem.journal.files import atomic_write, check_inside, confine, make_dirs

__all__ = ["ProjectPaths", "RootChoice", "find_root", "global_root"]

ROOT_ENV_VARS: Final = ("EVENTMEM_ROOT", "PROJECT_MEMORY_ROOT")
ROOT_MARKERS: Final = (".eventmem", ".ai", "package.json", ".git")
GITIGNORE: Final = (
    "# derived or local to this clone: never committed\ncache/\nlocal/\njournal.lock\nwriter\nconfig.local.toml\n"
    "# a writer killed between writing a file and renaming it into place leaves its temp file\n.*.tmp\n"
)
#: Git's built-in union merge for segments: the fold is a set union, so keeping both sides' lines is
#: always right. Each clone and branch appends to its own file, so merges do not need it, except
#: when one branch's segment ends up on two diverging histories (a squash-merged branch that keeps
#: writing, a rebase, a reset); nothing has to be installed for it to work.
GITATTRIBUTES: Final = (
    "# eventmem segments: every line is one event; merging is a set union\njournal/*.jsonl merge=union\n"
)


@dataclass(frozen=True)
class RootChoice:
    """The chosen project root and why it was chosen (shown by ``doctor`` and a tool)."""

    root: Path
    source: str
    """``env:EVENTMEM_ROOT``, ``marker:.git`` (found walking up), or ``cwd``."""


def find_root(cwd: Path | None = None, environ: dict[str, str] | None = None) -> RootChoice:
    """Find the project root: an env variable, else the nearest marker walking up, else ``cwd``.

    Env values that still hold an unexpanded ``${...}`` (a client config that did not substitute
    its variables) are ignored. Markers are tried in order of strength: the nearest ``.eventmem/``
    anywhere up the tree wins over a nearer ``.git``.
    """
    env = os.environ if environ is None else environ
    start = (cwd or Path.cwd()).resolve()
    for name in ROOT_ENV_VARS:
        value = env.get(name, "").strip()
        if value and "${" not in value:
            path = Path(value).expanduser()
            if not path.is_absolute():
                path = start / path
            return RootChoice(path.resolve(), f"env:{name}")
    chain = [start, *start.parents]
    for marker in ROOT_MARKERS:
        for folder in chain:
            if (folder / marker).exists():
                return RootChoice(folder, f"marker:{marker}")
    return RootChoice(start, "cwd")


def global_root(environ: Mapping[str, str] | None = None) -> Path:
    """The user-wide memory for ``global`` scope, under the platform's user data directory."""
    env = os.environ if environ is None else environ
    override = user_dir(env, "EVENTMEM_GLOBAL_DIR")
    return override if override is not None else user_data_dir(env) / "eventmem" / "global"


def user_dir(env: Mapping[str, str], variable: str) -> Path | None:
    """The absolute folder an environment variable names (``~`` expanded), else ``None``: a relative
    path (it would land inside whatever project the command runs in, as the XDG rules warn) and an
    unexpanded ``${...}`` are ignored."""
    value = env.get(variable, "").strip()
    if not value or "${" in value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else None


def user_data_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    return user_dir(env, "XDG_DATA_HOME") or Path.home() / ".local" / "share"


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sanitize(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-")[:60] or "default"


_WRITER_IDS: dict[Path, str] = {}
"""Writer ids read in this process, by file (a clone's id never changes)."""


@dataclass(frozen=True)
class ProjectPaths:
    """Every path eventmem uses inside one project (or the global memory)."""

    root: Path

    def __post_init__(self) -> None:
        confine(self.root)  # every lock and atomic write below the root is checked from now on

    def inside(self, path: Path, *, kind: Literal["file", "folder"] = "file", create: bool = False) -> Path:
        """``path``, checked to be a real descendant of the root: no component below the root is a
        symbolic link (see :func:`eventmem.journal.files.check_inside`, which raises ``UnsafePath``)."""
        return check_inside(self.root, path, kind=kind, create=create)

    @functools.cached_property
    def base(self) -> Path:
        return self.root / ".eventmem"

    @functools.cached_property
    def journal_dir(self) -> Path:
        return self.base / "journal"

    @functools.cached_property
    def archive_dir(self) -> Path:
        return self.base / "archive"

    @functools.cached_property
    def cache_dir(self) -> Path:
        return self.base / "cache"

    @functools.cached_property
    def local_dir(self) -> Path:
        return self.base / "local"

    @functools.cached_property
    def config_file(self) -> Path:
        return self.base / "config.toml"

    @functools.cached_property
    def local_config_file(self) -> Path:
        return self.base / "config.local.toml"

    @functools.cached_property
    def lock_file(self) -> Path:
        return self.base / "journal.lock"

    def check_layout(self) -> None:
        """Refuse (``UnsafePath``) a memory folder whose derived or local files would be read or
        written through a symbolic link: ``.eventmem/`` itself, ``cache/`` and ``local/`` and all in
        them, the lock and the settings files. (Journal and archive segments are checked where they
        are listed and appended: a link there is skipped, and the rest keeps working.)"""
        self.inside(self.base, kind="folder")
        for path in (self.lock_file, self.config_file, self.local_config_file):
            self.inside(path)
        for folder in (self.cache_dir, self.local_dir):
            if folder == self.cache_dir and _plain_file(folder):
                continue  # derived only: the store warns that it cannot write there, and the journal works
            self.inside(folder, kind="folder")
            for parent, folders, files in os.walk(folder):
                for name in folders + files:
                    self.inside(Path(parent) / name, kind="folder" if name in folders else "file")

    def git_dir(self) -> Path | None:
        """The repository's git dir (a worktree's ``.git`` file is followed), if the root has one."""
        dot_git = self.root / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text.removeprefix("gitdir:").strip())
                return target if target.is_absolute() else (self.root / target).resolve()
        return None

    def branch(self) -> str:
        """The checked-out branch, read from ``HEAD`` (a file read, no git process)."""
        git_dir = self.git_dir()
        if git_dir is None:
            return "local"
        try:
            head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        except OSError:
            return "local"
        if head.startswith("ref:"):
            return sanitize(head.removeprefix("ref:").strip().removeprefix("refs/heads/"))
        return "detached"

    def writer_id(self) -> str:
        """This clone's writer id: random, created once, kept inside ``.git/`` (never committed);
        read once per process."""
        git_dir = self.git_dir()
        path = (git_dir / "eventmem-writer") if git_dir is not None else (self.base / "writer")
        known = _WRITER_IDS.get(path)
        if known is None:
            known = _WRITER_IDS[path] = self._read_or_make_writer_id(path)
        return known

    def cache_owner(self) -> str:
        """A token only this clone knows (random, kept inside ``.git/``, which git never delivers; in
        ``.eventmem/local/`` outside a repository), stamped into the cache's snapshot: a snapshot that
        arrived any other way (committed with ``git add -f`` and merged) is never loaded. Read once
        per process."""
        git_dir = self.git_dir()
        path = (git_dir / "eventmem-cache-owner") if git_dir is not None else (self.local_dir / "cache-owner")
        known = _WRITER_IDS.get(path)
        if known is None:
            try:
                known = self._read_or_make_writer_id(path, size=16)
            except OSError:  # nowhere to keep it: this process's snapshots serve this process only
                known = secrets.token_hex(16)
            _WRITER_IDS[path] = known
        return known

    @staticmethod
    def _read_or_make_writer_id(path: Path, *, size: int = 4) -> str:
        try:
            value = path.read_text(encoding="utf-8").strip()
            if value:
                return sanitize(value)
        except OSError:
            pass
        value = secrets.token_hex(size)
        make_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{value}.tmp")
        tmp.write_text(value + "\n", encoding="utf-8")
        try:
            os.link(tmp, path)  # atomic create-with-content: a racing process sees all or nothing
        except FileExistsError:
            value = sanitize(path.read_text(encoding="utf-8").strip())
        finally:
            tmp.unlink(missing_ok=True)
        return value

    def segment_name(self) -> str:
        return f"{self.writer_id()}.{self.branch()}.jsonl"

    def ensure(self) -> None:
        """Create ``.eventmem/`` with its ``.gitignore`` and ``.gitattributes`` (first write, or
        ``eventmem init``); a ``.gitattributes`` deleted afterwards stays deleted."""
        ignore = self.base / ".gitignore"
        self.inside(self.journal_dir, kind="folder", create=True)  # (every write asks: two lstats)
        if os.path.lexists(ignore):
            return
        atomic_write(ignore, GITIGNORE.encode(), durable=False)
        attributes = self.base / ".gitattributes"
        if not os.path.lexists(attributes):
            atomic_write(attributes, GITATTRIBUTES.encode(), durable=False)


def _plain_file(path: Path) -> bool:
    """A regular file (not a link, not a folder) at ``path``."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
