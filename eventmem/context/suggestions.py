"""Suggesting updates to a project's context from a conversation's end, and the working tree's changes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from eventmem.context.parse import dedupe_key, normalize_singleton
from eventmem.context.reading import BY_KEY, Mode
from eventmem.context.render import is_placeholder, render_entry, render_section
from eventmem.context.writes import ContextWrites, dated
from eventmem.core.sections import SECTIONS, Entry
from eventmem.journal.worktree import changes

__all__ = ["ContextSuggestions"]

_DECISION_HINT = re.compile(
    r"\b(?:decided|decision|we chose|chose to|switched to|agreed|will use|going with|opted)\b", re.I
)
_TODO_HINT = re.compile(r"\b(?:todo|to do|next step|follow[- ]?up|still need|remaining work|not yet done)\b", re.I)
_DONE_HINT = re.compile(r"\b(?:done|finished|completed|shipped|merged)\b", re.I)


class ContextSuggestions(ContextWrites):
    """Suggestions that write nothing, and the working tree's changes as a recent change."""

    # -- suggestions --------------------------------------------------------------------------

    def suggest_updates(
        self,
        *,
        summary: str | None = None,
        current_task: str | None = None,
        decisions: Sequence[str] | None = None,
        recent_changes: Sequence[str] | None = None,
        include_git_diff: bool = True,
    ) -> dict[str, Any]:
        """Which sections to change, ``append`` or ``replace``, with a preview and the tool call
        that would do it. Writes nothing."""
        sections = self.sections()
        suggestions: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []

        def suggest(key: str, action: Mode, reason: str, preview: str, tool: str, arguments: Mapping[str, Any]) -> None:
            section = BY_KEY[key]
            suggestions.append(
                {
                    "section": key,
                    "file": self.file_of(section),
                    "action": action,
                    "reason": reason,
                    "preview": preview,
                    "tool": tool,
                    "arguments": dict(arguments),
                }
            )

        text = (summary or "").strip()
        if text:
            entry = self._summary_entry(text, None)
            suggest(
                "conversationSummary",
                "append",
                "a summary of this conversation",
                render_entry(entry, heading=True),
                "record_conversation_summary",
                {"summary": text},
            )
        task_section = BY_KEY["currentTask"]
        current = sections["currentTask"][0].content if sections["currentTask"] else ""
        if current_task and current_task.strip():
            new = normalize_singleton(task_section, current_task)
            if new != current:
                suggest(
                    "currentTask",
                    "replace",
                    "the current task changed",
                    render_section(task_section, [Entry("", "", new)]),
                    "update_current_task",
                    {"task": new},
                )
        elif text and current and not is_placeholder(current) and _DONE_HINT.search(text):
            suggest(
                "currentTask",
                "replace",
                "the summary says work was finished: the current task may be out of date",
                render_section(task_section, [Entry("", "", "<what comes next>")]),
                "update_current_task",
                {"task": "<what comes next>"},
            )
        existing = {dedupe_key(e) for e in sections["decisions"]}
        candidates = [(d.strip(), "a decision you named") for d in decisions or () if d and d.strip()]
        if not decisions and text:
            candidates += [(s, "the summary mentions a decision") for s in _sentences(text) if _DECISION_HINT.search(s)]
        for decision, reason in candidates:
            entry = self._decision_entry(decision)
            if dedupe_key(entry) in existing:
                skipped.append({"section": "decisions", "text": decision, "reason": "already recorded"})
                continue
            existing.add(dedupe_key(entry))
            suggest(
                "decisions",
                "append",
                reason,
                render_entry(entry, heading=True),
                "add_decision",
                {"decision": decision},
            )
        changes = self._change_entries(recent_changes)
        if changes:
            for change in changes:
                suggest(
                    "recentChanges",
                    "append",
                    "a change you named",
                    render_entry(change, heading=False),
                    "record_conversation_summary",
                    {"summary": text or "<summary>", "recentChanges": [change.content]},
                )
        elif include_git_diff:
            diff = self.git_diff()
            if diff.get("available") and diff.get("files"):
                change = Entry("", "", dated(diff["summary"]))
                suggest(
                    "recentChanges",
                    "append",
                    "the working tree has uncommitted changes",
                    render_entry(change, heading=False),
                    "summarize_git_diff",
                    {"writeToRecentChanges": True},
                )
        if text:
            for sentence in _sentences(text):
                if _TODO_HINT.search(sentence) and not _DECISION_HINT.search(sentence):
                    suggest(
                        "todo",
                        "append",
                        "the summary mentions work still to do",
                        f"- [ ] {sentence}\n",
                        "update_context_section",
                        {"section": "todo", "content": f"[ ] {sentence}", "mode": "append"},
                    )
        for section in SECTIONS:
            if not section.singleton or (section.key == "currentTask" and current_task):
                continue
            entries = sections[section.key]
            if not entries or is_placeholder(entries[0].content):
                tool = "update_current_task" if section.key == "currentTask" else "update_context_section"
                arguments: dict[str, Any] = (
                    {"task": f"<{section.hint}>"}
                    if section.key == "currentTask"
                    else {"section": section.key, "content": f"<{section.hint}>", "mode": "replace"}
                )
                suggest(
                    section.key,
                    "replace",
                    "missing" if not entries else "still a placeholder",
                    f"# {section.title}\n\n<{section.hint}>\n",
                    tool,
                    arguments,
                )
        return {"status": "success", "suggestions": suggestions, "skipped": skipped, "wroteNothing": True}

    # -- git ------------------------------------------------------------------------------------

    def git_diff(self, *, write_to_recent_changes: bool = False) -> dict[str, Any]:
        """The working tree's changes (see :func:`eventmem.journal.worktree.changes`), leaving out
        ``.eventmem/`` and a tracked view; ``write_to_recent_changes`` appends the summary."""
        excluded = [".eventmem/"]
        if self.view_tracked:
            excluded.append(self.relative(self.view_dir()).rstrip("/") + "/")
        out = {"status": "success"} | changes(self.paths.root, exclude=excluded, branch=self.paths.branch())
        if not write_to_recent_changes or not out["available"]:
            return out
        if not out["files"]:
            return out | {"recentChangeId": None, "note": "nothing to record: the working tree has no changes"}
        entry = Entry("", "", dated(out["summary"]))
        if paused := self._guard({"recentChanges": [entry]}):
            return out | paused
        out["recentChangeId"] = self._add(BY_KEY["recentChanges"], entry)
        self.render_view()
        return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]
