"""The shared project-memory protocol (the ``.ai/`` files) as pure functions: no IO here.

Eight sections make up a project's shared context. Four are *singletons*, one text each, kept as a
memory with a well-known id (``section:project``) so that two clones editing the current task
resolve by last-writer-wins like any field. Four are *lists*, one memory per entry (kinds
``decision``, ``recent_change``, ``conversation_summary``, ``todo``), rendered in created order.

This module renders sections as ``.ai/``-style markdown, parses such markdown back into entries
(``eventmem import pmp``), recognises placeholder text, and plans an optimization (create missing
sections, flag placeholders, drop duplicate entries, tidy blank lines, archive old entries). The
IO side (reading the fold, appending events, writing files) is :mod:`eventmem.project_context`;
the working tree's changes come from :mod:`eventmem.worktree`.

Round trip: parsing what :func:`render_section` wrote gives back the same entries (the same
:func:`entry_key`), so importing a rendered view changes nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "SECTIONS",
    "Action",
    "Entry",
    "ParsedSection",
    "Plan",
    "Section",
    "dedupe_key",
    "entry_key",
    "import_id",
    "is_placeholder",
    "normalize_singleton",
    "parse_section",
    "placeholder_text",
    "plan_optimization",
    "render_entry",
    "render_section",
    "section_bytes",
    "section_named",
    "singleton_of_kind",
    "summarize_section",
    "tidy",
]


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


# -- placeholders -----------------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_WRAPPED = re.compile(r"^(?:[_*]+(.+?)[_*]+|\[(.+)\]|\((.+)\)|<(.+)>)$")
_FILLER = re.compile(
    r"^(?:tbd|tba|todo|n/?a|none|nothing|placeholder|coming soon|wip|fill (?:this|me) in|"
    r"to be (?:written|defined|decided|determined|added|filled in)|\.{3}|…|-+)$"
)
_INSTRUCTION = re.compile(
    r"^(?:(?:no|nothing)\b.*\b(?:yet|recorded)\b|not (?:written|filled in|recorded|described) yet\b|"
    r"(?:describe|add|write|list|document|explain|summari[sz]e|record|fill|enter|replace|insert)\b)"
)
_NOTHING_YET = re.compile(r"^(?:no|nothing)\b.{0,60}\b(?:yet|recorded(?: yet)?)$")


def strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def _placeholder_line(line: str) -> bool:
    core = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line.strip())
    core = re.sub(r"^\[[ xX]?\]\s*", "", core).strip()
    wrapped = _WRAPPED.match(core)
    inner = next((g for g in wrapped.groups() if g), core) if wrapped else core
    lowered = inner.lower().strip().rstrip(".!:").strip()
    if _FILLER.match(lowered):
        return True
    if wrapped and _INSTRUCTION.match(lowered):
        return True
    return bool(_NOTHING_YET.match(lowered))


def is_placeholder(text: str) -> bool:
    """Text that holds no knowledge yet: empty, ``TBD``, ``_Describe the project here._``,
    ``{{PROJECT_NAME}}``, ``_No decisions yet._``, or headings with only such lines under them."""
    clean = strip_comments(text).strip()
    if not clean:
        return True
    if "{{" in clean and "}}" in clean:
        return True
    lines = [line.strip() for line in clean.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return all(_placeholder_line(line) for line in lines)


def placeholder_text(section: Section) -> str:
    if section.singleton:
        return f"_Not written yet: {section.hint}._"
    return f"_No {section.title.lower()} recorded yet._"


# -- rendering --------------------------------------------------------------------------------------


def render_entry(entry: Entry, *, heading: bool) -> str:
    """A titled entry (or any entry of a section in heading mode) is a ``##`` block; an untitled one
    is a bullet with its continuation lines indented by two spaces."""
    content = entry.content.strip()
    if heading or entry.title:
        title = entry.title
        if not title:
            title, _, content = content.partition("\n")
            content = content.strip()
        return f"## {title}\n\n{content}\n" if content else f"## {title}\n"
    lines = content.splitlines() or [""]
    rest = [f"  {line}" if line.strip() else "" for line in lines[1:]]
    return "\n".join([f"- {lines[0]}", *rest]) + "\n"


def render_section(section: Section, entries: Sequence[Entry]) -> str:
    """The section's markdown file. A list section whose entries all lack a title is a bullet list;
    once one has a title, every entry is a ``##`` block (so a re-import splits them the same way)."""
    head = f"# {section.title}\n"
    if section.singleton:
        content = entries[0].content.strip() if entries else ""
        if not content:
            return f"{head}\n{placeholder_text(section)}\n"
        if content.startswith("# "):
            return content + "\n"
        return f"{head}\n{content}\n"
    if not entries:
        return f"{head}\n{placeholder_text(section)}\n"
    heading = any(entry.title for entry in entries)
    if heading:
        return head + "".join("\n" + render_entry(entry, heading=True) for entry in entries)
    return head + "\n" + "".join(render_entry(entry, heading=False) for entry in entries)


