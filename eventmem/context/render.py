"""The protocol's sections as ``.ai/``-style markdown: placeholders recognised, sections rendered and
briefed. Pure functions: no IO here."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from eventmem.core.sections import Entry, Section

__all__ = [
    "is_placeholder",
    "one_line",
    "placeholder_text",
    "render_entry",
    "render_section",
    "section_bytes",
    "section_pieces",
    "strip_comments",
    "summarize_section",
]


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
    return "".join(section_pieces(section, entries, titled=any(entry.title for entry in entries)))


def section_pieces(section: Section, entries: Iterable[Entry], *, titled: bool) -> Iterator[str]:
    """:func:`render_section` in pieces, an entry at a time, for a file too large to hold whole:
    ``titled`` says whether any of ``entries`` has a title (the file's form depends on it)."""
    head = f"# {section.title}\n"
    if section.singleton:
        first = next(iter(entries), None)
        content = first.content.strip() if first is not None else ""
        if not content:
            yield f"{head}\n{placeholder_text(section)}\n"
        elif content.startswith("# "):
            yield content + "\n"
        else:
            yield f"{head}\n{content}\n"
        return
    empty = True
    for entry in entries:
        if empty:
            yield head if titled else head + "\n"
            empty = False
        yield "\n" + render_entry(entry, heading=True) if titled else render_entry(entry, heading=False)
    if empty:
        yield f"{head}\n{placeholder_text(section)}\n"


def section_bytes(section: Section, entries: Sequence[Entry]) -> int:
    return len(render_section(section, entries).encode("utf-8"))


# -- briefs ----------------------------------------------------------------------------------------


def one_line(entry: Entry, limit: int = 200) -> str:
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
            "entries": [one_line(e) for e in shown],
            "omitted": len(pool) - len(shown),
        }
    shown = list(entries[-recent:])
    return {
        "count": len(entries),
        "entries": [one_line(e) for e in shown],
        "omitted": len(entries) - len(shown),
    }
