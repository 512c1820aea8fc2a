"""Parsing ``.ai/``-style markdown back into a section's entries (``eventmem import pmp``), and what
makes two entries the same. Pure functions: no IO here.

Round trip: parsing what :func:`~eventmem.context.render.render_section` wrote gives back the same
entries (the same :func:`entry_key`), so importing a rendered view changes nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, field

from eventmem.context.render import is_placeholder, strip_comments
from eventmem.core.sections import Entry, Section

__all__ = ["ParsedSection", "dedupe_key", "entry_key", "import_id", "normalize_singleton", "parse_section"]


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
