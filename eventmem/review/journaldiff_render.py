"""A journal diff in words for people (:func:`render_text`) and as markdown for a pull request
description (:func:`render_markdown`)."""

from __future__ import annotations

import sys
from typing import Any, Final

from eventmem.core.terminal import print_json, printable
from eventmem.review.concurrency import ConcurrentEdit
from eventmem.review.journaldiff_model import HEADINGS, JournalDiff, MemoryChange

__all__ = ["render_markdown", "render_text", "show", "show_value"]

_MARKS: Final = {"added": "+", "changed": "~", "removed": "!", "deleted": "-", "expired": "-"}


def show_value(value: Any, width: int = 60) -> str:
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, str):
        text = " ".join(value.split())
        return '"' + (text if len(text) <= width else text[: width - 1] + "…") + '"'
    return str(value)


def _name(change: MemoryChange) -> str:
    return show_value(change.title or change.summary, 50)


def _what(change: MemoryChange) -> str:
    """The change in words, after the memory's name."""
    parts: list[str] = []
    for kind in change.changes:
        if kind == "added":
            parts.append(f"[{change.kind}] {show_value(change.summary, 70)}" if change.title else f"[{change.kind}]")
        elif kind == "changed":
            parts.append(
                "; ".join(
                    f"{f.field} {f.words}"
                    if f.words and not change.partial
                    else f"{f.field} {'' if change.partial else show_value(f.old, 40) + ' '}→ {show_value(f.new, 40)}"
                    for f in change.fields
                )
            )
        elif kind != change.changes[0]:
            parts.append(kind)
    if change.reasons:
        parts.append("(" + "; ".join(change.reasons) + ")")
    return ", ".join(p for p in parts if p)


def _totals(diff: JournalDiff) -> str:
    counts = diff.counts()
    text = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no memory changes"
    who = sorted({name for change in diff.memories for name in change.by})
    events = f"{diff.events_added} new event(s)" + (f" by {', '.join(who)}" if who else "")
    if diff.events_removed:
        events += f", {diff.events_removed} event(s) no longer present"
    if diff.overridden:
        events += f"; {len(diff.overridden)} overridden concurrent edit(s)"
    if diff.corrupt_added:
        events += f"; {len(diff.corrupt_added)} line(s) that do not decode, left out"
    return f"{text}; {events}"


def _overridden(edit: ConcurrentEdit) -> str:
    """One concurrent edit in words: whose value was lost to whose."""
    lost, kept = edit.loses, edit.wins
    what = edit.field if edit.field != "status" else "an edit"
    return (
        f"{edit.memory} {show_value(edit.title, 40) + ' ' if edit.title else ''}{what}: "
        f"{lost.by or '?'}'s {show_value(lost.value, 40)} ({lost.ts}) lost to {kept.by or '?'}'s "
        f"{show_value(kept.value, 40)} ({kept.ts}); neither had seen the other"
    )


def show(diff: JournalDiff, *, as_json: bool) -> None:
    """Print a diff as the ``diff`` commands do: JSON, or :func:`render_text`."""
    if as_json:
        print_json(diff)
    else:
        sys.stdout.write(render_text(diff))


def render_text(diff: JournalDiff) -> str:
    """The diff in words, one memory per line."""
    lines = [f"memory changes {diff.old} → {diff.new}: {_totals(diff)}"]
    for change in diff.memories:
        head = change.changes[0]
        by = f"  — {', '.join(change.by)}" if change.by else ""
        what = f": {text}" if (text := _what(change)) else ""
        lines.append(f"{_MARKS.get(head, '*')} {head:<9} {change.memory}  {_name(change)}{what}{by}")
    for link in diff.links:
        mark = "+" if link.change == "linked" else "-"
        lines.append(f"{mark} {link.change:<9} {link.source} -{link.relation}-> {link.target}")
    for kind, count in diff.unknown_added.items():
        lines.append(f"? {count} event(s) of unknown type {kind!r} (from a newer eventmem; kept)")
    lines += [f"! overridden {printable(_overridden(edit))}" for edit in diff.overridden]
    lines += [f"! left out   {printable(problem)}" for problem in diff.corrupt_added]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("`", "'")


def render_markdown(diff: JournalDiff, *, title: str = "Memory changes") -> str:
    """The diff as a section of a pull request description."""
    out = [f"### {title}", "", f"Since {_md(diff.old)}.", ""]
    left_out = ["**Lines that do not decode (left out)**", *(f"- {_md(printable(p))}" for p in diff.corrupt_added), ""]
    if not diff.memories and not diff.links:
        out += ["No memory changes.", ""] + (left_out if diff.corrupt_added else [])
        return "\n".join(out).rstrip("\n") + "\n"
    totals = _md(_totals(diff))
    out += [totals[:1].upper() + totals[1:] + ".", ""]
    for kind, heading in HEADINGS.items():
        group = [c for c in diff.memories if c.changes[0] == kind]
        if not group:
            continue
        out.append(f"**{heading}**")
        for change in group:
            by = f" _({_md(', '.join(change.by))})_" if change.by else ""
            what = _what(change)
            name = _md(_name(change).strip('"'))
            out.append(f"- **{name}** `{change.memory}`{' — ' if what else ''}{_md(what)}{by}")
        out.append("")
    if diff.links:
        out.append("**Links**")
        out += [f"- {link.change}: `{link.source}` {link.relation} → `{link.target}`" for link in diff.links]
        out.append("")
    if diff.overridden:
        out.append("**Overridden concurrent edits**")
        out += [f"- {_md(printable(_overridden(edit)))}" for edit in diff.overridden]
        out.append("")
    if diff.corrupt_added:
        out += left_out
    return "\n".join(out)
