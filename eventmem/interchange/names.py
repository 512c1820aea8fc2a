"""The formats eventmem imports and exports, by name (light: the command line lists them at start)."""

from __future__ import annotations

from typing import Final

from eventmem.core.errors import InvalidInput

__all__ = ["ALIASES", "EXPORTS", "IMPORTS", "PMP", "canonical"]

PMP: Final = "pmp"
"""The ``.ai/`` folder: imported by :meth:`~eventmem.context.project_context.ProjectContext.import_pmp`."""
IMPORTS: Final[dict[str, str]] = {
    "server-memory": "the official knowledge-graph server's memory.jsonl",
    "memorygraph": "memorygraph's SQLite database (memory.db) or its JSON export",
    "mcp-memory-service": "mcp-memory-service's sqlite-vec database or its JSON backup",
    "markdown": "a folder of markdown notes (basic-memory), or one note",
    "instructions": "CLAUDE.md, AGENTS.md, .github/copilot-instructions.md, .cursor/rules/*.mdc (a folder or a file)",
    "json": "an eventmem JSON dump (eventmem export json)",
    PMP: "an .ai/ folder of the shared project-memory protocol",
}
EXPORTS: Final[dict[str, str]] = {
    "server-memory": "a memory.jsonl the official knowledge-graph server reads",
    "markdown": "a folder of notes, one per memory, links as wiki links (basic-memory reads it)",
    "ai": "an .ai/ folder of the shared project-memory protocol",
    "json": "a plain JSON dump of every live memory and link",
}
ALIASES: Final[dict[str, str]] = {
    "knowledge-graph": "server-memory",
    "kg": "server-memory",
    "basic-memory": "markdown",
    "notes": "markdown",
    "ai": PMP,
    ".ai": PMP,
}


def canonical(name: str, known: dict[str, str]) -> str:
    """The format's own name, or an error listing the known ones."""
    text = name.strip().lower() if isinstance(name, str) else ""
    text = ALIASES.get(text, text) if text not in known else text
    if text not in known:
        raise InvalidInput(f"unknown format {name!r}; choose one of: {', '.join(known)}")
    return text
