"""Wiring eventmem's hooks into a client's settings, and taking them out again.

``install`` merges eventmem's entries into the client's file and keeps every other setting, key order
included; running it again changes nothing (an entry of ours whose command changed is updated in
place). ``uninstall`` removes only eventmem's entries. eventmem's entries are the commands that run
``eventmem hook CLIENT`` (however eventmem is named: on the PATH, a path, ``python -m eventmem``).
A settings file that is not a JSON object is refused in one line and left as it is.

For a client without hooks, ``install`` writes the instruction snippet between two markers into its
rules file (``AGENTS.md`` and the like) and ``uninstall`` removes that block.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from eventmem.adapters.hooks.clients import Client, InstructionClient
from eventmem.core.errors import InvalidInput

__all__ = ["Change", "hook_command", "install", "installed", "uninstall"]

TIMEOUTS: Final = {"start": 30, "prompt": 30, "capture": 60, "tool": 15}
"""Seconds a client may let each hook run (the hook gives up a few seconds earlier on its own)."""
BEGIN: Final = "<!-- eventmem:begin -->"
END: Final = "<!-- eventmem:end -->"
SNIPPET: Final = """{begin}
## Project memory (eventmem)

This project keeps its memory in `.eventmem/` (an event journal in git) behind the `eventmem` MCP server.
This client runs no lifecycle hooks, so run the workflows yourself:

- **When you start in this project**: call `get_context` (or `recall` with the task at hand) and read the
  current task, the decisions and the conventions before changing anything.
- **When the user asks something**: `recall` the few memories about it first.
- **When a turn settles something**: `save_memory` it with its type: `decision` for a choice made, `fix` for
  an error and what solved it, `todo` for what is left; set `current_task` when the task changes.
- **When the conversation ends**: save a short summary of what was asked, decided and changed.

Never save secrets; wrap anything that must stay out of the memory in `<private>…</private>`.
{end}
"""


@dataclass
class Change:
    """What an install or uninstall did to one file."""

    file: Path
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.file),
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "changed": self.changed,
            **({"note": self.note} if self.note else {}),
        }


def hook_command(client: Client, program: str | None = None) -> str:
    """The command a client runs: ``eventmem hook CLIENT``, with eventmem as the PATH finds it, else this
    Python running ``-m eventmem`` (``program`` overrides both)."""
    if program:
        return f"{program} hook {client.name}"
    script = _this_script()
    found = shutil.which("eventmem")
    if script is not None and found and Path(found).resolve() == script:
        return f"eventmem hook {client.name}"
    if script is not None:
        return f"{shlex.quote(str(script))} hook {client.name}"
    return f"{shlex.quote(sys.executable)} -m eventmem hook {client.name}"


def _this_script() -> Path | None:
    """The ``eventmem`` script beside this Python (a virtual environment's or the system's), if any."""
    candidate = Path(sys.executable).parent / "eventmem"
    return candidate.resolve() if candidate.is_file() else None


def is_ours(command: Any, client_name: str) -> bool:
    if not isinstance(command, str):
        return False
    pattern = r"(?:^|[\s/\\\"'])eventmem(?:\.exe)?[\"']?\s+hook\s+" + re.escape(client_name) + r"(?:\s|$)"
    return re.search(pattern, command) is not None


def _read_json(path: Path) -> dict[str, Any]:
    if path.is_symlink():
        raise InvalidInput(f"{path} is a symbolic link; eventmem does not write through it")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: cannot be read: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it first, eventmem leaves it as it is") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} is not a JSON object; eventmem leaves it as it is")
    return data


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.eventmem.tmp")
    temp.write_text(text, encoding="utf-8")
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    os.chmod(temp, mode)
    os.replace(temp, path)


def _timeout(client: Client, action: str) -> dict[str, int]:
    seconds = TIMEOUTS[action]
    if client.timeout_unit == "s":
        return {"timeout": seconds}
    if client.timeout_unit == "ms":
        return {"timeout": seconds * 1000}
    return {}


def _hooks_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    table = data.setdefault("hooks", {})
    if not isinstance(table, dict):
        raise InvalidInput(f"{path}: 'hooks' is not an object; eventmem leaves the file as it is")
    return table


def install(client: Client, path: Path, command: str, *, with_tools: bool = False) -> Change:
    """Merge eventmem's hooks for ``client`` into ``path``."""
    data = _read_json(path)
    if client.layout == "flat":
        data.setdefault("version", 1)
    table = _hooks_table(data, path)
    change = Change(path)
    for event, action in client.events.items():
        if action == "tool" and not with_tools:
            continue
        entries = table.setdefault(event, [])
        if not isinstance(entries, list):
            raise InvalidInput(f"{path}: hooks.{event} is not a list; eventmem leaves the file as it is")
        handler = {"type": "command", "command": command, **_timeout(client, action)}
        if client.layout == "flat":
            handler = {"command": command, **_timeout(client, action)}
        found = False
        for handler_at in _our_handlers(entries, client):
            found = True
            if handler_at.get("command") != command:
                handler_at["command"] = command
                change.updated.append(event)
            else:
                change.unchanged.append(event)
        if found:
            continue
        entries.append(handler if client.layout == "flat" else {"hooks": [handler]})
        change.added.append(event)
    if change.changed or not path.exists():
        _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return change


