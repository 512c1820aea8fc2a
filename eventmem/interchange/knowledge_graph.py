"""The official knowledge-graph server's store (``@modelcontextprotocol/server-memory``), in and out.

Its ``memory.jsonl`` holds one JSON object per line: ``{"type": "entity", "name", "entityType",
"observations": [..]}`` or ``{"type": "relation", "from", "to", "relationType"}``; the server skips
a line that is not JSON or not of that shape, and so does this reader, reporting it by line. An
entity is one memory: its name the title (and its original id), its observations the content, one
per line. Observations ``importance 0.9`` and ``tags: a, b`` (how agents give that server what it
has no field for) become the importance and the tags. The writer writes what the server reads,
those two observations included, so a round trip keeps them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

from eventmem.interchange.exporting import Exported, unique_titles
from eventmem.interchange.mapping import Bundle, Item, Problem, Relation, importance_of, kind_of, relation_of, tags_of
from eventmem.interchange.sources import read_text

__all__ = ["read", "write"]

FORMAT: Final = "server-memory"
_IMPORTANCE = re.compile(r"^\s*importance\s*[:=]?\s*([0-9]*\.?[0-9]+)\s*$", re.IGNORECASE)
_TAGS = re.compile(r"^\s*tags\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)


def read(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    text = read_text(path)
    names: set[str] = set()
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            bundle.problems.append(Problem(where, f"not JSON ({exc.msg})"))
            continue
        if not isinstance(record, dict):
            bundle.problems.append(Problem(where, "not a JSON object"))
            continue
        if record.get("type") == "entity":
            item = _entity(record, where, bundle.problems)
            if item is not None and item.source in names:
                bundle.problems.append(Problem(where, f"a second entity named {item.source!r}"))
            elif item is not None:
                names.add(item.source)
                bundle.items.append(item)
        elif record.get("type") == "relation":
            relation = _relation(record, where, bundle.problems)
            if relation is not None:
                bundle.relations.append(relation)
        else:
            bundle.problems.append(
                Problem(where, f"type {str(record.get('type'))[:40]!r} is neither entity nor relation")
            )
    if not bundle.items and bundle.problems:
        bundle.problems.insert(0, Problem(path.name, "no entity could be read: is it a server-memory JSONL file?"))
    return bundle


def _entity(record: dict[str, Any], where: str, problems: list[Problem]) -> Item | None:
    name, kind, observations = record.get("name"), record.get("entityType"), record.get("observations")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem(where, "an entity without a name"))
        return None
    if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
        problems.append(Problem(where, f"entity {name[:60]!r}: observations must be a list of strings"))
        return None
    metadata: dict[str, Any] = {"source": name}
    importance: object = None
    tags: list[str] = []
    lines: list[str] = []
    for observation in observations:
        if (found := _IMPORTANCE.match(observation)) and importance is None:
            importance = found.group(1)
        elif found := _TAGS.match(observation):
            tags += tags_of(found.group(1).split(","), where, problems)
        else:
            lines.append(observation)
    extra = {k: v for k, v in record.items() if k not in ("type", "name", "entityType", "observations")}
    if extra:
        metadata["properties"] = extra
    return Item(
        source=name,
        content="\n".join(lines) or name,
        where=where,
        kind=kind_of(kind, metadata),
        title=name,
        tags=tags,
        importance=importance_of(importance, where, problems),
        metadata=metadata,
    )


def _relation(record: dict[str, Any], where: str, problems: list[Problem]) -> Relation | None:
    start, end, kind = record.get("from"), record.get("to"), record.get("relationType")
    relation = relation_of(kind)
    if not isinstance(start, str) or not isinstance(end, str) or relation is None:
        problems.append(Problem(where, "a relation needs from, to and a relationType"))
        return None
    return Relation(source=start, target=end, relation=relation, where=where)


def write(exported: Exported, path: Path) -> int:
    """Write the memories and links as the server's JSONL; returns the number of lines."""
    names = unique_titles(exported)
    lines: list[str] = []
    for memory in exported.memories:
        observations = [memory.content]
        observations.append(f"importance {memory.importance:g}")
        if memory.tags:
            observations.append("tags: " + ", ".join(memory.tags))
        entity = {"type": "entity", "name": names[memory.id], "entityType": memory.kind, "observations": observations}
        lines.append(json.dumps(entity, ensure_ascii=False))
    for link in exported.links:
        if link.source in names and link.target in names:
            relation = {"type": "relation", "from": names[link.source], "to": names[link.target]}
            relation["relationType"] = link.relation.upper()
            lines.append(json.dumps(relation, ensure_ascii=False))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)
