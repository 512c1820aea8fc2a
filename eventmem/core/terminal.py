"""Text made safe for a terminal: control characters shown, never sent.

Memories come from teammates' merged journals, so a title or a content may hold ESC sequences, BEL,
NUL or a carriage return that would rewrite the screen, retitle the window or hide text. The journal
keeps what was given; everything the CLI prints for people goes through :func:`printable`, and its
standard streams through :class:`EscapingStream` as well. ``--json`` needs neither: JSON escapes
control characters itself.
"""

from __future__ import annotations

import io
import json
import re
import sys
from typing import Any, Final, TextIO

import msgspec

__all__ = ["EscapingStream", "print_json", "printable"]

_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 and C1 controls, DEL, and the bidirectional overrides and isolates that reorder what is shown
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEPING_LINES: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character written out as an escape (ESC as ``\\x1b``).

    A single-line field (a title, a tag, a file name) shows a newline as ``\\n``, so it cannot forge
    the next line of a listing; ``multiline`` text (a memory's content) keeps its newlines and tabs.
    """
    pattern = _CONTROL_KEEPING_LINES if multiline else _CONTROL
    return pattern.sub(_visible, text)


class EscapingStream(io.TextIOBase):
    """A text stream that passes everything through :func:`printable` (lines kept) to another one."""

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self.target = target

    def write(self, text: str) -> int:
        self.target.write(printable(text, multiline=True))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.target.encoding


def print_json(value: Any) -> None:
    """``--json`` output of a command: the objects the MCP tools return, indented (JSON escapes every
    control character, so this needs no :func:`printable`)."""
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False) + "\n")