def _our_handlers(entries: list[Any], client: Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if client.layout == "flat":
            if is_ours(entry.get("command"), client.name):
                found.append(entry)
            continue
        found.extend(
            handler
            for handler in entry.get("hooks") or []
            if isinstance(handler, dict) and is_ours(handler.get("command"), client.name)
        )
    return found


def uninstall(client: Client, path: Path) -> Change:
    """Remove eventmem's hooks for ``client`` from ``path`` (nothing else)."""
    change = Change(path)
    if not path.exists():
        change.note = "no such file"
        return change
    data = _read_json(path)
    table = data.get("hooks")
    if not isinstance(table, dict):
        return change
    for event in list(table):
        entries = table[event]
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        removed = False
        for entry in entries:
            if client.layout == "flat":
                if isinstance(entry, dict) and is_ours(entry.get("command"), client.name):
                    removed = True
                    continue
                kept.append(entry)
                continue
            if isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
                handlers = [
                    h for h in entry["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command"), client.name))
                ]
                if len(handlers) != len(entry["hooks"]):
                    removed = True
                    if not handlers:
                        continue
                    entry = {**entry, "hooks": handlers}
            kept.append(entry)
        if removed:
            change.removed.append(event)
            if kept:
                table[event] = kept
            else:
                del table[event]
    if change.removed:
        if not table:
            del data["hooks"]
        _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return change


def installed(client: Client, path: Path) -> dict[str, str]:
    """eventmem's hooks in ``path``: event -> command (empty when none or unreadable)."""
    try:
        data = _read_json(path)
    except InvalidInput:
        return {}
    table = data.get("hooks")
    if not isinstance(table, dict):
        return {}
    found: dict[str, str] = {}
    for event, entries in table.items():
        if isinstance(entries, list):
            for handler in _our_handlers(entries, client):
                found[str(event)] = str(handler.get("command"))
    return found


def install_snippet(client: InstructionClient, path: Path) -> Change:
    """Write (or refresh) the instruction block in ``path``."""
    change = Change(path, note=f"{client.title} runs no lifecycle hooks: wrote instructions for the agent instead")
    block = SNIPPET.format(begin=BEGIN, end=END)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if BEGIN in text and END in text:
        start, stop = text.index(BEGIN), text.index(END) + len(END)
        current = text[start:stop] + "\n"
        if current == block:
            change.unchanged.append("instructions")
            return change
        text = text[:start] + block.rstrip("\n") + text[stop:]
        change.updated.append("instructions")
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block
        change.added.append("instructions")
    _write(path, text)
    return change


def uninstall_snippet(client: InstructionClient, path: Path) -> Change:
    change = Change(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        change.note = "no such file"
        return change
    if BEGIN not in text or END not in text:
        return change
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    rest = (text[:start].rstrip("\n") + "\n" + text[stop:].lstrip("\n")).strip("\n")
    change.removed.append("instructions")
    if rest.strip():
        _write(path, rest + "\n")
    else:
        path.unlink()
    return change


def snippet_installed(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return BEGIN in text and END in text
