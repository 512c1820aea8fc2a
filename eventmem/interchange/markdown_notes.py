"""Markdown notes as basic-memory writes them (and any folder of notes), in and out.

A note: YAML frontmatter (title, type, permalink, tags), a ``# Title`` heading, prose, then list
items basic-memory reads as observations, ``- [category] text #tag (context)``, and as relations,
``- relation_type [[Target]]``. By default a note is one memory: its prose the content (the
observations when it has none; the observations are kept in metadata too), the first observation's
category (or the frontmatter's ``kind``) its type, the frontmatter's and the observations' tags its
tags. With ``per_observation`` every observation is a memory of its own. A relation's target is
found by title, permalink or file name. The writer writes one note per memory, with the same parts,
links as wiki links to the other notes' titles with their strength and context in the parentheses
(``(strength 0.8; why)``), and eventmem's fields in the frontmatter (times, summary, and the metadata
as a JSON object): a note eventmem wrote (it has ``eventmem_id``) reads back as the memory it was.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

from eventmem.interchange import frontmatter
from eventmem.interchange.exporting import Exported, unique_titles
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
from eventmem.interchange.sources import note_files, read_text

__all__ = ["read", "write"]

FORMAT: Final = "markdown"
_OBSERVATION: Final = re.compile(r"^\s*[-*]\s+\[([^\]\n]{1,64})\]\s+(.+?)\s*$")
_RELATION: Final = re.compile(r"^\s*[-*]\s+([^\[\]\n]{1,64}?)\s+\[\[([^\[\]\n]{1,400})\]\]\s*(?:\((.*)\))?\s*$")
_TAG: Final = re.compile(r"(?:^|\s)#([\w\-/]{1,64})")
_SECTION: Final = re.compile(r"^##\s+(observations|relations)\s*$", re.IGNORECASE)
_UNSAFE: Final = re.compile(r"[\x00-\x1f/\\:*?\"<>|]+")


def read(path: Path, *, per_observation: bool = False) -> Bundle:
    bundle = Bundle(FORMAT)
    base = path if path.is_dir() else path.parent
    pending: list[tuple[str, str, str, str, str]] = []  # (source, relation, target, context, where)
    names: dict[str, str] = {}
    for file in note_files(path):
        relative = file.relative_to(base).as_posix()
        try:
            meta, body, first_line = frontmatter.split(read_text(file))
        except frontmatter.FrontmatterError as exc:
            bundle.problems.append(Problem(f"{relative} {exc}", "the frontmatter is broken"))
            continue
        except ValueError as exc:  # (InvalidInput: not UTF-8)
            bundle.problems.append(Problem(relative, str(exc)))
            continue
        items, relations = _note(relative, meta, body, first_line, bundle.problems, per_observation)
        if not items:
            continue
        bundle.items += items
        for name in (items[0].title, str(meta.get("permalink") or ""), file.stem, relative.removesuffix(".md")):
            if name:
                names.setdefault(name.casefold(), items[0].source)
        pending += [(items[0].source, *relation) for relation in relations]
    for source, kind, target, context, where in pending:
        found = names.get(target.casefold()) or names.get(target.rsplit("/", 1)[-1].casefold())
        relation = relation_of(kind)
        if found is None or relation is None:
            what = f"no note is titled {target[:80]!r}" if found is None else f"{kind[:40]!r} is not a relation name"
            bundle.problems.append(Problem(where, f"relation {kind[:40]} [[{target[:80]}]]: {what}"))
            continue
        strength, context = _strength(context)
        bundle.relations.append(Relation(source, found, relation, strength, context, where))
    return bundle


_STRENGTH: Final = re.compile(r"^strength ([0-9]*\.?[0-9]+)(?:; (.*))?$", re.DOTALL)


def _strength(context: str) -> tuple[float, str]:
    """A relation's ``(strength 0.8; context)`` as the writer writes it: the strength and the context."""
    found = _STRENGTH.match(context.strip())
    if found is None:
        return 1.0, context
    value = float(found.group(1))
    return (value if 0.0 <= value <= 1.0 else 1.0), found.group(2) or ""


