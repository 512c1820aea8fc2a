"""What a conversation decided, fixed and left to do, found by rules over its turns (no model needed).

- **decision**: a sentence of the user or the assistant that states a choice ("we switch the job queue to
  Redis streams", "let's use …", "decision: …", "from now on …"), not a question, outside code blocks.
- **fix**: an error (a failed tool call, a traceback's last line) followed by what fixed it: the
  assistant's sentence that says so ("the problem was …", "fixed by …"), or the same command succeeding.
- **todo**: "TODO: …", "- [ ] …", "we still need to …", "next step: …", and the open items of the last
  todo list the agent wrote (Claude Code's ``TodoWrite``).
- **files changed**: the paths the edit and write tools touched.

Texts are cut to a few hundred characters; secrets and ``<private>`` spans are removed by the caller
before the rules read them, and again by the service before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from eventmem.adapters.hooks.transcript import Turn

__all__ = ["Extracted", "Item", "extract"]

MAX_SENTENCE: Final = 400


@dataclass(frozen=True)
class Item:
    kind: str
    content: str
    title: str = ""
    tags: tuple[str, ...] = ()
    importance: float = 0.5


@dataclass
class Extracted:
    items: list[Item] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    assistant_text: list[str] = field(default_factory=list)
    errors: int = 0


_CODE: Final = re.compile(r"```.*?(```|\Z)|`[^`\n]{0,200}`", re.DOTALL)
_SENTENCES: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_DECISION: Final = re.compile(
    r"\b(?:"
    r"(?:we|let's|let us|the team)(?:'ll|\s+will|\s+are going to|\s+have|\s+should|\s+now)?\s+(?:now\s+)?"
    r"(?:switch(?:ed)?|mov(?:e|ed)|migrat(?:e|ed)|go with|went with|adopt(?:ed)?|cho(?:ose|se)|decided?|"
    r"settled? on|standardi[sz]ed? on|replac(?:e|ed)|drop(?:ped)?|deprecat(?:e|ed)|use|pick(?:ed)?|keep)\b"
    r"|i (?:decided|chose|went with|settled on)\b|decision\s*:|from now on\b|going forward\b"
    r")",
    re.IGNORECASE,
)
_FIX: Final = re.compile(
    r"\b(?:fix(?:ed|es)?\b|the (?:problem|issue|cause|bug|error) (?:was|is)\b|caused by\b|solved\b|resolved\b|"
    r"works now\b|now passes\b|the solution\b|root cause\b)",
    re.IGNORECASE,
)
_TODO: Final = re.compile(
    r"^\s*(?:[-*]\s*\[ \]\s*|todo\s*[:\-]\s*)"
    r"|\b(?:still need to|we still have to|left to do|next steps?\s*(?:is|are|:)|"
    r"follow[- ]up\s*:|remaining\s*:|later we (?:should|need to|must))",
    re.IGNORECASE,
)
_DECISION_WORDS: Final = (
    "we ", "we'", "let's", "let us", "the team", "i decided", "i chose", "i went with", "i settled",
    "decision", "from now on", "going forward",
)  # fmt: skip
_TODO_WORDS: Final = (
    "todo", "[ ]", "still need", "still have to", "left to do", "next step", "follow", "remaining", "later we",
)  # fmt: skip
_FIX_WORDS: Final = (
    "fix", "problem", "issue", "cause", "bug", "error", "solved", "resolved", "works now", "passes", "solution",
)  # fmt: skip
"""Words one of whose rules needs: a turn holding none of them is not split into sentences (a long
transcript is mostly such turns)."""


def _may_hold(text: str, *groups: tuple[str, ...]) -> bool:
    lowered = text.lower()
    return any(word in lowered for group in groups for word in group)


_ERROR_LINE: Final = re.compile(
    r"^\s*(?:\w+(?:\.\w+)*(?:Error|Exception)\b.*|error:.*|Error:.*|FAILED.*|fatal:.*)$", re.MULTILINE
)
_EDIT_TOOLS: Final = {"Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "replace", "edit_file", "apply_patch"}
_SHELL_TOOLS: Final = {"Bash", "shell", "run_shell_command", "exec_command", "local_shell"}


def _sentences(text: str) -> list[str]:
    prose = _CODE.sub(" ", text)
    out = []
    for part in _SENTENCES.split(prose):
        sentence = " ".join(part.split()).strip(" -*>#")
        if 12 <= len(sentence) and not sentence.endswith("?"):
            out.append(sentence[:MAX_SENTENCE])
    return out


def _title(sentence: str, words: int = 9) -> str:
    parts = sentence.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _error_of(text: str) -> str:
    found = _ERROR_LINE.findall(text[-8000:])
    line = (found[-1] if found else text.strip().splitlines()[-1] if text.strip() else "").strip()
    return line[:300]


def _command_of(turn: Turn) -> str:
    for key in ("command", "cmd", "commands"):
        value = turn.input.get(key)
        if isinstance(value, str):
            return value[:300]
        if isinstance(value, list):
            return " ".join(str(v) for v in value)[:300]
    return ""


def extract(turns: list[Turn], root: Path | None = None) -> Extracted:
    """The items ``turns`` hold (see the module docs), in the order they were said, without repeats."""
    out = Extracted()
    seen: set[str] = set()
    calls: dict[str, Turn] = {}
    open_error: tuple[str, str, str] | None = None  # (error line, tool, command)
    last_todos: list[str] | None = None

    def add(item: Item) -> None:
        key = " ".join(item.content.lower().split())
        if key not in seen:
            seen.add(key)
            out.items.append(item)

    for turn in turns:
        if turn.role == "user":
            text = turn.text.strip()
            if text and not text.startswith("<") and "being continued from a previous conversation" not in text:
                out.prompts.append(" ".join(text.split())[:300])
            if not _may_hold(turn.text, _DECISION_WORDS, _TODO_WORDS):
                continue
            for sentence in _sentences(turn.text):
                _classify(sentence, add)
        elif turn.role == "assistant":
            out.assistant_text.append(turn.text)
            if not _may_hold(turn.text, _DECISION_WORDS, _TODO_WORDS, _FIX_WORDS if open_error else ()):
                continue
            for sentence in _sentences(turn.text):
                if open_error is not None and _FIX.search(sentence):
                    error, tool, command = open_error
                    add(
                        Item(
                            "fix",
                            f"Error: {error}\nFix: {sentence}",
                            title=_title(f"Fix: {error}", 10),
                            tags=("error-fix",),
                            importance=0.6,
                        )
                    )
                    open_error = None
                    continue
                _classify(sentence, add)
        elif turn.role == "tool_call":
            calls[turn.call_id] = turn
            if turn.tool in _EDIT_TOOLS:
                path = turn.input.get("file_path") or turn.input.get("path") or turn.input.get("notebook_path")
                if isinstance(path, str) and path:
                    shown = _relative(path, root)
                    if shown not in out.files:
                        out.files.append(shown)
            if turn.tool == "TodoWrite" and isinstance(turn.input.get("todos"), list):
                last_todos = [
                    str(todo.get("content", "")).strip()
                    for todo in turn.input["todos"]
                    if isinstance(todo, dict) and todo.get("status") != "completed" and todo.get("content")
                ]
        elif turn.role == "tool_result":
            call = calls.get(turn.call_id)
            tool, command = (call.tool, _command_of(call)) if call is not None else ("", "")
            if turn.is_error or _looks_like_error(turn.text):
                out.errors += 1
                error = _error_of(turn.text)
                if error:
                    open_error = (error, tool, command)
            elif open_error is not None and command and command == open_error[2] and tool in _SHELL_TOOLS:
                error, _, _ = open_error
                add(
                    Item(
                        "fix",
                        f"Error: {error}\nFixed: `{command}` succeeded after the changes that followed.",
                        title=_title(f"Fix: {error}", 10),
                        tags=("error-fix",),
                        importance=0.5,
                    )
                )
                open_error = None
    for todo in last_todos or []:
        add(Item("todo", todo[:MAX_SENTENCE], title=_title(todo), tags=("todo",)))
    return out


def _looks_like_error(text: str) -> bool:
    head = text[:2000]
    return "Traceback (most recent call last)" in text or bool(re.search(r"(?im)^(?:error|fatal):", head))


def _classify(sentence: str, add: object) -> None:
    assert callable(add)
    if _TODO.search(sentence):
        text = re.sub(r"^\s*(?:[-*]\s*\[ \]\s*|todo\s*[:\-]\s*)", "", sentence, flags=re.IGNORECASE)
        add(Item("todo", text[:MAX_SENTENCE], title=_title(text), tags=("todo",)))
    elif _DECISION.search(sentence) and len(sentence.split()) >= 4:
        add(Item("decision", sentence, title=_title(sentence), tags=("decision",), importance=0.6))


def _relative(path: str, root: Path | None) -> str:
    if root is not None:
        try:
            return str(Path(path).resolve().relative_to(root.resolve()))
        except (ValueError, OSError):
            pass
    return path[-200:]
