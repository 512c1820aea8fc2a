"""Reading a client's transcript from where the last capture of the session ended.

Formats read (each line a JSON object unless said otherwise; a line that is not JSON, or not a turn,
is skipped and counted):

- Claude Code: ``{"type": "user"|"assistant", "message": {"role", "content": str | [block]}}`` with
  blocks ``text``, ``tool_use`` (``id``, ``name``, ``input``), ``tool_result`` (``tool_use_id``,
  ``content``, ``is_error``) and ``thinking`` (skipped); sidechain (subagent) lines are skipped.
- Codex: ``{"type": "response_item", "payload": {"type": "message", "role", "content": [{"type":
  "input_text"|"output_text", "text"}]}}``, ``function_call`` (``name``, ``arguments``) and
  ``function_call_output`` (``output``).
- Gemini CLI: one JSON document ``{"messages": [{"type": "user"|"gemini", "content", "toolCalls"}]}``;
  its position is the number of messages read, not a byte offset.
- Anything else with ``role`` and ``content`` per line (Cursor's transcripts).

Only complete lines are read (a line being written is left for the next capture); at most
:data:`MAX_READ` bytes per capture, the newest.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

__all__ = ["MAX_READ", "Turn", "read_turns"]

MAX_READ: Final = 16 * 1024 * 1024
MAX_TEXT: Final = 20_000


@dataclass
class Turn:
    role: Literal["user", "assistant", "tool_call", "tool_result"]
    text: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    call_id: str = ""


@dataclass
class Reading:
    turns: list[Turn]
    position: int
    """Where the next capture starts: a byte offset, or a message count for a JSON document."""
    kind: Literal["lines", "document"]
    skipped: int = 0
    """Lines that were not JSON or not a turn."""
    note: str = ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content[:MAX_TEXT]
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)[:MAX_TEXT]
    if isinstance(content, dict):
        for key in ("text", "content", "output", "llmContent"):
            if isinstance(content.get(key), str | list):
                return _text_of(content[key])
    return ""


def _turns_of(entry: dict[str, Any]) -> list[Turn] | None:
    """The turns one transcript line holds; ``None`` when it is not a conversation line."""
    if entry.get("isSidechain") is True:
        return []
    if entry.get("type") == "response_item" and isinstance(entry.get("payload"), dict):
        entry = entry["payload"]
    kind = entry.get("type")
    if kind == "function_call":
        try:
            arguments = json.loads(entry.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {"arguments": str(entry.get("arguments"))[:MAX_TEXT]}
        return [
            Turn(
                "tool_call",
                tool=str(entry.get("name", "")),
                input=arguments if isinstance(arguments, dict) else {},
                call_id=str(entry.get("call_id", "")),
            )
        ]
    if kind == "function_call_output":
        output = entry.get("output")
        text = _text_of(output)
        failed = isinstance(output, dict) and output.get("success") is False
        return [
            Turn(
                "tool_result", text=text, is_error=failed or _looks_failed(text), call_id=str(entry.get("call_id", ""))
            )
        ]
    inner = entry.get("message")
    message: dict[str, Any] = inner if isinstance(inner, dict) else entry
    said = message.get("role") or entry.get("role") or kind
    if said not in ("user", "assistant", "model", "gemini"):
        return None
    role: Literal["user", "assistant"] = "user" if said == "user" else "assistant"
    content = message.get("content")
    turns: list[Turn] = []
    if isinstance(content, list):
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            block_type = block.get("type")
            if block_type in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block_type == "tool_use":
                raw = block.get("input")
                turns.append(
                    Turn(
                        "tool_call",
                        tool=str(block.get("name", "")),
                        input=raw if isinstance(raw, dict) else {},
                        call_id=str(block.get("id", "")),
                    )
                )
            elif block_type == "tool_result":
                text = _text_of(block.get("content"))
                turns.append(
                    Turn(
                        "tool_result",
                        text=text,
                        is_error=block.get("is_error") is True,
                        call_id=str(block.get("tool_use_id", "")),
                    )
                )
        if texts:
            turns.insert(0, Turn(role, text="\n".join(texts)[:MAX_TEXT]))
    elif isinstance(content, str) and content.strip():
        turns.append(Turn(role, text=content[:MAX_TEXT]))
    for call in entry.get("toolCalls") or []:  # Gemini CLI
        if isinstance(call, dict):
            args = call.get("args")
            turns.append(
                Turn("tool_call", tool=str(call.get("name", "")), input=args if isinstance(args, dict) else {})
            )
            result = _text_of(call.get("result") or call.get("resultDisplay") or "")
            turns.append(Turn("tool_result", text=result, is_error=call.get("status") == "error"))
    return turns


def _looks_failed(text: str) -> bool:
    head = text[:400]
    return "Exit code: 1" in head or "exit code 1" in head.lower() or "Traceback (most recent call last)" in text


def read_turns(path: Path, position: int, kind: str = "") -> Reading:
    """The turns of ``path`` after ``position`` (see :class:`Reading`)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        first = handle.read(1).lstrip()
        handle.seek(0)
        if kind == "document" or (not kind and first == b"{" and _is_document(path)):
            return _read_document(handle.read(MAX_READ * 4), position)
        note = ""
        if position > size:  # the transcript was replaced: read it again
            position, note = 0, "the transcript shrank; read from its start"
        if size - position > MAX_READ:
            note = f"read the newest {MAX_READ} bytes of {size - position}"
            position = size - MAX_READ
            handle.seek(position)
            handle.readline()  # to the start of the next whole line
            position = handle.tell()
        handle.seek(position)
        data = handle.read(size - position)
    end = data.rfind(b"\n") + 1
    turns: list[Turn] = []
    skipped = 0
    for line in data[:end].splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        found = _turns_of(entry) if isinstance(entry, dict) else None
        if found is None:
            skipped += 1 if not isinstance(entry, dict) else 0
            continue
        turns.extend(found)
    return Reading(turns, position + end, "lines", skipped, note)


def _is_document(path: Path) -> bool:
    """Whether the file is one JSON document (Gemini CLI) rather than JSON lines."""
    with open(path, "rb") as handle:
        head = handle.read(65536)
    first_line = head.split(b"\n", 1)[0].strip()
    if first_line in (b"{", b"[") or first_line.endswith(b"["):
        return True
    try:
        json.loads(first_line)
    except ValueError:
        return b'"messages"' in head
    return False


def _read_document(data: bytes, position: int) -> Reading:
    try:
        document = json.loads(data)
    except ValueError:
        return Reading([], position, "document", 1, "the transcript is not JSON")
    messages = document.get("messages") if isinstance(document, dict) else document
    if not isinstance(messages, list):
        return Reading([], position, "document", 1, "the transcript holds no messages")
    if position > len(messages):
        position = 0
    turns: list[Turn] = []
    skipped = 0
    for message in messages[position:]:
        found = _turns_of(message) if isinstance(message, dict) else None
        if found is None:
            skipped += 1
            continue
        turns.extend(found)
    return Reading(turns, len(messages), "document", skipped)
