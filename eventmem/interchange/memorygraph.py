"""memorygraph's stores: its SQLite database and its JSON export (``memorygraph export``).

The database (memorygraph 0.12, SQLite backend) keeps memories as ``nodes`` with label ``Memory``
and a JSON ``properties`` column (id, type, title, content, summary, tags, importance, confidence,
context, times), and links as ``relationships`` (``from_id``, ``to_id``, ``rel_type`` such as
``SOLVES``, JSON ``properties`` with strength and context; a link with ``valid_until`` set was
invalidated and is left out). The JSON export (format 2.0) holds the same as ``memories`` and
``relationships`` (``from_memory_id``, ``to_memory_id``, ``type``, ``properties``). memorygraph has
no ``decision`` type: its agents save one as ``general`` tagged ``decision``, which is read back as
a decision. The DuckDB files of older versions are not read (no version in use writes them).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Final

from eventmem.core.errors import InvalidInput
from eventmem.core.events import KINDS
from eventmem.interchange.mapping import (
    Bundle,
    Item,
    Problem,
    Relation,
    importance_of,
    kind_of,
    relation_of,
    tags_of,
    time_of,
)
from eventmem.interchange.sources import holds_json_object, json_with_list, objects_in, open_sqlite

__all__ = ["read"]

FORMAT: Final = "memorygraph"
_KNOWN: Final = ("id", "type", "title", "content", "summary", "tags", "importance")


def read(path: Path) -> Bundle:
    """A memorygraph SQLite database, or its JSON export (told apart by the file's first bytes)."""
    return _read_export(path) if holds_json_object(path) else _read_database(path)


def _read_database(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    with open_sqlite(path, tables=("nodes", "relationships")) as db:
        try:
            nodes = db.execute("SELECT rowid, id, label, properties, created_at, updated_at FROM nodes").fetchall()
            links = db.execute("SELECT rowid, id, from_id, to_id, rel_type, properties, valid_until FROM relationships")
            rows = links.fetchall()
        except sqlite3.DatabaseError as exc:
            raise InvalidInput(f"{path}: the nodes or relationships table cannot be read ({exc})") from None
    for rowid, node_id, label, properties, created, updated in nodes:
        where = f"{path.name} nodes row {rowid}"
        if label != "Memory":
            continue
        record = _properties(properties, where, bundle.problems)
        if record is not None:
            record.setdefault("id", node_id)
            record.setdefault("created_at", created)
            record.setdefault("updated_at", updated)
            if (item := _memory(record, where, bundle.problems)) is not None:
                bundle.items.append(item)
    for rowid, _link_id, start, end, kind, properties, valid_until in rows:
        where = f"{path.name} relationships row {rowid}"
        if valid_until:
            continue
        if (record := _properties(properties, where, bundle.problems)) is not None:
            relation = _relation(str(start), str(end), kind, record, where, bundle.problems)
            if relation is not None:
                bundle.relations.append(relation)
    return bundle


def _read_export(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    data = json_with_list(path, "memories", "a memorygraph export")
    for where, record in objects_in(data["memories"], f"{path.name} memories", bundle.problems, Problem):
        if (item := _memory(record, where, bundle.problems)) is not None:
            bundle.items.append(item)
    relationships = data.get("relationships") or []
    for where, record in objects_in(relationships, f"{path.name} relationships", bundle.problems, Problem):
        properties = record.get("properties") if isinstance(record.get("properties"), dict) else {}
        start, end = record.get("from_memory_id"), record.get("to_memory_id")
        if not isinstance(start, str) or not isinstance(end, str):
            bundle.problems.append(Problem(where, "from_memory_id and to_memory_id must be strings"))
            continue
        relation = _relation(start, end, record.get("type"), properties or {}, where, bundle.problems)
        if relation is not None:
            bundle.relations.append(relation)
    return bundle


def _properties(raw: object, where: str, problems: list[Problem]) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError as exc:
        problems.append(Problem(where, f"properties are not JSON ({exc})"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(where, "properties are not a JSON object"))
        return None
    return value


def _memory(record: dict[str, Any], where: str, problems: list[Problem]) -> Item | None:
    memory_id, content, title = record.get("id"), record.get("content"), record.get("title")
    if not isinstance(memory_id, str) or not memory_id:
        problems.append(Problem(where, "a memory without an id"))
        return None
    if not isinstance(content, str) or not content.strip():
        if not isinstance(title, str) or not title.strip():
            problems.append(Problem(where, f"memory {memory_id[:60]!r} has neither content nor title"))
            return None
        content = title
    metadata: dict[str, Any] = {"source": memory_id}
    tags = tags_of(record.get("tags"), where, problems)
    kind = kind_of(record.get("type"), metadata)
    if kind == "general" and "original_type" not in metadata:
        kind = next((tag for tag in tags if tag in KINDS and tag != "general"), kind)
    metadata.update({k: v for k, v in record.items() if k not in _KNOWN and v not in (None, "", [], {})})
    summary = record.get("summary")
    if isinstance(summary, str) and summary.strip():
        metadata["summary"] = summary
    return Item(
        source=memory_id,
        content=content,
        where=where,
        kind=kind,
        title=title if isinstance(title, str) else "",
        tags=tags,
        importance=importance_of(record.get("importance"), where, problems),
        metadata=metadata,
        created_at=time_of(record.get("created_at"), where, problems),
        updated_at=time_of(record.get("updated_at"), where, problems),
    )


def _relation(
    start: str, end: str, kind: object, properties: dict[str, Any], where: str, problems: list[Problem]
) -> Relation | None:
    relation = relation_of(kind)
    if relation is None:
        problems.append(Problem(where, f"relationship type {str(kind)[:40]!r} is not a name"))
        return None
    strength = properties.get("strength")
    context = properties.get("context")
    return Relation(
        source=start,
        target=end,
        relation=relation,
        strength=importance_of(strength, where, problems) if strength is not None else 1.0,
        context=context if isinstance(context, str) else "",
        where=where,
    )