def section_bytes(section: Section, entries: Sequence[Entry]) -> int:
    return len(render_section(section, entries).encode("utf-8"))


# -- parsing ----------------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^((?:[-*+]|\d+[.)])\s+)(.*)$")
_DATE = re.compile(r"^\s*[\[(*_]*(\d{4}-\d{2}-\d{2})")


def _norm_title(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _drops_heading(section: Section, heading: str) -> bool:
    name = _norm_title(heading)
    return name in {_norm_title(section.title), *(_norm_title(a) for a in section.aliases)}


def normalize_singleton(section: Section, text: str) -> str:
    """A singleton's text as it is stored: no comments, no first heading that only names the section."""
    clean = strip_comments(text).replace("\r\n", "\n").strip()
    first, _, rest = clean.partition("\n")
    match = _HEADING.match(first)
    if match and len(match.group(1)) == 1 and _drops_heading(section, match.group(2)):
        clean = rest.strip()
    return clean


@dataclass
class ParsedSection:
    section: Section
    entries: list[tuple[str, str]] = field(default_factory=list)
    """(title, content) in created order: oldest first."""
    placeholders: int = 0
    reversed: bool = False
    """The file listed entries newest first; they were put in created order."""


def _parse_free(lines: list[str]) -> list[tuple[str, str]]:
    """Bullets (with their continuation lines) and paragraphs, each an untitled entry."""
    out: list[tuple[str, str]] = []
    current: list[str] = []
    kind = ""
    indent = 2
    blank = False

    def flush() -> None:
        nonlocal current, kind
        text = "\n".join(current).strip()
        if text:
            out.append(("", text))
        current, kind = [], ""

    for line in lines:
        if not line.strip():
            if kind == "para":
                flush()
            blank = bool(kind)
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            current, kind, indent, blank = [bullet.group(2)], "bullet", len(bullet.group(1)), False
            continue
        if kind == "bullet" and line[:1] in (" ", "\t"):
            if blank:
                current.append("")
            stripped = line.expandtabs(4)
            cut = min(indent, len(stripped) - len(stripped.lstrip()))
            current.append(stripped[cut:])
            blank = False
            continue
        if kind == "bullet" and not blank:
            current.append(line.strip())  # a lazy continuation line
            continue
        if kind != "para":
            flush()
            kind = "para"
        current.append(line)
        blank = False
    flush()
    return out


def parse_section(section: Section, text: str) -> ParsedSection:
    """Entries of one ``.ai/`` file. Singletons: the whole text. Lists: one entry per heading of the
    highest level below the title (``##`` usually), or else per bullet or paragraph. HTML comments
    and placeholder entries are dropped; a file written newest first is put in created order."""
    parsed = ParsedSection(section)
    if section.singleton:
        content = normalize_singleton(section, text)
        if is_placeholder(content):
            parsed.placeholders += 1
        else:
            parsed.entries.append(("", content))
        return parsed
    lines = strip_comments(text).replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and (match := _HEADING.match(lines[0])) and len(match.group(1)) == 1:
        lines.pop(0)
    levels = [len(m.group(1)) for line in lines if (m := _HEADING.match(line)) and len(m.group(1)) >= 2]
    level = min(levels) if levels else 0
    raw: list[tuple[str, str]] = []
    free: list[str] = []
    title: str | None = None
    body: list[str] = []
    for line in lines:
        match = _HEADING.match(line)
        if match and len(match.group(1)) == level:
            if title is None:
                raw += _parse_free(free)
            else:
                raw.append((title, "\n".join(body).strip()))
            title, body = match.group(2).strip(), []
        elif title is None:
            free.append(line)
        else:
            body.append(line)
    if title is None:
        raw += _parse_free(free)
    else:
        raw.append((title, "\n".join(body).strip()))
    for entry_title, content in raw:
        if is_placeholder(content) and (not entry_title or is_placeholder(entry_title)):
            parsed.placeholders += 1
            continue
        parsed.entries.append((entry_title, content))
    dates = [d for t, c in parsed.entries if (d := _entry_date(t, c))]
    if len(dates) >= 2 and dates[0] > dates[-1] and all(a >= b for a, b in itertools.pairwise(dates)):
        parsed.entries.reverse()
        parsed.reversed = True
    return parsed


def _entry_date(title: str, content: str) -> str:
    match = _DATE.match(title or content)
    return match.group(1) if match else ""


# -- identity and duplicates ------------------------------------------------------------------------

_DATE_PREFIX = re.compile(
    r"^\s*[\[(]?\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\s*(?:UTC|Z)?)?[\])]?\s*[-—–:·|,]*\s*"
)


def _collapse(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .!;:")


def entry_key(title: str, content: str) -> str:
    """What an entry says, independent of how it was laid out (heading or bullet, spacing, case)."""
    return _collapse(f"{title}\n{content}")


def dedupe_key(entry: Entry) -> str:
    """Two entries with the same key are duplicates: the same words once dates and times that lead
    the title or the text are set aside (an agent that records the same change in two sessions)."""
    title = _DATE_PREFIX.sub("", entry.title)
    content = _DATE_PREFIX.sub("", entry.content)
    return _collapse(f"{title}\n{content}")


def import_id(section: Section, title: str, content: str, occurrence: int) -> str:
    """The memory id an imported entry gets: derived from what it says (and how many identical
    entries came before it in the file), so importing the same file twice adds nothing."""
    digest = hashlib.sha256(f"{section.kind}\0{entry_key(title, content)}\0{occurrence}".encode()).hexdigest()
    return f"pmp:{section.file.removesuffix('.md')}:{digest[:20]}"


# -- tidying and summaries --------------------------------------------------------------------------


def tidy(text: str) -> str:
    """No trailing spaces, no runs of blank lines, no blank lines at either end."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and out and not out[-1]:
            continue
        out.append(line)
    return "\n".join(out).strip("\n").strip()


def _one_line(entry: Entry, limit: int = 200) -> str:
    text = entry.summary.strip() or entry.content.strip().split("\n", 1)[0]
    if entry.title and not text.startswith(entry.title):
        text = f"{entry.title}: {text}" if text else entry.title
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_DONE = re.compile(r"^\[[xX]\]")


def summarize_section(section: Section, entries: Sequence[Entry], *, recent: int = 5) -> dict[str, Any]:
    """A list section in brief: how many entries, the most recent ones in one line each, and how
    many were left out (for todo: the open items, oldest first; done items are only counted)."""
    if section.key == "todo":
        pool = [e for e in entries if not _DONE.match(e.content.strip())]
        shown = pool[:recent]
        return {
            "count": len(entries),
            "open": len(pool),
            "entries": [_one_line(e) for e in shown],
            "omitted": len(pool) - len(shown),
        }
    shown = list(entries[-recent:])
    return {
        "count": len(entries),
        "entries": [_one_line(e) for e in shown],
        "omitted": len(entries) - len(shown),
    }


# -- optimization -----------------------------------------------------------------------------------

ActionKind = Literal["create", "flag_placeholder", "remove_duplicate", "tidy", "archive"]
KEEP_RECENT_CHANGES: Final = 3
HIGH_WATER: Final = 0.75
"""A list section larger than this share of its size limit is trimmed by the optimization..."""
LOW_WATER: Final = 0.5
"""...down to this share, archiving its oldest entries (the newest is always kept)."""


@dataclass(frozen=True)
class Action:
    action: ActionKind
    section: str
    id: str = ""
    reason: str = ""
    preview: str = ""
    content: str = ""
    duplicate_of: str = ""
    month: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "section": self.section}
        for name, key in (
            ("id", "id"),
            ("reason", "reason"),
            ("preview", "preview"),
            ("content", "content"),
            ("duplicate_of", "duplicateOf"),
            ("month", "month"),
        ):
            if value := getattr(self, name):
                out[key] = value
        return out


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    sizes: Mapping[str, int]
    limit: int

    @property
    def needed(self) -> bool:
        """Something would change (flags alone only inform)."""
        return any(a.action != "flag_placeholder" for a in self.actions)

    def of(self, kind: ActionKind) -> list[Action]:
        return [a for a in self.actions if a.action == kind]

    def to_dict(self) -> dict[str, Any]:
        names: tuple[tuple[str, ActionKind], ...] = (
            ("create", "create"),
            ("flagPlaceholder", "flag_placeholder"),
            ("removeDuplicate", "remove_duplicate"),
            ("tidy", "tidy"),
            ("archive", "archive"),
        )
        counts = {key: len(self.of(kind)) for key, kind in names}
        return {
            "needed": self.needed,
            "counts": counts,
            "actions": [a.to_dict() for a in self.actions],
            "sectionBytes": dict(self.sizes),
            "sectionLimitBytes": self.limit,
        }


def _preview(entry: Entry) -> str:
    return _one_line(entry, 120)


def plan_optimization(sections: Mapping[str, Sequence[Entry]], *, limit: int) -> Plan:
    """What an optimization would do to these sections, in the order it would do it:
    create missing singleton sections (with a placeholder), flag placeholder text, remove later
    duplicates of an entry, tidy blank lines and trailing spaces, archive all but the
    :data:`KEEP_RECENT_CHANGES` most recent recent changes, and archive the oldest entries of a
    list section that grew past :data:`HIGH_WATER` of ``limit`` until it is under :data:`LOW_WATER`."""
    actions: list[Action] = []
    sizes: dict[str, int] = {}
    for section in SECTIONS:
        entries = list(sections.get(section.key, ()))
        if section.singleton:
            if not entries:
                actions.append(
                    Action(
                        "create", section.key, id=section.memory_id, reason="missing", content=placeholder_text(section)
                    )
                )
                sizes[section.key] = section_bytes(section, [])
                continue
            entry = entries[0]
            if is_placeholder(entry.content):
                actions.append(
                    Action("flag_placeholder", section.key, id=entry.id, reason=f"still a placeholder: {section.hint}")
                )
            elif (tidied := tidy(entry.content)) != entry.content:
                actions.append(Action("tidy", section.key, id=entry.id, reason="blank lines", content=tidied))
                entry = Entry(entry.id, entry.title, tidied)
            sizes[section.key] = section_bytes(section, [entry])
            continue
        seen: dict[str, str] = {}
        remaining: list[Entry] = []
        for entry in entries:
            if is_placeholder(f"{entry.title}\n{entry.content}"):
                actions.append(Action("flag_placeholder", section.key, id=entry.id, preview=_preview(entry)))
            key = dedupe_key(entry)
            if key in seen:
                actions.append(
                    Action(
                        "remove_duplicate",
                        section.key,
                        id=entry.id,
                        duplicate_of=seen[key],
                        preview=_preview(entry),
                        reason="same text as an earlier entry",
                    )
                )
                continue
            seen[key] = entry.id
            remaining.append(entry)
        archived: list[tuple[Entry, str]] = []
        if section.key == "recentChanges" and len(remaining) > KEEP_RECENT_CHANGES:
            cut = len(remaining) - KEEP_RECENT_CHANGES
            archived += [(e, f"older than the {KEEP_RECENT_CHANGES} most recent") for e in remaining[:cut]]
            remaining = remaining[cut:]
        tidied_entries = [Entry(e.id, e.title, tidy(e.content)) for e in remaining]
        size = section_bytes(section, tidied_entries)
        if size > limit * HIGH_WATER:
            while len(tidied_entries) > 1 and size > limit * LOW_WATER:
                tidied_entries.pop(0)
                archived.append((remaining.pop(0), f"the section is over {int(HIGH_WATER * 100)}% of its size limit"))
                size = section_bytes(section, tidied_entries)
        sizes[section.key] = size
        actions += [
            Action("tidy", section.key, id=entry.id, reason="blank lines", content=tidy(entry.content))
            for entry in remaining
            if tidy(entry.content) != entry.content
        ]
        actions += [
            Action("archive", section.key, id=e.id, reason=why, preview=_preview(e), month=e.created_at[:7])
            for e, why in archived
        ]
    return Plan(tuple(actions), sizes, limit)
