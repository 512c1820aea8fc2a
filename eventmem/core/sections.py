"""The shared project-memory protocol's eight sections (the ``.ai/`` files), and the entries they hold.

Four sections are *singletons*, one text each, kept as a memory with a well-known id
(``section:project``) so that two clones editing the current task resolve by last-writer-wins like
any field. Four are *lists*, one memory per entry (kinds ``decision``, ``recent_change``,
``conversation_summary``, ``todo``), rendered in created order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["SECTIONS", "Entry", "Section", "section_named", "singleton_of_kind"]


@dataclass(frozen=True)
class Section:
    key: str
    """The protocol's name, as tool arguments and results spell it (``currentTask``)."""
    kind: str
    """The memory kind of its memories."""
    file: str
    """The file name in an ``.ai/`` directory."""
    title: str
    singleton: bool
    core: bool
    """Part of ``coreContext`` (in full at bootstrap) rather than ``supplementalContext``."""
    hint: str
    """What belongs in it: the placeholder and the warnings say so."""
    aliases: tuple[str, ...] = ()
    """Other first headings that mean this section (dropped on import)."""

    @property
    def memory_id(self) -> str:
        """The well-known id of a singleton section."""
        return "section:" + self.file.removesuffix(".md")


SECTIONS: Final = (
    Section(
        "project",
        "project",
        "project.md",
        "Project",
        True,
        True,
        "what the project is, who it is for, the stack, and how to build, test and run it",
        ("project overview", "overview", "about"),
    ),
    Section(
        "architecture",
        "architecture",
        "architecture.md",
        "Architecture",
        True,
        True,
        "the main components, how data flows between them, and where things live",
        ("architecture overview", "system architecture"),
    ),
    Section(
        "currentTask",
        "current_task",
        "current-task.md",
        "Current task",
        True,
        True,
        "what is being worked on now, the next step and the open questions",
        ("task", "current work"),
    ),
    Section(
        "codingStyle",
        "coding_style",
        "coding-style.md",
        "Coding style",
        True,
        True,
        "the conventions: naming, formatting, tests, error handling, what to avoid",
        ("code style", "style guide", "coding conventions", "conventions"),
    ),
    Section(
        "decisions",
        "decision",
        "decisions.md",
        "Decisions",
        False,
        False,
        "decisions with their reasons, newest last",
        ("decision log", "architecture decisions"),
    ),
    Section(
        "recentChanges",
        "recent_change",
        "recent-changes.md",
        "Recent changes",
        False,
        False,
        "what changed recently, newest last",
        ("changes", "changelog"),
    ),
    Section(
        "conversationSummary",
        "conversation_summary",
        "conversation-summary.md",
        "Conversation summary",
        False,
        False,
        "dated summaries of past conversations, newest last",
        ("conversation summaries", "conversations", "session summaries"),
    ),
    Section(
        "todo",
        "todo",
        "todo.md",
        "Todo",
        False,
        False,
        "open work, one item per line",
        ("todos", "to do", "to-do", "tasks", "backlog"),
    ),
)

_BY_NAME: Final = {
    name: section
    for section in SECTIONS
    for name in {
        section.key.lower(),
        section.kind,
        section.file.lower(),
        section.file.removesuffix(".md"),
        section.title.lower(),
    }
}


def section_named(name: str) -> Section | None:
    """The section a name means: ``currentTask``, ``current_task``, ``current-task(.md)``, ``Current task``."""
    clean = name.strip().lower()
    return _BY_NAME.get(clean) or _BY_NAME.get(clean.replace(" ", "_")) or _BY_NAME.get(clean.replace("_", "-"))


def singleton_of_kind(kind: str) -> Section | None:
    """The singleton section whose memory has this kind (``current_task`` → currentTask), if any."""
    clean = kind.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(kind, str) else ""
    return next((section for section in SECTIONS if section.singleton and section.kind == clean), None)


@dataclass(frozen=True)
class Entry:
    """One memory of a section, as the fold holds it."""

    id: str
    title: str
    content: str
    summary: str = ""
    created_at: str = ""
    updated_at: str = ""
    updated_by: str = ""
