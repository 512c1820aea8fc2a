"""The instruction files a project already gives its agents, read as conventions.

``CLAUDE.md``, ``AGENTS.md``, ``.github/copilot-instructions.md`` and ``.cursor/rules/*.mdc`` (whose
frontmatter, ``description``, ``globs``, ``alwaysApply``, is kept in metadata). Each section under a
heading is one ``convention`` memory: the heading its title (with the headings above it), its text
the content, tagged ``instructions`` and the file's name. Text before the first heading is a
section titled by the file. Given a folder, the files above are looked for in it; given a file, only
that file is read. The original id is the file's path and the section's headings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from eventmem.core.errors import InvalidInput
from eventmem.interchange import frontmatter
from eventmem.interchange.mapping import Bundle, Item, Problem, tags_of
from eventmem.interchange.sources import read_text

__all__ = ["instruction_files", "read"]

FORMAT: Final = "instructions"
KNOWN: Final = ("CLAUDE.md", "AGENTS.md", ".github/copilot-instructions.md")
_HEADING: Final = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def instruction_files(folder: Path) -> list[Path]:
    """The instruction files present in a project folder, links left out."""
    found = [folder / name for name in KNOWN if (folder / name).is_file() and not (folder / name).is_symlink()]
    rules = folder / ".cursor" / "rules"
    if rules.is_dir() and not rules.is_symlink():
        found += sorted(p for p in rules.glob("*.mdc") if p.is_file() and not p.is_symlink())
    return found


TEXT_SUFFIXES: Final = ("", ".md", ".mdc", ".markdown", ".txt")
"""What an instruction file given by name may be: markdown, Cursor's rules, plain text (``.cursorrules``)."""


def read(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    if not path.is_dir() and path.suffix.lower() not in TEXT_SUFFIXES:
        raise InvalidInput(
            f"{path} is not an instruction file (markdown or text, such as CLAUDE.md or a .mdc rule): give one, "
            "or a folder holding them, or import it as the format it is in (server-memory for a JSONL "
            "knowledge graph, json for an eventmem dump)"
        )
    files = instruction_files(path) if path.is_dir() else [path]
    if not files:
        raise_none = Problem(str(path), f"no {', '.join(KNOWN)} or .cursor/rules/*.mdc here")
        bundle.problems.append(raise_none)
    base = path if path.is_dir() else path.parent
    for file in files:
        relative = file.relative_to(base).as_posix()
        try:
            meta, body, first_line = frontmatter.split(read_text(file))
        except frontmatter.FrontmatterError as exc:
            bundle.problems.append(Problem(f"{relative} {exc}", "the frontmatter is broken"))
            continue
        bundle.items += _sections(relative, meta, body, first_line, bundle.problems)
    return bundle


def _sections(relative: str, meta: dict[str, Any], body: str, first_line: int, problems: list[Problem]) -> list[Item]:
    file_tag = Path(relative).name.lower().replace(".", "-").replace("_", "-")
    tags = tags_of(["instructions", file_tag], relative, problems)
    items: list[Item] = []
    trail: list[tuple[int, str]] = []
    lines: list[str] = []
    start = first_line
    counts: dict[str, int] = {}
    fence = False

    def flush() -> None:
        text = "\n".join(lines).strip()
        if not text:
            return
        title = " › ".join(name for _, name in trail) or Path(relative).name
        key = f"{relative}#{title}"
        counts[key] = counts.get(key, 0) + 1
        source = key if counts[key] == 1 else f"{key}#{counts[key]}"
        metadata: dict[str, Any] = {"source": source, "file": relative, "line": start}
        metadata |= {k: v for k, v in meta.items() if v not in (None, "", [])}
        items.append(Item(source, text, f"{relative} line {start}", "convention", title, list(tags), 0.7, metadata))

    for number, line in enumerate(body.split("\n"), first_line):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        heading = None if fence else _HEADING.match(line)
        if heading is None:
            lines.append(line)
            continue
        flush()
        level = len(heading.group(1))
        trail = [(lvl, name) for lvl, name in trail if lvl < level] + [(level, heading.group(2))]
        lines, start = [], number
    flush()
    return items
