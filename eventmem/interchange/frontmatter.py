"""The YAML frontmatter of a markdown note, as basic-memory and other note tools write it.

Only the subset notes use is read: ``key: value`` scalars (plain, single-quoted with ``''`` for a
quote, or double-quoted with JSON escapes), ``[a, b]`` flow lists and ``- item`` block lists. Any
other line is an error naming its line, so a broken header is reported, never guessed at. The
writer writes every string double-quoted (JSON), which YAML reads as written.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["FrontmatterError", "dump", "split"]

_KEY: Final = re.compile(r"^([A-Za-z_][\w\-]*)\s*:(?:\s+(.*?))?\s*$")
_ITEM: Final = re.compile(r"^\s*-\s+(.*?)\s*$")


class FrontmatterError(ValueError):
    """A frontmatter line that is not of the subset read; ``line`` counts from the file's first."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def split(text: str) -> tuple[dict[str, Any], str, int]:
    """The frontmatter, the body after it, and the body's first line number (1 when there is none)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            return _parse(lines[1:end]), "\n".join(lines[end + 1 :]), end + 2
    raise FrontmatterError(1, "the frontmatter opened by --- is never closed")


def _scalar(raw: str, line: int) -> Any:
    raw = raw.strip()
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise FrontmatterError(line, "an unclosed single-quoted value")
        return raw[1:-1].replace("''", "'")
    if raw.startswith('"'):
        try:
            return json.loads(raw)
        except ValueError:
            raise FrontmatterError(line, "a double-quoted value that does not parse") from None
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [_scalar(part, line) for part in inner.split(",")] if inner else []
    if raw.startswith(("[", "{", "|", ">")):
        raise FrontmatterError(line, f"a value of a form this reader does not take: {raw[:30]!r}")
    if raw in ("", "~", "null"):
        return None
    if raw in ("true", "false"):
        return raw == "true"
    try:
        return int(raw) if re.fullmatch(r"-?\d{1,18}", raw) else float(raw) if re.fullmatch(r"-?\d+\.\d+", raw) else raw
    except ValueError:
        return raw


def _parse(lines: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    key: str | None = None
    for index, line in enumerate(lines, 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if (item := _ITEM.match(line)) and key is not None and line[:1] in (" ", "-"):
            current = out.get(key)
            if current is None:
                current = out[key] = []
            if not isinstance(current, list):
                raise FrontmatterError(index, f"a list item under {key!r}, which has a value")
            current.append(_scalar(item.group(1), index))
            continue
        match = _KEY.match(line)
        if match is None:
            raise FrontmatterError(index, f"not a 'key: value' line: {line.strip()[:40]!r}")
        key = match.group(1)
        out[key] = _scalar(match.group(2) or "", index)
    return out


def dump(values: dict[str, Any]) -> str:
    """``---``, one line per key (lists as block lists), ``---``."""
    lines = ["---"]
    for key, value in values.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f"- {json.dumps(item, ensure_ascii=False)}" for item in value]
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    lines.append("---")
    return "\n".join(lines) + "\n"
