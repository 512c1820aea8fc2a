"""Project settings, from four places (a later one wins, key by key):

1. ``.eventmem/config.toml``, tracked: the repository's, so anyone who can get a commit merged
   writes it. It may only choose what stays on the machine: a setting that reaches the network or
   reads the environment (:func:`network_settings`) is reported and ignored, unless this user
   approved this exact file with ``eventmem allow`` (any change to the file revokes it).
2. The user's own file, ``$XDG_CONFIG_HOME/eventmem/config.toml`` (``~/.config/...``), for every
   project.
3. ``.eventmem/config.local.toml``, this clone's own (ignored by git; if it is tracked after all,
   it is treated like the tracked file).
4. ``EVENTMEM_<KEY>`` environment variables.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args, get_origin

import msgspec

from eventmem.core.errors import InvalidInput, UnsafePath
from eventmem.core.limits import MAX_CONFIG_BYTES, SETTING_LIMITS, in_range
from eventmem.journal.files import atomic_write, check_path
from eventmem.journal.gitrunner import GitError, run_git
from eventmem.journal.project import user_data_dir, user_dir
from eventmem.journal.setting_rules import network_settings, path_problem, reach, shown

__all__ = [
    "Config",
    "Settings",
    "allow",
    "approval_file",
    "fusion_weights",
    "invalid_setting",
    "is_approved",
    "load_config",
    "load_settings",
    "network_settings",
    "revoke",
    "setting_problems",
    "user_config_file",
]


class Config(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    embedder: str = "hashing"
    """Embedding provider: ``hashing`` (built in, offline) or a provider spec (see the README)."""
    fusion: Literal["linear", "rrf"] = "linear"
    vector_weight: float = 0.9
    keyword_weight: float = 0.1
    """The built-in embedder's weights, chosen by ``tools/eval.py --grid`` on the benchmark's dev half
    (0.7/0.3 was 2.5 points lower in recall@5). Left at these values, a model embedder gets its own
    from :data:`FUSION_WEIGHTS` (see :func:`fusion_weights`); any other values are used as they are."""
    importance_boost: float = 0.1
    """Added to a result's score per unit of importance above 0.5 (ranking, not filtering)."""
    recency_boost: float = 0.05
    summarizer: Literal["extractive", "sampling"] = "extractive"
    """How a memory saved without a summary gets one: ``extractive`` (offline), or ``sampling`` (ask
    the MCP client's model when the client offers sampling; extractive otherwise)."""
    recency_half_life_days: float = 30.0
    durability: Literal["fsync", "flush"] = "fsync"
    """``fsync``: every acknowledged save is on disk. ``flush``: in the OS page cache only (a power
    cut may lose the last saves; a killed process loses nothing)."""
    max_memory_bytes: int = 64 * 1024
    max_segment_bytes: int = 64 * 1024 * 1024
    secrets: Literal["scrub", "refuse"] = "scrub"
    promote_importance: float = 0.8
    promote_accesses: int = 5
    compact_interval_seconds: float = 300.0
    archive_after_days: float = 30.0
    snapshot_every_events: int = 2000
    tools: str = "default"
    """MCP tool families to expose (``serve --tools`` and ``EVENTMEM_TOOLS`` win over it): ``core``,
    ``context``, ``memory``, ``project-context``, ``all``, comma-separated; ``default`` is ``core``."""
    render_ai_dir: str = ""
    """Where the project-context view (``.ai/*.md``) is rendered: empty for ``.eventmem/cache/ai/``
    (derived, untracked), or a folder of the project such as ``.ai`` to keep the files tracked."""
    section_max_bytes: int = 256 * 1024
    """Size limit of one project-context section; a write that would exceed it is paused."""
    export_dir: str = "exports"
    """The folder (of the project, or anywhere in the user's own settings) under which the MCP tool
    ``export_memories`` may write; it writes only new files there."""

    def __post_init__(self) -> None:
        """A value no setting can mean (NaN, infinity, a size below one byte, a half-life of zero…)
        is refused naming its key, as a value of the wrong type is: a tracked file is input from
        whoever got a commit merged, and NaN weights or a limit of 0 bytes would quietly break
        every search or every save instead of failing once with the key's name."""
        for name, entry in SETTING_LIMITS.items():
            value = getattr(self, name)
            if not in_range(entry, value):  # (NaN fails every comparison)
                raise ValueError(f"{name}: expected {entry.describe()}, got {value!r}")