def _note(
    relative: str, meta: dict[str, Any], body: str, first_line: int, problems: list[Problem], per_observation: bool
) -> tuple[list[Item], list[tuple[str, str, str, str]]]:
    title = meta.get("title") if isinstance(meta.get("title"), str) else ""
    prose: list[str] = []
    observations: list[tuple[str, str, int]] = []
    relations: list[tuple[str, str, str, str]] = []
    in_list_section = False
    for number, line in enumerate(body.split("\n"), first_line):
        where = f"{relative} line {number}"
        heading = re.match(r"^#\s+(.+?)\s*$", line)
        if heading and not "".join(prose).strip() and heading.group(1) == (title or heading.group(1)):
            title = heading.group(1)
            continue
        if _SECTION.match(line):
            in_list_section = True
            continue
        if in_list_section and (match := _RELATION.match(line)):
            relations.append((match.group(1).strip(), match.group(2).strip(), match.group(3) or "", where))
        elif in_list_section and (match := _OBSERVATION.match(line)):
            observations.append((match.group(1).strip(), match.group(2), number))
        elif line.startswith("## "):
            in_list_section = False
            prose.append(line)
        elif not in_list_section or line.strip():
            prose.append(line)
    title = title or Path(relative).stem
    source = str(meta.get("permalink") or relative.removesuffix(".md"))
    note_tags = tags_of(meta.get("tags"), relative, problems)
    created = time_of(meta.get("created"), relative, problems)
    updated = time_of(meta.get("updated") or meta.get("modified"), relative, problems)
    given_summary = meta.get("summary")
    summary = given_summary if isinstance(given_summary, str) else ""
    importance = importance_of(meta.get("importance"), relative, problems)
    if isinstance(meta.get("eventmem_id"), str):  # a note eventmem wrote: read back as the memory it was
        kept = _eventmem_metadata(meta.get("metadata"), relative, problems)
        kept.setdefault("source", source)
        text = "\n".join(prose).strip() or title
        kind = kind_of(meta.get("kind"), kept)
        tags = tags_of(meta.get("tags"), relative, problems)
        item = Item(source, text, relative, kind, title, tags, importance, kept, created, updated, summary)
        return [item], relations
    metadata: dict[str, Any] = {"source": source, "file": relative}
    known = ("title", "tags", "kind", "importance", "permalink", "created", "updated", "modified", "summary")
    metadata |= {k: v for k, v in meta.items() if k not in known}
    if per_observation and observations:
        items = []
        for index, (category, text, number) in enumerate(observations):
            extra: dict[str, Any] = {"source": f"{source}#{index}", "note": source, "category": category}
            items.append(
                Item(
                    source=f"{source}#{index}",
                    content=_TAG.sub("", text).strip() or text,
                    where=f"{relative} line {number}",
                    kind=kind_of(category, extra),
                    title=title,
                    tags=tags_of([*note_tags, *_TAG.findall(text)], relative, problems),
                    importance=importance,
                    metadata=extra,
                    created_at=created,
                    updated_at=updated,
                )
            )
        return items, relations
    text = "\n".join(prose).strip()
    if observations:
        metadata["observations"] = [f"[{category}] {text}" for category, text, _ in observations]
    if not text:
        text = "\n".join(_TAG.sub("", o[1]).strip() for o in observations) or title
    kind_name = meta.get("kind") or (observations[0][0] if observations else meta.get("type"))
    kind = kind_of(kind_name, metadata)
    tags = tags_of([*note_tags, *(t for o in observations for t in _TAG.findall(o[1]))], relative, problems)
    return [Item(source, text, relative, kind, title, tags, importance, metadata, created, updated, summary)], relations


def _eventmem_metadata(value: object, where: str, problems: list[Problem]) -> dict[str, Any]:
    """The ``metadata`` the writer put in the frontmatter (a JSON object as text)."""
    if value in (None, ""):
        return {}
    try:
        found = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        found = None
    if not isinstance(found, dict):
        problems.append(Problem(where, "metadata is not a JSON object; left out", skipped=False))
        return {}
    return found


def _file_name(title: str, taken: set[str]) -> str:
    stem = _UNSAFE.sub("-", title).strip(" .-")[:100] or "memory"
    name, number = f"{stem}.md", 2
    while name.casefold() in taken:
        name, number = f"{stem} {number}.md", number + 1
    taken.add(name.casefold())
    return name


def write(exported: Exported, folder: Path) -> int:
    """One note per memory in ``folder`` (made if missing); returns the number of notes."""
    folder.mkdir(parents=True, exist_ok=True)
    titles = unique_titles(exported)
    outgoing: dict[str, list[str]] = {}
    for link in exported.links:
        said = f"strength {link.strength:g}" + (f"; {' '.join(link.context.split())}" if link.context else "")
        outgoing.setdefault(link.source, []).append(f"- {link.relation} [[{titles[link.target]}]] ({said})")
    taken: set[str] = set()
    for memory in exported.memories:
        title = titles[memory.id]
        header: dict[str, Any] = {"title": title, "type": "note", "permalink": f"eventmem/{memory.id}"}
        header |= {"tags": memory.tags} if memory.tags else {}
        header |= {"kind": memory.kind, "importance": memory.importance, "eventmem_id": memory.id}
        header |= {"created": memory.created_at, "updated": memory.updated_at, "summary": memory.summary}
        if memory.metadata:
            header["metadata"] = json.dumps(memory.metadata, ensure_ascii=False, sort_keys=True)
        parts = [frontmatter.dump(header), f"# {title}\n", memory.content.strip() + "\n"]
        tags = " ".join(f"#{tag}" for tag in memory.tags)
        first = " ".join(memory.summary.split()) or title
        parts.append(f"## Observations\n- [{memory.kind}] {first} {tags}".rstrip() + "\n")
        if memory.id in outgoing:
            parts.append("## Relations\n" + "\n".join(outgoing[memory.id]) + "\n")
        (folder / _file_name(title, taken)).write_text("\n".join(parts), encoding="utf-8")
    return len(exported.memories)
