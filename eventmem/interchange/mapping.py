"""How another store's memories map onto eventmem's model, whatever format they were read from.

A reader turns its file into a :class:`Bundle` of :class:`Item` (one memory each) and
:class:`Relation` (one link each), plus :class:`Problem` lines for what it could not read. Here the
values are made to fit: a type name becomes one of :data:`~eventmem.core.events.KINDS` (the original is
kept in metadata when it differs), tags are normalised and cut to their limits, importance is
clamped, a relation name becomes lower_snake_case. What has no field of its own (times, authors,
the original type, any property) goes into the memory's ``metadata`` field (text values; a list or
object as its JSON), and the original id into its ``source`` field: nothing is dropped, and the
content is the text alone. The memory id is derived from the format and that original id, so
importing the same store again finds the same memories. A store imported by an earlier version kept
the metadata as one ``<!-- eventmem:import {...} -->`` line at the end of the content:
:func:`body_and_metadata` still reads it. No IO here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from eventmem.core.events import KINDS, METADATA_KEY_PATTERN, RELATION_PATTERN
from eventmem.core.ids import parse_iso, to_iso
from eventmem.core.limits import LIMITS

__all__ = [
    "Bundle",
    "Item",
    "Problem",
    "Relation",
    "body_and_metadata",
    "exported_metadata",
    "importance_of",
    "kind_of",
    "link_id_for",
    "memory_id_for",
    "metadata_fields",
    "relation_of",
    "tags_of",
    "time_of",
    "title_of",
]

#: Type names of other stores that mean one of eventmem's kinds.
KIND_ALIASES: Final[dict[str, str]] = {
    "bug": "problem",
    "issue": "problem",
    "learning": "solution",
    "code_edit": "fix",
    "bugfix": "fix",
    "pattern": "code_pattern",
    "planning": "workflow",
    "process": "workflow",
    "command": "workflow",
    "note": "general",
    "observation": "general",
    "reference": "general",
    "technology": "general",
    "action_item": "task",
    "todo": "task",
    "rule": "convention",
    "style": "convention",
    "guideline": "convention",
    "conversation": "general",
    "file_context": "general",
    "entity": "general",
}
_TRAILER: Final = re.compile(r"\n*<!-- eventmem:import (\{.*\}) -->\s*\Z", re.DOTALL)
_RELATION: Final = re.compile(RELATION_PATTERN)
_KEY: Final = re.compile(METADATA_KEY_PATTERN)


@dataclass
class Problem:
    """Something of the input that was left out or changed to fit, and where it is."""

    where: str
    """The file and line, row or key: ``memory.jsonl line 4``."""
    message: str
    skipped: bool = True
    """Left out (``True``), or taken in changed (a cut title, a clamped importance)."""

    def render(self) -> str:
        return f"{self.where}: {self.message}" + (" (skipped)" if self.skipped else "")


@dataclass
class Item:
    """One memory as read from another store, before it is checked against eventmem's limits."""

    source: str
    """Its id in the other store (an entity name, a node id, a content hash, a file path)."""
    content: str
    where: str = ""
    kind: str = "general"
    title: str = ""
    tags: list[str] = field(default_factory=list)
    importance: float = 0.5
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    """When the other store says it was made (ISO-8601, fixed-width UTC; ``""``: it does not say)."""
    updated_at: str = ""
    """When the other store says it last changed it (``""``: it does not say)."""
    summary: str = ""
    """Its summary, when the other store keeps one (an eventmem dump); ``""``: made at import."""


@dataclass
class Relation:
    """One link as read: its ends are the ``source`` ids of two items (of this bundle or an earlier import)."""

    source: str
    target: str
    relation: str = "related_to"
    strength: float = 1.0
    context: str = ""
    where: str = ""


@dataclass
class Bundle:
    """What a reader found in one store."""

    format: str
    items: list[Item] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def memory_id_for(format_name: str, source: str) -> str:
    """The memory id an item of ``format_name`` with this original id gets, the same at every import."""
    return f"imp.{format_name}.{_digest(format_name, source)}"


def link_id_for(source_id: str, target_id: str, relation: str) -> str:
    """The link id of an imported link between two memory ids."""
    return f"imp.link.{_digest(source_id, target_id, relation)}"


def kind_of(name: object, metadata: dict[str, Any]) -> str:
    """One of :data:`~eventmem.core.events.KINDS` for another store's type name; the original name goes
    into ``metadata["original_type"]`` when it is not the same."""
    text = name.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(name, str) else ""
    if text in KINDS:
        return text
    if isinstance(name, str) and name.strip():
        metadata["original_type"] = name[: int(LIMITS["tag"].high)]
    return KIND_ALIASES.get(text, "general")


