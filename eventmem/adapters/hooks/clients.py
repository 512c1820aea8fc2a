"""The clients eventmem wires, each with its own hook protocol: where its settings live, which of its
events mean what to eventmem, how an event names its session and folder, and how an answer is written.

Based on each client's documentation (see ``docs/hooks.md`` for the sources):

- Claude Code: ``hooks`` in ``.claude/settings.json`` (project) or ``~/.claude/settings.json`` (user),
  event -> list of ``{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}`` (seconds);
  stdin JSON with ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` (and ``source``,
  ``prompt``, ``reason``, ``trigger``); context goes back as
  ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` on exit 0.
- Codex: ``.codex/hooks.json`` or ``~/.codex/hooks.json``, the same shape and the same answer for
  ``SessionStart`` and ``UserPromptSubmit``; ``Stop`` and ``PreCompact`` carry ``transcript_path``.
- Gemini CLI: ``hooks`` in ``.gemini/settings.json`` or ``~/.gemini/settings.json`` (timeouts in
  milliseconds); ``SessionStart``, ``BeforeAgent`` (the prompt), ``AfterAgent``, ``PreCompress`` and
  ``SessionEnd``; stdout must be JSON only, ``hookSpecificOutput.additionalContext`` adds context.
- Cursor: ``.cursor/hooks.json`` or ``~/.cursor/hooks.json``, ``{"version": 1, "hooks": {event:
  [{"command"}]}}``; ``sessionStart`` answers ``{"additional_context"}``; ``beforeSubmitPrompt`` cannot
  add context, so prompts get nothing; ``stop``, ``preCompact`` and ``sessionEnd`` capture.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing is not imported at run time: the hook's fast path starts a process per event)
    from pathlib import Path
    from typing import Any, Final, Literal

    Action = Literal["start", "prompt", "capture", "tool"]

__all__ = ["ACTIONS", "CLIENTS", "INSTRUCTION_CLIENTS", "Client", "InstructionClient", "answer", "client_named"]

ACTIONS: Final = ("start", "prompt", "capture", "tool")


class Client:
    """A client that runs commands at its lifecycle events.

    ``project_file`` and ``user_file``: its settings file, relative to the project root and to the home
    folder. ``events``: its event names -> what eventmem does at each. ``layout``: ``grouped`` is
    ``{"hooks": {event: [{"matcher", "hooks": [command...]}]}}`` (Claude Code, Codex, Gemini CLI),
    ``flat`` is ``{"version": 1, "hooks": {event: [command...]}}`` (Cursor). ``json_always``: stdout
    must always be one JSON object (Gemini CLI, Cursor). ``docs``: where its protocol is described."""

    def __init__(
        self,
        *,
        name: str,
        title: str,
        project_file: str,
        user_file: str,
        events: dict[str, Action],
        layout: Literal["grouped", "flat"] = "grouped",
        timeout_unit: Literal["s", "ms", ""] = "s",
        json_always: bool = False,
        style: Literal["claude", "cursor"] = "claude",
        docs: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.title = title
        self.project_file = project_file
        self.user_file = user_file
        self.events = events
        self.layout = layout
        self.timeout_unit = timeout_unit
        self.json_always = json_always
        self.style = style
        self.docs = docs

    def event_action(self, event: str) -> Action | None:
        found = self.events.get(event)
        if found is None:  # a client may change the case of its names
            lowered = {name.lower(): action for name, action in self.events.items()}
            found = lowered.get(event.lower())
        return found


class InstructionClient:
    """A client without lifecycle hooks: ``install`` writes instructions asking the agent to run the
    workflows itself (through eventmem's MCP tools)."""

    def __init__(self, *, name: str, title: str, project_file: str, user_file: str = "") -> None:
        self.name = name
        self.title = title
        self.project_file = project_file
        self.user_file = user_file


CLIENTS: Final[dict[str, Client]] = {
    client.name: client
    for client in (
        Client(
            name="claude-code",
            title="Claude Code",
            project_file=".claude/settings.json",
            user_file=".claude/settings.json",
            events={
                "SessionStart": "start",
                "UserPromptSubmit": "prompt",
                "Stop": "capture",
                "PreCompact": "capture",
                "SessionEnd": "capture",
                "PostToolUse": "tool",
            },
            docs=("https://docs.claude.com/en/docs/claude-code/hooks",),
        ),
        Client(
            name="codex",
            title="Codex",
            project_file=".codex/hooks.json",
            user_file=".codex/hooks.json",
            events={
                "SessionStart": "start",
                "UserPromptSubmit": "prompt",
                "Stop": "capture",
                "PreCompact": "capture",
                "PostToolUse": "tool",
            },
            docs=("https://developers.openai.com/codex/hooks",),
        ),
        Client(
            name="gemini",
            title="Gemini CLI",
            project_file=".gemini/settings.json",
            user_file=".gemini/settings.json",
            events={
                "SessionStart": "start",
                "BeforeAgent": "prompt",
                "AfterAgent": "capture",
                "PreCompress": "capture",
                "SessionEnd": "capture",
                "AfterTool": "tool",
            },
            timeout_unit="ms",
            json_always=True,
            docs=("https://geminicli.com/docs/hooks/reference",),
        ),
        Client(
            name="cursor",
            title="Cursor",
            project_file=".cursor/hooks.json",
            user_file=".cursor/hooks.json",
            events={
                "sessionStart": "start",
                "stop": "capture",
                "preCompact": "capture",
                "sessionEnd": "capture",
                "postToolUse": "tool",
            },
            layout="flat",
            timeout_unit="",
            json_always=True,
            style="cursor",
            docs=("https://cursor.com/docs/agent/hooks",),
        ),
    )
}
"""Every client with hooks, by the name ``eventmem hook NAME`` takes."""

INSTRUCTION_CLIENTS: Final[dict[str, InstructionClient]] = {
    client.name: client
    for client in (
        InstructionClient(name="agents-md", title="AGENTS.md (any agent that reads it)", project_file="AGENTS.md"),
        InstructionClient(name="windsurf", title="Windsurf", project_file=".windsurf/rules/eventmem.md"),
        InstructionClient(name="cline", title="Cline", project_file=".clinerules/eventmem.md"),
    )
}
"""Clients without lifecycle hooks: ``install`` writes the instruction snippet instead."""

ALIASES: Final = {"claude": "claude-code", "claude_code": "claude-code", "gemini-cli": "gemini", "codex-cli": "codex"}


def client_named(name: str) -> Client | InstructionClient | None:
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    return CLIENTS.get(key) or INSTRUCTION_CLIENTS.get(key)


def answer(client: Client, event: str, action: Action | None, context: str) -> str:
    """What ``eventmem hook`` prints for ``event``: the client's own format, or nothing at all when
    there is nothing to add and the client does not want JSON every time."""
    payload: dict[str, Any] = {}
    if context:
        if client.style == "cursor":
            if action == "start":
                payload = {"additional_context": context}
        elif action in ("start", "prompt", "tool"):
            payload = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    if not payload and not client.json_always:
        return ""
    return json.dumps(payload, ensure_ascii=False)


def settings_path(client: Client | InstructionClient, scope: str, root: Path, home: Path) -> Path:
    """The file ``install`` writes for ``scope`` (``project`` or ``user``)."""
    if scope == "user":
        if not client.user_file:
            raise ValueError(f"{client.title} has no user-wide file; use --scope project")
        return home / client.user_file
    return root / client.project_file
