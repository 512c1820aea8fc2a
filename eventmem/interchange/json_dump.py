"""A plain JSON dump of the project's memory (the fold, not the journal), in and out.

``{"format": "eventmem-dump", "version": 1, "project", "memories": [...], "links": [...]}``: every
live memory with all its fields (its text as ``content``, as every other surface names it; the
metadata an import gave it apart from its text) and every live link between them. Read back, a
memory's id in the dump is its original id (kept as its ``source``), its times are its times, its
links keep their strength and context: an export read back is the same memory. Importing a newer
dump of the same project updates what changed. A dump written before ``content`` was so named
(``body``) reads the same.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Final

from eventmem.core.errors import InvalidInput
from eventmem.interchange.exporting import Exported
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
from eventmem.interchange.sources import read_text

__all__ = ["read", "write"]

FORMAT: Final = "json"
MARK: Final = "eventmem-dump"


def write(exported: Exported, path: Path) -> int:
    data = {
        "format": MARK,
        "version": 1,
        "project": exported.project,
        "memories": [dataclasses.asdict(memory) for memory in exported.memories],
        "links": [dataclasses.asdict(link) for link in exported.links],
    }
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(exported.memories)


def read(path: Path) -> Bundle:
    try:
        data = json.loads(read_text(path))
    except ValueError as exc:
        raise InvalidInput(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != MARK or not isinstance(data.get("memories"), list):
        raise InvalidInput(f'{path}: not an eventmem JSON dump (no "format": "{MARK}" and memories list)')
    bundle = Bundle(FORMAT)
    for index, record in enumerate(data["memories"]):
        where = f"{path.name} memories[{index}]"
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
            bundle.problems.append(Problem(where, "not a memory object with an id"))
            continue
        body = record["content"] if "content" in record else record.get("body")  # (body: its name before)
        if not isinstance(body, str):
            bundle.problems.append(Problem(where, "content must be a string"))
            continue
        given = record.get("metadata")
        metadata: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
        metadata.setdefault("source", record["id"])
        if isinstance(record.get("created_by"), str) and record["created_by"]:
            metadata.setdefault("created_by", record["created_by"])
        title, summary = record.get("title"), record.get("summary")
        bundle.items.append(
            Item(
                source=record["id"],
                content=body,
                where=where,
                kind=kind_of(record.get("kind"), metadata),
                title=title if isinstance(title, str) else "",
                tags=tags_of(record.get("tags"), where, bundle.problems),
                importance=importance_of(record.get("importance"), where, bundle.problems),
                metadata=metadata,
                created_at=time_of(record.get("created_at"), where, bundle.problems),
                updated_at=time_of(record.get("updated_at"), where, bundle.problems),
                summary=summary if isinstance(summary, str) else "",
            )
        )
    links: list[Any] = data["links"] if isinstance(data.get("links"), list) else []
    for index, record in enumerate(links):
        where = f"{path.name} links[{index}]"
        relation = relation_of(record.get("relation")) if isinstance(record, dict) else None
        if not isinstance(record, dict) or relation is None:
            bundle.problems.append(Problem(where, "not a link object with a relation"))
            continue
        start, end, context = record.get("source"), record.get("target"), record.get("context")
        if not isinstance(start, str) or not isinstance(end, str):
            bundle.problems.append(Problem(where, "source and target must be memory ids"))
            continue
        strength = importance_of(record.get("strength", 1.0), where, bundle.problems)
        bundle.relations.append(
            Relation(start, end, relation, strength, context if isinstance(context, str) else "", where)
        )
    return bundle
