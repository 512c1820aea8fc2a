"""mcp-memory-service's stores: its sqlite-vec database and its JSON backup.

The database (12.x, ``sqlite_vec`` backend) keeps memories in a plain ``memories`` table (content
hash, content, tags as comma-separated text, ``memory_type``, JSON ``metadata``, times, a
``deleted_at`` for a soft delete, which is left out); the vector tables need the sqlite-vec
extension and are not read. Its ``memory_graph`` table (source and target content hashes, a
``relationship_type``, a similarity) holds the links it found, when any. The JSON backup
(``export_metadata`` and ``memories`` with the same fields, tags a list) is read the same way. The
content hash is the original id. Its type names (``bug``, ``learning``, ``code_edit``…) map to
eventmem's kinds (see :data:`eventmem.interchange.mapping.KIND_ALIASES`); ``importance`` in the
metadata is the importance, the rest of the metadata is kept. Its times are the memory's times. It
keeps no title: its tool stores "Title. content" as one text, so the title is what a note's first
line would be (the first line of several, else the first sentence), and the content the rest.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Final

from eventmem.core.errors import InvalidInput
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
    title_of,
)
from eventmem.interchange.sources import holds_json_object, json_with_list, objects_in, open_sqlite

__all__ = ["read"]

FORMAT: Final = "mcp-memory-service"


def read(path: Path) -> Bundle:
    """The database, or a JSON backup (told apart by the file's first bytes)."""
    return _read_backup(path) if holds_json_object(path) else _read_database(path)


def _read_database(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    with open_sqlite(path, tables=("memories",)) as db:
        try:
            columns = {row[1] for row in db.execute("PRAGMA table_info(memories)")}
            wanted = ["id", "content_hash", "content", "tags", "memory_type", "metadata"]
            times = [name for name in ("created_at_iso", "updated_at_iso", "deleted_at") if name in columns]
            if missing := [name for name in wanted if name not in columns]:
                raise InvalidInput(f"{path}: the memories table has no {', '.join(missing)} column")
            rows = db.execute(f"SELECT {', '.join(wanted + times)} FROM memories ORDER BY id").fetchall()
            graph = _graph_rows(db)
        except sqlite3.DatabaseError as exc:
            raise InvalidInput(f"{path}: the memories table cannot be read ({exc})") from None
    for row in rows:
        record = dict(zip(wanted + times, row, strict=True))
        where = f"{path.name} memories row {record['id']}"
        if record.get("deleted_at") is not None:
            continue
        record["created_at"], record["updated_at"] = (
            record.pop("created_at_iso", None),
            record.pop("updated_at_iso", None),
        )
        if (item := _memory(record, where, bundle.problems)) is not None:
            bundle.items.append(item)
    for index, (start, end, kind, similarity) in enumerate(graph, 1):
        where = f"{path.name} memory_graph row {index}"
        relation = relation_of(kind or "related")
        if relation is None or not isinstance(start, str) or not isinstance(end, str):
            bundle.problems.append(Problem(where, "a link without two content hashes and a type"))
            continue
        strength = importance_of(similarity, where, bundle.problems) if similarity is not None else 1.0
        bundle.relations.append(Relation(start, end, "related_to" if relation == "related" else relation, strength))
    return bundle


def _graph_rows(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "memory_graph" not in tables:
        return []
    columns = {row[1] for row in db.execute("PRAGMA table_info(memory_graph)")}
    kind = "relationship_type" if "relationship_type" in columns else "'related'"
    return db.execute(f"SELECT source_hash, target_hash, {kind}, similarity FROM memory_graph").fetchall()


def _read_backup(path: Path) -> Bundle:
    bundle = Bundle(FORMAT)
    data = json_with_list(path, "memories", "an mcp-memory-service backup")
    for where, record in objects_in(data["memories"], f"{path.name} memories", bundle.problems, Problem):
        if (item := _memory(record, where, bundle.problems)) is not None:
            bundle.items.append(item)
    return bundle


def _memory(record: dict[str, Any], where: str, problems: list[Problem]) -> Item | None:
    digest, content = record.get("content_hash"), record.get("content")
    if not isinstance(content, str) or not content.strip():
        problems.append(Problem(where, "a memory without content"))
        return None
    if not isinstance(digest, str) or not digest:
        problems.append(Problem(where, "a memory without a content_hash"))
        return None
    raw = record.get("metadata")
    try:
        extra = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        problems.append(Problem(where, "metadata is not JSON; kept as text", skipped=False))
        extra = {"text": raw}
    if not isinstance(extra, dict):
        extra = {} if extra is None else {"value": extra}
    metadata: dict[str, Any] = {"source": digest}
    kind = kind_of(record.get("memory_type"), metadata)
    importance = extra.pop("importance", None)
    title = extra.pop("title", "")
    metadata.update({k: v for k, v in extra.items() if v not in (None, "", [], {})})
    for name in ("created_at", "updated_at", "store"):
        if record.get(name) not in (None, ""):
            metadata[name] = record[name]
    text = content.strip()
    if not isinstance(title, str) or not title.strip():  # its tool glues "Title. content" into one text
        title, text = title_of(text)
        text = text or content.strip()
    return Item(
        source=digest,
        content=text,
        where=where,
        kind=kind,
        title=title,
        tags=tags_of(record.get("tags"), where, problems),
        importance=importance_of(importance, where, problems),
        metadata=metadata,
        created_at=time_of(record.get("created_at"), where, problems),
        updated_at=time_of(record.get("updated_at"), where, problems),
    )
