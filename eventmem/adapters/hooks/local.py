"""What the hooks keep on this machine, on the standard library alone (the fast path imports it): the
project root, the ``[hooks]`` settings of the user's untracked files, the hooks' folder in the cache,
per-session state, the log, and the fingerprint of the journal that says whether the index is current.

Settings (``[hooks]`` in ``~/.config/eventmem/config.toml`` or ``.eventmem/config.local.toml``, never
the tracked ``config.toml``)::

    [hooks]
    auto_capture = "on"          # "off" | "suggest" | "on"
    session_budget_tokens = 1500 # the session-start bundle
    prompt_budget_tokens = 300   # what a prompt may add
    prompt_items = 3
    relevance_floor = 0.35       # 0..1: how much of a prompt's known words a memory must match
    post_tool_use = false        # notes on failing commands (PostToolUse / AfterTool)
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing is not imported at run time: the hook's fast path starts a process per event)
    from collections.abc import Mapping
    from types import TracebackType
    from typing import Any, Final

__all__ = [
    "HookSettings",
    "HooksDir",
    "find_project_root",
    "journal_fingerprint",
    "load_hook_settings",
]

ROOT_ENV_VARS: Final = ("EVENTMEM_ROOT", "PROJECT_MEMORY_ROOT")
ROOT_MARKERS: Final = (".eventmem", ".ai", "package.json", ".git")
MAX_SETTINGS_BYTES: Final = 1 << 20


class HookSettings:
    """The ``[hooks]`` settings in effect (see the module docs)."""

    DEFAULTS: Final = {
        "auto_capture": "on",
        "session_budget_tokens": 1500,
        "prompt_budget_tokens": 300,
        "prompt_items": 3,
        "relevance_floor": 0.35,
        "post_tool_use": False,
    }

    def __init__(self, **values: Any) -> None:
        merged = {**self.DEFAULTS, **values}
        self.auto_capture: str = merged["auto_capture"]
        self.session_budget_tokens: int = merged["session_budget_tokens"]
        self.prompt_budget_tokens: int = merged["prompt_budget_tokens"]
        self.prompt_items: int = merged["prompt_items"]
        self.relevance_floor: float = merged["relevance_floor"]
        self.post_tool_use: bool = merged["post_tool_use"]

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.DEFAULTS}


_CHOICES: Final = {"auto_capture": ("off", "suggest", "on")}
_RANGES: Final = {
    "session_budget_tokens": (50, 100_000),
    "prompt_budget_tokens": (0, 20_000),
    "prompt_items": (0, 50),
    "relevance_floor": (0.0, 1.0),
}


def find_project_root(cwd: str | None, environ: Mapping[str, str]) -> Path:
    """The project root as :func:`eventmem.journal.project.find_root` chooses it, from the event's folder
    (``cwd``, else ``CLAUDE_PROJECT_DIR``, else the process's)."""
    start_text = cwd or environ.get("CLAUDE_PROJECT_DIR", "") or os.getcwd()
    start = Path(start_text).expanduser().resolve()
    for name in ROOT_ENV_VARS:
        value = environ.get(name, "").strip()
        if value and "${" not in value:
            path = Path(value).expanduser()
            return (path if path.is_absolute() else start / path).resolve()
    chain = [start, *start.parents]
    for marker in ROOT_MARKERS:
        for folder in chain:
            if (folder / marker).exists():
                return folder
    return start


def _user_config(environ: Mapping[str, str]) -> Path:
    value = environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(value).expanduser() if value and "${" not in value else None
    if base is None or not base.is_absolute():
        base = Path.home() / ".config"
    return base / "eventmem" / "config.toml"


def settings_files(root: Path, environ: Mapping[str, str]) -> list[Path]:
    """Where ``[hooks]`` is read from, later ones winning: the user's file, then the clone's own."""
    return [_user_config(environ), root / ".eventmem" / "config.local.toml"]


def load_hook_settings(root: Path, environ: Mapping[str, str]) -> tuple[HookSettings, list[str]]:
    """The ``[hooks]`` settings in effect, and one line per value left out (a wrong type, an unknown
    key, a file that does not parse): a hook never fails on its settings, it says why in its log."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    known = HookSettings.DEFAULTS
    for path in settings_files(root, environ):
        try:
            if path.is_symlink() or not path.is_file():
                continue
            import tomllib  # (only when there is a file to read)

            content = path.read_bytes()[: MAX_SETTINGS_BYTES + 1]
            if len(content) > MAX_SETTINGS_BYTES:
                problems.append(f"{path.name}: larger than {MAX_SETTINGS_BYTES} bytes; not read")
                continue
            table = tomllib.loads(content.decode("utf-8")).get("hooks", {})
        except (OSError, UnicodeDecodeError, ValueError) as exc:  # (TOMLDecodeError is a ValueError)
            problems.append(f"{path.name}: {exc}")
            continue
        if not isinstance(table, dict):
            problems.append(f"{path.name}: hooks must be a table")
            continue
        for key, value in table.items():
            if key not in known:
                problems.append(f"{path.name}: [hooks] {key}: not a setting (known: {', '.join(known)})")
                continue
            checked = _checked(key, value)
            if checked is None:
                problems.append(f"{path.name}: [hooks] {key} = {value!r}: {_expected(key)}; the default applies")
                continue
            values[key] = checked
    env_capture = environ.get("EVENTMEM_AUTO_CAPTURE", "").strip()
    if env_capture and "${" not in env_capture:
        if env_capture in _CHOICES["auto_capture"]:
            values["auto_capture"] = env_capture
        else:
            problems.append(f"EVENTMEM_AUTO_CAPTURE={env_capture!r}: {_expected('auto_capture')}")
    return HookSettings(**values), problems


def _checked(key: str, value: Any) -> Any:
    if key in _CHOICES:
        return value if isinstance(value, str) and value in _CHOICES[key] else None
    if key == "post_tool_use":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high = _RANGES[key]
    if not low <= value <= high:  # (NaN fails)
        return None
    return float(value) if key == "relevance_floor" else int(value) if float(value).is_integer() else None


def _expected(key: str) -> str:
    if key in _CHOICES:
        return "expected one of " + ", ".join(repr(c) for c in _CHOICES[key])
    if key == "post_tool_use":
        return "expected true or false"
    low, high = _RANGES[key]
    return f"expected a number from {low} to {high}"


def journal_fingerprint(root: Path) -> str:
    """The journal's segments as names, sizes and change times: any append, rewrite, checkout or
    compaction changes it (a stat per segment, no read)."""
    parts: list[str] = []
    for folder in ("journal", "archive"):
        try:
            with os.scandir(root / ".eventmem" / folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".jsonl"):
                        info = entry.stat(follow_symlinks=False)
                        parts.append(f"{folder}/{entry.name}:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}")
        except OSError:
            parts.append(f"{folder}:-")
    return "|".join(sorted(parts))


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str, limit: int = 80) -> str:
    return _SAFE.sub("-", text).strip("-.")[:limit] or "default"


class HooksDir:
    """``.eventmem/cache/hooks/`` (derived, disposable: the index, per-session state, the log) and
    ``.eventmem/local/hooks/`` (this clone's own: captures waiting for a yes in ``suggest`` mode)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def cache(self) -> Path:
        return self.root / ".eventmem" / "cache" / "hooks"

    @property
    def index_file(self) -> Path:
        return self.cache / "index.sqlite"

    @property
    def log_file(self) -> Path:
        return self.cache / "hooks.log"

    @property
    def pending_file(self) -> Path:
        return self.root / ".eventmem" / "local" / "hooks" / "pending.jsonl"

    def session_file(self, client: str, session: str) -> Path:
        return self.cache / "sessions" / f"{safe_name(client, 20)}.{safe_name(session)}.json"

    def ensure_cache(self) -> Path:
        """The cache folder, made if missing (only where ``.eventmem/`` exists: a hook never starts a
        memory in a folder that has none)."""
        if not (self.root / ".eventmem").is_dir():
            raise FileNotFoundError(f"no .eventmem/ in {self.root}")
        self.cache.mkdir(parents=True, exist_ok=True)
        return self.cache

    def log(self, message: str) -> None:
        """One line in the hooks' log (best effort: a read-only disk loses the line, never the hook)."""
        try:
            self.ensure_cache()
            line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}".replace("\n", " ")[:4000]
            with open(self.log_file, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            if self.log_file.stat().st_size > 1_000_000:  # keep the last part only
                text = self.log_file.read_bytes()[-500_000:]
                self.log_file.write_bytes(text[text.find(b"\n") + 1 :])
        except OSError:
            pass

    def read_state(self, client: str, session: str) -> dict[str, Any]:
        try:
            data = json.loads(self.session_file(client, session).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_state(self, client: str, session: str, state: dict[str, Any]) -> None:
        """Replace a session's state atomically (a temp file renamed into place)."""
        self.ensure_cache()
        path = self.session_file(client, session)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            self._forget_old_sessions(path.parent)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(temp, path)

    def _forget_old_sessions(self, folder: Path, days: float = 30.0) -> None:
        """Remove the state of sessions untouched for ``days`` (checked when a new session starts)."""
        cutoff = time.time() - days * 86400
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
        except OSError:
            pass

    def session_lock(self, client: str, session: str) -> SessionLock:
        """Serialise the hooks of one session (a Stop and a SessionEnd may run at once)."""
        self.ensure_cache()
        path = self.session_file(client, session).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        return SessionLock(path)


class SessionLock:
    """An exclusive ``flock`` on a session's lock file, for a ``with`` block."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        os.close(self.fd)
