"""Project settings: ``.eventmem/config.toml`` (tracked) with ``EVENTMEM_*`` environment overrides."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from eventmem.errors import InvalidInput

__all__ = ["Config", "load_config", "network_settings"]


class Config(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    embedder: str = "hashing"
    """Embedding provider: ``hashing`` (built in, offline) or a provider spec (see the README)."""
    fusion: Literal["linear", "rrf"] = "linear"
    vector_weight: float = 0.9
    keyword_weight: float = 0.1
    """Chosen by ``tools/eval.py --grid`` on the benchmark's dev half: 0.9/0.1 ranked first for both the
    built-in embedder and ONNX MiniLM (0.7/0.3 was 2.5 points lower in recall@5); see the README."""
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


def load_config(path: Path, environ: dict[str, str] | None = None) -> Config:
    """Read the project's config file, then apply ``EVENTMEM_<KEY>`` overrides."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise InvalidInput(f"{path.name}: not valid TOML: {exc}") from None
    for field in msgspec.structs.fields(Config):
        value = env.get(ENV_PREFIX + field.name.upper())
        if value is not None and value.strip() and "${" not in value:
            try:
                data[field.name] = _coerce(value, field.type)
            except ValueError:
                raise InvalidInput(f"{ENV_PREFIX}{field.name.upper()}={value!r} is not valid") from None
    try:
        return msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"{path.name}: {exc}") from None


_HTTP_EMBEDDERS: Final = ("openai:", "ollama:")


def network_settings(table: Mapping[str, Any]) -> list[str]:
    """One line for each setting in ``table`` (a config file's keys and values) that reaches the
    network or reads the environment: an HTTP embedder (``openai:``, ``ollama:``, any ``@http``), an
    option naming an environment variable (``key_env``), ``summarizer = "sampling"``."""
    found: list[str] = []
    for key, value in table.items():
        text = value if isinstance(value, str) else ""
        reasons: list[str] = []
        if key == "embedder" and (text.strip().lower().startswith(_HTTP_EMBEDDERS) or "@http" in text.lower()):
            reasons.append("sends memory text over the network")
        if "key_env" in str(key) or "key_env" in text:
            reasons.append("reads an environment variable")
        if key == "summarizer" and text == "sampling":
            reasons.append("sends memory text to the MCP client's model (sampling)")
        if reasons:
            found.append(f"{key} = {text[:80]!r}: {' and '.join(reasons)}")
    return found