FUSION_WEIGHTS: Final[dict[str, tuple[float, float]]] = {
    "hashing": (0.9, 0.1),
    "onnx-all-MiniLM-L6-v2-int8-384": (0.8, 0.2),
}
"""(vector, keyword) weights of the linear fusion by embedder ``model_id``, or by its first part
(``hashing``) for every version and size of it; chosen on the dev splits of the hard evaluation
and of the shipped benchmark (``tools/eval.py --hard``, ``tools/eval.py``). A model's cosines are
scaled to the query's best first (``eventmem.core.query_rules.spread``); MiniLM then ranks best at 0.8/0.2
(hard dev recall@5 0.679, MRR 0.638; 0.5/0.5 with min-max stretched cosines 0.609: the keyword
side ranks notes that share a question's words but not their meaning)."""
MODEL_FUSION_WEIGHTS: Final = (0.8, 0.2)
"""The weights of a model embedder the table does not name (MiniLM's)."""
CONFIG_WEIGHTS: Final = (0.9, 0.1)
"""The Config's default ``vector_weight`` and ``keyword_weight``: a config holding them leaves the
choice to the table."""


def fusion_weights(config: Config, model_id: str) -> tuple[float, float]:
    """The (vector, keyword) weights for ``model_id``: the config's own when it sets other values than
    the defaults, else the embedder's row of :data:`FUSION_WEIGHTS`."""
    chosen = (config.vector_weight, config.keyword_weight)
    if chosen != CONFIG_WEIGHTS:
        return chosen
    found = FUSION_WEIGHTS.get(model_id) or FUSION_WEIGHTS.get(model_id.split("-", 1)[0])
    return found or MODEL_FUSION_WEIGHTS


ENV_PREFIX: Final = "EVENTMEM_"

_TEMPLATE: Final = """\
# eventmem project settings. Every key is optional; the values shown are the defaults.
# EVENTMEM_<KEY> environment variables override them (for example EVENTMEM_DURABILITY=flush).

# embedder = "hashing"          # built-in offline embedder; see the README for model providers
# fusion = "linear"             # or "rrf"
# vector_weight = 0.9
# keyword_weight = 0.1
# durability = "fsync"          # "flush" is faster; a power cut may lose the last saves
# max_memory_bytes = 65536
# secrets = "scrub"             # or "refuse"
# summarizer = "extractive"     # or "sampling": the MCP client's model writes summaries, if it can
"""


def config_template() -> str:
    return _TEMPLATE


def _coerce(raw: str, field_type: Any) -> Any:
    text = raw.strip()
    if field_type in (int, float):
        return field_type(text)
    return text


def invalid_setting(table: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first setting of a config file's ``table`` that no :class:`Config` accepts (an unknown
    key, a value of the wrong type or out of its range), as (key, the reason); ``None``: all valid."""
    problems = setting_problems(table)
    return next(iter(problems.items()), None)


_FIELD_TYPES: Final = {f.name: f.type for f in msgspec.structs.fields(Config)}
_FIELDS: Final = frozenset(_FIELD_TYPES)


def setting_problems(table: Mapping[str, Any], root: Path | None = None) -> dict[str, str]:
    """Each setting of a tracked config ``table`` that breaks a rule, with why (one line, the allowed
    range or form in it): an unknown key, a value of the wrong type, out of its range or NaN, or a
    path that leaves the project (``root``; without it only what the text shows is judged: an
    absolute path, ``..``, ``~``) or passes through a link on the way. ``store`` is not judged here."""
    problems: dict[str, str] = {}
    for raw_key, value in table.items():
        key = str(raw_key)
        if key == STORE_KEY:
            continue
        reason = _value_problem(key, value) or path_problem(key, value, root)
        if reason:
            problems[key] = reason
    return problems


def _value_problem(key: str, value: Any) -> str:
    if key not in _FIELDS:
        return "not a setting eventmem knows"
    if key == "embedder" and isinstance(value, str) and value not in ("", "hashing", "hashing-384"):
        from eventmem.core.provider_spec import parse_spec

        try:
            parse_spec(value).check_numbers()
        except InvalidInput as exc:
            return str(exc)
    try:
        msgspec.convert({key: value}, Config)
    except msgspec.ValidationError as exc:
        entry = SETTING_LIMITS.get(key)
        if entry is not None:
            return f"expected {entry.describe()}"
        kind = _FIELD_TYPES[key]
        if get_origin(kind) is Literal:
            return f"expected one of {', '.join(shown(choice) for choice in get_args(kind))}"
        return str(exc).replace(f" - at `$.{key}`", "")
    return ""


# -- where the settings come from ---------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The config in effect, and what of the tracked file was left out."""

    config: Config
    ignored: list[str] = field(default_factory=list)
    """One line per setting of a tracked file that was ignored: the key, what it would do, how to
    allow it (``doctor`` lists them; the service's warnings repeat them)."""
    approved: list[str] = field(default_factory=list)
    """The tracked file's settings that reach the network and are in effect by ``eventmem allow``."""
    invalid: list[str] = field(default_factory=list)
    """One line per setting of a tracked file that breaks a rule (:func:`setting_problems`), with the
    allowed range: ignored, its default used (``doctor`` is unhealthy while one is there)."""
    store: str = ""
    """The PostgreSQL database to serve from (``store``), from an untracked file or ``EVENTMEM_STORE``
    only; empty: the embedded indexes. Not a :class:`Config` field, so no settings view shows it."""


