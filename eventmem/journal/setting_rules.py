"""The rules a tracked setting is held to that need no :class:`~eventmem.journal.config.Config`: what
reaches the network or the environment (:func:`network_settings`), and which paths a setting names
and whether they stay inside the project (:func:`named_paths`, :func:`path_problem`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from eventmem.core.errors import InvalidInput
from eventmem.journal.files import check_inside

__all__ = ["PATH_SETTINGS", "named_paths", "network_settings", "path_problem", "reach", "shown"]


PATH_SETTINGS: Final = ("render_ai_dir", "export_dir")
"""Settings naming a folder eventmem writes in."""
_PRIVATE_FOLDERS: Final = (".git", ".eventmem")


def network_settings(table: Mapping[str, Any]) -> list[str]:
    """One line for each setting in ``table`` (a config file's keys and values) that reaches the
    network or reads the environment: a remote embedder (any HTTP provider, loopback included), an
    API-key variable, ``summarizer = "sampling"``. Empty: everything in it stays on the machine."""
    found: list[str] = []
    for key, value in table.items():
        what = reach(str(key), value)
        if what:
            found.append(f"{key} = {shown(value)}: {what}")
    return found


def reach(key: str, value: Any) -> str:
    if key == "embedder" and isinstance(value, str):
        return _embedderreach(value)
    if key == "summarizer" and value == "sampling":
        return "sends memory text to the MCP client's model (sampling)"
    return ""


def _embedderreach(spec: str) -> str:
    from eventmem.core.provider_spec import OLLAMA_URL, OPENAI_URL, parse_spec

    text = spec.strip()
    try:
        parsed = parse_spec(text)
    except InvalidInput:  # judged by its text: an unreadable spec must not slip through
        kind = text.partition(":")[0].strip().lower()
        if kind in ("", "hashing", "hashing-384", "onnx") and not any(c in text.lower() for c in ("@", "//", "key")):
            return ""
        return "may send memory text over the network (the spec does not parse)"
    parts = []
    if parsed.url or parsed.kind in ("ollama", "openai"):
        default = OPENAI_URL if parsed.kind == "openai" else OLLAMA_URL
        parts.append(f"sends memory text to {parsed.url or default}")
    names = [parsed.options["key_env"]] if "key_env" in parsed.options else []
    if parsed.kind == "openai" and not names:
        names = ["OPENAI_API_KEY", "EVENTMEM_API_KEY"]
    if names:
        parts.append(f"reads the environment variable {' or '.join(names)}")
    return " and ".join(parts)


def shown(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def named_paths(key: str, value: Any) -> list[tuple[str, Literal["file", "folder"]]]:
    """The paths a setting names (a folder setting's, an ONNX model's and its tokenizer's)."""
    if not isinstance(value, str) or not value.strip():
        return []
    if key in PATH_SETTINGS:
        return [(value.strip(), "folder")]
    if key != "embedder":
        return []
    from eventmem.core.provider_spec import parse_spec

    try:
        parsed = parse_spec(value)
    except InvalidInput:
        return []
    found: list[tuple[str, Literal["file", "folder"]]] = []
    if parsed.kind == "onnx" and parsed.model.endswith(".onnx"):
        found.append((parsed.model, "file"))
    if parsed.options.get("tokenizer"):
        found.append((parsed.options["tokenizer"], "file"))
    return found


def path_problem(key: str, value: Any, root: Path | None) -> str:
    for given, kind in named_paths(key, value):
        where = Path(given)
        if given.startswith("~") or "\0" in given:
            return f"{given!r} is not a path inside the project"
        if where.is_absolute():
            if root is None or not _within(root, where):
                return f"{given!r} is outside the project; a tracked setting names only paths inside it"
            where = where.relative_to(root)
        if ".." in where.parts:
            return f"{given!r} leads out of the project; a tracked setting names only paths inside it"
        private = next((part for part in where.parts if part.lower() in _PRIVATE_FOLDERS), None)
        if kind == "folder" and private is not None:
            return f"{given!r} is inside {private}; a folder eventmem writes in must be outside .git and .eventmem"
        if root is not None:
            try:
                check_inside(root, root / where, kind=kind)
            except InvalidInput as exc:  # (UnsafePath: a link on the way)
                return str(exc).split(";", 1)[0]
    return ""


def _within(root: Path, path: Path) -> bool:
    try:
        Path(os.path.normpath(path)).relative_to(root)
    except ValueError:
        return False
    return True