def tags_of(values: object, where: str, problems: list[Problem]) -> list[str]:
    """Tags as eventmem keeps them (lower-case, spaces to ``-``), each cut to its limit, at most the
    limit's number; what is dropped or cut is reported."""
    if isinstance(values, str):
        values = [part for part in re.split(r"[,\s]+", values) if part]
    if not isinstance(values, list | tuple):
        if values is not None:
            problems.append(Problem(where, f"tags: expected a list, got a {type(values).__name__}", skipped=False))
        return []
    out: dict[str, None] = {}
    longest = int(LIMITS["tag"].high)
    for value in values:
        if not isinstance(value, str):
            continue
        tag = "-".join(value.strip().lower().lstrip("#").split())
        if len(tag) > longest:
            problems.append(Problem(where, f"a tag over {longest} characters was cut", skipped=False))
            tag = tag[:longest]
        if tag:
            out[tag] = None
    tags = list(out)
    most = int(LIMITS["tags"].high)
    if len(tags) > most:
        problems.append(Problem(where, f"{len(tags)} tags; the first {most} were kept", skipped=False))
    return tags[:most]


def importance_of(value: object, where: str, problems: list[Problem]) -> float:
    """A number from 0 to 1; a 1-10 or 0-100 scale is brought down, anything else is 0.5, reported."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if value is None:
        return 0.5
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        problems.append(Problem(where, f"importance {value!r} is not a number from 0 to 1; 0.5 taken", skipped=False))
        return 0.5
    if value > 1:
        value = value / 10 if value <= 10 else value / 100 if value <= 100 else 1.0
    return round(float(value), 4)


def time_of(value: object, where: str, problems: list[Problem]) -> str:
    """A time as the journal writes it (``2026-01-05T10:02:00.000000Z``) from ISO-8601 text or seconds
    since the epoch; ``""`` for none, and for one that does not read (reported)."""
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return to_iso(datetime.fromtimestamp(float(value), UTC))
        if isinstance(value, str):
            return to_iso(parse_iso(value.strip()))
    except (ValueError, OverflowError, OSError):
        pass
    problems.append(Problem(where, f"time {str(value)[:40]!r} does not read; the import's time taken", skipped=False))
    return ""


_SENTENCE: Final = re.compile(r"(.+?[.!?])\s+(?=\S)", re.DOTALL)


def title_of(text: str) -> tuple[str, str]:
    """A title for a text that has none, as a note's first line gives one, and the text after it:
    the first line of several, else the first sentence of one (without its full stop). ``("", text)``
    when the text is one short sentence (it is its own title) or its first sentence is too long."""
    text = text.strip()
    first, sep, rest = text.partition("\n")
    longest = int(LIMITS["title"].high)
    if sep and rest.strip() and 0 < len(first.strip()) <= longest:
        return first.strip().lstrip("#").strip(), rest.strip()
    if (found := _SENTENCE.match(first)) is not None and len(found.group(1)) <= min(longest, 200):
        title = found.group(1).strip()
        return (title[:-1] if title.endswith(".") else title), text[found.end() :].strip()
    return "", text


def relation_of(name: object) -> str | None:
    """A relation name in lower_snake_case (``SOLVES`` → ``solves``, ``depends on`` → ``depends_on``)."""
    if not isinstance(name, str):
        return None
    text = re.sub(r"[^a-z0-9_]+", "_", name.strip().lower()).strip("_")
    text = text[: int(LIMITS["relation"].high)]
    return text if _RELATION.fullmatch(text) else None


def body_and_metadata(content: str) -> tuple[str, dict[str, Any]]:
    """The text and the metadata of a stored content (``{}`` when it has none or it does not parse)."""
    match = _TRAILER.search(content)
    if match is None:
        return content, {}
    try:
        metadata = json.loads(match.group(1))
    except ValueError:
        return content, {}
    if not isinstance(metadata, dict):
        return content, {}
    return content[: match.start()], metadata


def metadata_fields(metadata: dict[str, Any], where: str, problems: list[Problem]) -> dict[str, str]:
    """``metadata`` as a memory's ``metadata`` field: keys made to fit their pattern, values as text
    (a list, object or number as its JSON), each cut to its limit, at most the limit's number of
    entries; what is cut or left out is reported."""
    longest_key, longest = int(LIMITS["metadata_key"].high), int(LIMITS["metadata_value"].high)
    out: dict[str, str] = {}
    for name, value in metadata.items():
        key = re.sub(r"[^A-Za-z0-9_.\-]+", "_", str(name)).lstrip("_.-")[:longest_key]
        if not _KEY.fullmatch(key) or key in out:
            problems.append(Problem(where, f"metadata key {str(name)[:40]!r} left out", skipped=False))
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        if len(text) > longest:
            problems.append(Problem(where, f"metadata {key!r} cut to {longest:,} characters", skipped=False))
            text = text[: longest - 1] + "…"
        out[key] = text
    most = int(LIMITS["metadata"].high)
    if len(out) > most:
        problems.append(Problem(where, f"{len(out)} metadata entries; the first {most} were kept", skipped=False))
        out = dict(list(out.items())[:most])
    return out


def exported_metadata(fields: dict[str, str]) -> dict[str, Any]:
    """A memory's ``metadata`` field as an exporter writes it: a value that holds a JSON list or object
    (as :func:`metadata_fields` wrote one) is that list or object again."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        out[key] = value
        if value[:1] in ("[", "{"):
            try:
                out[key] = json.loads(value)
            except ValueError:
                pass
    return out