def user_config_file(environ: Mapping[str, str] | None = None) -> Path:
    """The user's own settings for every project: ``$XDG_CONFIG_HOME/eventmem/config.toml``."""
    env = os.environ if environ is None else environ
    return (user_dir(env, "XDG_CONFIG_HOME") or Path.home() / ".config") / "eventmem" / "config.toml"


def approval_file(path: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``eventmem allow`` records its approval of the tracked config ``path``: in the user's
    data directory (beside the global memory), never in the repository."""
    env = os.environ if environ is None else environ
    key = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()
    return user_data_dir(env) / "eventmem" / "allowed" / key


def allow(path: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Approve the tracked config ``path`` as it is now: its settings that reach the network take
    effect until the file changes. Returns them (:func:`network_settings`)."""
    content = _read_bytes(path)
    if content is None:
        raise InvalidInput(f"there is no {path.name} to allow")
    record = f"{hashlib.sha256(content).hexdigest()} {path.resolve()}\n"
    atomic_write(approval_file(path, environ), record.encode())
    return network_settings(_parse(path, content))


def revoke(path: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Withdraw :func:`allow`; returns whether there was an approval."""
    try:
        approval_file(path, environ).unlink()
    except FileNotFoundError:
        return False
    return True


def is_approved(path: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``eventmem allow`` approved the tracked config ``path`` as it is now."""
    content = _read_bytes(path)
    return content is not None and _approved(path, content, os.environ if environ is None else environ)


def _approved(path: Path, content: bytes, environ: Mapping[str, str]) -> bool:
    try:
        record = approval_file(path, environ).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(record) and record[0] == hashlib.sha256(content).hexdigest()


def _read_bytes(path: Path) -> bytes | None:
    """A config file's bytes (``None``: there is none); never through a link inside the project."""
    try:
        fd = os.open(check_path(path), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePath(f"{path} is a symbolic link; eventmem reads settings only from real files") from None
        raise InvalidInput(f"{path}: cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        content = handle.read(MAX_CONFIG_BYTES + 1)
    if len(content) > MAX_CONFIG_BYTES:
        raise InvalidInput(f"{path.name} is larger than {MAX_CONFIG_BYTES:,} bytes: not a settings file eventmem reads")
    return content


def _parse(path: Path, content: bytes) -> dict[str, Any]:
    try:
        return tomllib.loads(content.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInput(f"{path.name}: not valid TOML: {exc}") from None


def _tracked_by_git(path: Path) -> bool:
    """Whether git tracks ``path`` (a file of a project that may be a git repository)."""
    try:
        result = run_git(path.parent, "ls-files", "--", path.name, timeout=10, check=False)
    except GitError:
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


STORE_KEY: Final = "store"
"""The setting naming the PostgreSQL database ``eventmem serve`` answers from."""
HOOKS_KEY: Final = "hooks"
"""The ``[hooks]`` table of the user's and the clone's own settings (``eventmem.adapters.hooks``); in the
tracked file it is left out, like every setting that is the user's to choose."""
_STORE_IGNORED: Final = (
    "{name}: store = (a database address): would send memory text to a database a commit chose; ignored "
    "(the database comes only from `eventmem serve --store`, EVENTMEM_STORE, .eventmem/config.local.toml "
    "or your ~/.config/eventmem/config.toml)"
)


def _store_value(value: Any, where: str) -> str:
    """The ``store`` of an untracked settings file, checked to be text (its address is checked on use)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: store: expected a postgresql:// address")
    return value.strip()


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """:func:`load_settings`' config."""
    return load_settings(path, environ).config


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings in effect for the project whose tracked config file is ``path`` (see the module
    docs for the order). Settings of a tracked file that reach the network or the environment and
    are not approved are left out (their defaults apply) and listed in :attr:`Settings.ignored`."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    untrusted: dict[str, str] = {}
    """Keys set (last) by a tracked file, with what they would do."""
    approved: list[str] = []
    invalid: list[str] = []
    store = ""
    root = path.parent.parent
    try:
        content = _read_bytes(path)
        tracked = _parse(path, content) if content is not None else {}
    except InvalidInput as exc:  # one careless commit must not stop every agent's saves
        content, tracked = None, {}
        invalid.append(f"{_one_line(str(exc))}; ignored: every setting of it has its default")
    if content is not None:
        tracked.pop(HOOKS_KEY, None)  # the hooks read their table from the untracked files only
        _drop_invalid(path.name, tracked, root, invalid)
        if STORE_KEY in tracked:
            untrusted[STORE_KEY] = _STORE_IGNORED.format(name=path.name)
            tracked.pop(STORE_KEY)
        data.update(tracked)
        reaching = {str(k): reach(str(k), v) for k, v in tracked.items() if reach(str(k), v)}
        if reaching and _approved(path, content, env):
            approved = network_settings({k: tracked[k] for k in reaching})
        else:
            untrusted.update({k: f"{path.name}: {k} = {shown(tracked[k])} ({w})" for k, w in reaching.items()})
    for layer in (user_config_file(env), path.with_name("config.local.toml")):
        layer_content = _read_bytes(layer)
        if layer_content is None:
            continue
        table = _parse(layer, layer_content)
        tracked_layer = layer.parent == path.parent and _tracked_by_git(layer)
        table.pop(HOOKS_KEY, None)  # read by eventmem.adapters.hooks, not a Config field
        if tracked_layer:
            _drop_invalid(f"{layer.name} (tracked by git)", table, root, invalid)
        if STORE_KEY in table:
            if tracked_layer:
                untrusted[STORE_KEY] = _STORE_IGNORED.format(name=f"{layer.name} (tracked by git)")
            else:
                store = _store_value(table[STORE_KEY], layer.name)
                untrusted.pop(STORE_KEY, None)
            table.pop(STORE_KEY)
        data.update(table)
        for key in table:
            untrusted.pop(str(key), None)
        if tracked_layer:
            untrusted.update(
                {
                    str(k): f"{layer.name} (tracked by git: `git rm --cached` it): {k} = {shown(table[k])} "
                    f"({reach(str(k), table[k])})"
                    for k in table
                    if reach(str(k), table[k])
                }
            )
    for field_ in msgspec.structs.fields(Config):
        value = env.get(ENV_PREFIX + field_.name.upper())
        if value is not None and value.strip() and "${" not in value:
            try:
                data[field_.name] = _coerce(value, field_.type)
            except ValueError:
                raise InvalidInput(f"{ENV_PREFIX}{field_.name.upper()}={value!r} is not valid") from None
            untrusted.pop(field_.name, None)
    if (env_store := env.get(ENV_PREFIX + STORE_KEY.upper(), "").strip()) and "${" not in env_store:
        store = env_store
        untrusted.pop(STORE_KEY, None)
    for key in untrusted:
        data.pop(key, None)
    ignored = [
        line
        if key == STORE_KEY
        else f"{line}; ignored (a setting in the repository may not do that). To use it, run `eventmem allow` "
        "after reading the file, or set it in .eventmem/config.local.toml, your ~/.config/eventmem/config.toml "
        f"or EVENTMEM_{key.upper()}"
        for key, line in untrusted.items()
    ]
    try:
        return Settings(msgspec.convert(data, Config), ignored, approved, invalid, store)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"{path.name}: {exc}") from None


def _drop_invalid(name: str, table: dict[str, Any], root: Path, invalid: list[str]) -> None:
    """Take out of a tracked ``table`` each setting that breaks a rule, adding its line to ``invalid``."""
    for key, reason in setting_problems(table, root).items():
        value = table.pop(key)
        default = getattr(Config(), key, None)
        used = f"the default {shown(default)} is used" if key in _FIELDS else "it has no effect"
        invalid.append(_one_line(f"{name}: {key} = {shown(value)[:80]}: {reason}; ignored, {used}"))


def _one_line(text: str) -> str:
    return " ".join(text.split())
