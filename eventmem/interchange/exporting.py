"""What an export writes: the project's live memories and links, read once from the fold.

Every writer takes an :class:`Exported`; a memory's text and the metadata and original id an import gave it
are apart here (``content`` and ``metadata``), so a format with a place for metadata keeps it and one
without writes only the text. No writer sees the journal or the service.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventmem.interchange.mapping import body_and_metadata, exported_metadata

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["Exported", "ExportedLink", "ExportedMemory", "collect", "unique_titles"]


@dataclass
class ExportedMemory:
    id: str
    kind: str
    title: str
    content: str
    summary: str
    tags: list[str]
    importance: float
    created_at: str
    updated_at: str
    created_by: str
    ttl_seconds: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExportedLink:
    id: str
    source: str
    target: str
    relation: str
    strength: float
    context: str


@dataclass
class Exported:
    project: str
    memories: list[ExportedMemory] = field(default_factory=list)
    links: list[ExportedLink] = field(default_factory=list)


def collect(service: MemoryService) -> Exported:
    """The project's live, unexpired memories in created order, and the live links between them."""
    store = service.project
    store.catch_up()
    now = time.time()
    out = Exported(project=service.root.root.name)
    with store.read() as view:
        records = [r for r in view.memories().values() if r.exists and r.status == "live" and view.expires_at(r) > now]
        links = [link for link in view.fold.links.values() if link.alive]
    kept: set[str] = set()
    for record in sorted(records, key=lambda r: (r.created_stamp, r.id)):
        memory = service.view(store, record)
        body, metadata = body_and_metadata(memory.content)  # (a store imported by an earlier version)
        metadata |= exported_metadata(record.metadata)
        if record.source:
            metadata["source"] = record.source.partition(":")[2] or record.source
        out.memories.append(
            ExportedMemory(
                id=memory.id,
                kind=memory.kind,
                title=memory.title,
                content=body,
                summary=memory.summary,
                tags=list(memory.tags),
                importance=memory.importance,
                created_at=memory.created_at,
                updated_at=memory.updated_at,
                created_by=memory.created_by,
                ttl_seconds=memory.ttl_seconds,
                metadata=metadata,
            )
        )
        kept.add(memory.id)
    for link in sorted(links, key=lambda link: (link.added_stamp, link.id)):
        if link.source in kept and link.target in kept:
            out.links.append(
                ExportedLink(link.id, link.source, link.target, link.relation, link.strength, link.context)
            )
    return out


def unique_titles(exported: Exported) -> dict[str, str]:
    """A name per memory for formats that link by name: its title (else its text's first line),
    with `` (id)`` added where two would be the same."""
    names: dict[str, str] = {}
    seen: set[str] = set()
    for memory in exported.memories:
        first = memory.content.strip().split("\n", 1)[0][:80].strip()
        name = (memory.title.strip() or first or memory.id).replace("\n", " ")
        if name.casefold() in seen:
            name = f"{name} ({memory.id})"
        seen.add(name.casefold())
        names[memory.id] = name
    return names
