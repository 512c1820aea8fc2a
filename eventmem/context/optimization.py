"""The optimization of a project's context as a plan: create missing sections, flag placeholders, drop
duplicate entries, tidy blank lines, archive old entries. Pure functions: no IO here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from eventmem.context.parse import dedupe_key
from eventmem.context.render import is_placeholder, one_line, placeholder_text, section_bytes
from eventmem.core.sections import SECTIONS, Entry

__all__ = ["HIGH_WATER", "KEEP_RECENT_CHANGES", "LOW_WATER", "Action", "Plan", "plan_optimization", "tidy"]


def tidy(text: str) -> str:
    """No trailing spaces, no runs of blank lines, no blank lines at either end."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and out and not out[-1]:
            continue
        out.append(line)
    return "\n".join(out).strip("\n").strip()


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
    return one_line(entry, 120)


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
