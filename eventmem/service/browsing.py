"""What the journal offers beyond the service's methods, for the HTTP adapter: a memory's version
(its head event, for ``ETag``/``If-Match``), the events in pages with filters, the memory as of a
time or revision, the link graph, the dashboard's counts and the effective settings with where each
value came from. Functions over a :class:`~eventmem.service.MemoryService`; they only read."""

from __future__ import annotations

import base64
import os
import time
import tomllib
from collections import Counter
from typing import Any

import msgspec

from eventmem.core.errors import InvalidInput, UnknownMemory
from eventmem.core.ids import canonical_id, parse_iso, to_iso
from eventmem.core.limits import MAX_CONFIG_BYTES
from eventmem.core.records import MemoryRecord
from eventmem.core.validation import check_length, check_number, check_whole, shown
from eventmem.journal.config import ENV_PREFIX, Config, user_config_file
from eventmem.journal.history import HistoryError, as_of, git, memory_at, memory_log, read_worktree
from eventmem.runner.runner import Store
from eventmem.service.app import MemoryService
from eventmem.service.models import Memory

__all__ = [
    "dashboard",
    "effective_settings",
    "events_page",
    "graph",
    "list_memories",
    "memories_as_of",
    "memory_any_status",
    "memory_history",
    "memory_version",
]

EVENT_PAGE_MAX = 500


def memory_version(service: MemoryService, memory_id: str) -> str:
    """The id of the memory's latest event (its head), live or not; ``""`` for an unknown id.
    Any change to the memory (update, delete, restore, promote, expiry) gives it a new version."""
    found = _saved(service, memory_id)
    return found[1].head if found is not None else ""


def _cursor_key(cursor: str) -> str:
    try:
        key = base64.urlsafe_b64decode(cursor.encode("ascii") + b"==").decode("utf-8")
    except (ValueError, UnicodeError):
        raise InvalidInput(f"cursor {shown(cursor)} is not one this server gave") from None
    if not key or len(key) > 200:
        raise InvalidInput(f"cursor {shown(cursor)} is not one this server gave")
    return key


def _make_cursor(event: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(f"{event['ts']}{event['id']}".encode()).decode("ascii").rstrip("=")


def _moment(value: str | None, name: str) -> str | None:
    """``since``/``until`` as the journal writes times (fixed-width UTC), or :class:`InvalidInput`."""
    if value is None:
        return None
    try:
        return to_iso(parse_iso(value))
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"{name}: expected an ISO-8601 time (2026-01-05 or 2026-01-05T10:02:00Z), got {shown(value)}"
        ) from None


def events_page(
    service: MemoryService,
    *,
    memory: str | None = None,
    types: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    writer: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> tuple[list[dict[str, Any]], str | None]:
    """Journal events oldest first, filtered by memory, event type, time range (ISO-8601, ``since``
    inclusive, ``until`` exclusive) and writer (``by``); a page of ``limit`` after ``cursor``, and the
    cursor of the next page (``None``: this is the last)."""
    if not 1 <= check_whole(limit, "log_limit", "limit") <= EVENT_PAGE_MAX:
        raise InvalidInput(f"limit must be from 1 to {EVENT_PAGE_MAX}, not {limit}")
    for value, name in ((since, "time"), (until, "time"), (writer, "by")):
        if value is not None:
            check_length(value, name)
    since, until = _moment(since, "since"), _moment(until, "until")
    after = _cursor_key(cursor) if cursor else ""
    wanted = set(types or ())
    service.catch_up()
    rows = service.history(memory, limit=0)
    out: list[dict[str, Any]] = []
    for event in rows:
        if after and f"{event['ts']}{event['id']}" <= after:
            continue
        if wanted and event.get("type") not in wanted:
            continue
        if since and event["ts"] < since:
            continue
        if until and event["ts"] >= until:
            continue
        if writer is not None and event.get("by", "") != writer:
            continue
        out.append(event)
        if len(out) > limit:
            break
    more = len(out) > limit
    page = out[:limit]
    return page, (_make_cursor(page[-1]) if more and page else None)


def memories_as_of(service: MemoryService, when: str) -> tuple[str, list[dict[str, Any]]]:
    """The project's memories as they were at ``when`` (a time, an event id or a git revision), each
    with its status then, oldest first; and the moment in words (``as of 2026-01-05T10:02:00Z``)."""
    check_length(when, "time")
    if when.startswith("-") or not when.strip():
        raise InvalidInput(f"{shown(when)} is not a time, an event id of the journal, or a git revision")
    found = as_of(service.root.root, when)
    views = [memory_at(r, found.moment) for r in found.state.memories.values() if r.exists]
    views.sort(key=lambda v: (v["created_at"], v["id"]))
    return found.description, views


def graph(service: MemoryService, *, limit: int = 500) -> dict[str, Any]:
    """The live memories that have live links (most linked first, at most ``limit``), and those links. A
    link between a global memory and this project's lives in one journal and has its ends in two: the
    links are read first, then their ends in every store."""
    found: list[tuple[str, str, str, str]] = []
    for store in service.stores():
        store.catch_up()
        with store.read() as view:
            found += [(k.id, k.source, k.target, k.relation) for k in view.fold.links.values() if k.alive]
    ends = {end for _, source, target, _ in found for end in (source, target)}
    nodes: dict[str, dict[str, Any]] = {}
    for store in service.stores():
        with store.read() as view:
            for memory_id in ends - nodes.keys():
                record = view.fold.visible(memory_id)
                if record is not None:
                    nodes[memory_id] = {
                        "id": record.id,
                        "kind": record.kind,
                        "title": record.title or record.summary[:80],
                        "importance": record.importance,
                    }
    links = [
        {"id": link, "source": source, "target": target, "relation": relation}
        for link, source, target, relation in found
        if source in nodes and target in nodes
    ]
    degree = Counter(end for link in links for end in (link["source"], link["target"]))
    kept = {m for m, _ in degree.most_common(limit)}
    return {
        "nodes": [nodes[m] for m in sorted(kept)],
        "links": [link for link in links if link["source"] in kept and link["target"] in kept],
    }


def dashboard(service: MemoryService) -> dict[str, Any]:
    """Counts by type, scope, project and tag of the live memories, saves per day, recent activity."""
    by_kind: Counter[str] = Counter()
    by_scope: Counter[str] = Counter()
    by_project: Counter[str] = Counter()
    by_tag: Counter[str] = Counter()
    per_day: Counter[str] = Counter()
    recent = service.history(None, limit=20)
    named: dict[str, dict[str, str]] = {}
    ends: dict[str, tuple[str, str, str]] = {}
    wanted = {m for e in recent for m in _event_memories(e)}
    links = {e["link"] for e in recent if e.get("type") == "unlinked" and e.get("link")}
    for store in service.stores():
        store.catch_up()
        with store.read() as view:
            for key in links - ends.keys():
                if (link := view.fold.links.get(key)) is not None:
                    ends[key] = (link.source, link.target, link.relation)
            for key in wanted | {m for source, target, _ in ends.values() for m in (source, target)}:
                found = view.record(key)
                if found is not None and key not in named:
                    named[key] = {"title": found.title or found.summary[:80], "status": found.status}
            for record in view.memories().values():
                if not record.exists:
                    continue
                per_day[record.created_at[:10]] += 1
                if record.status != "live":
                    continue
                by_kind[record.kind] += 1
                by_scope[record.scope] += 1
                by_project[record.project or service.root.root.name] += 1
                by_tag.update(record.tags)
    return {
        "by_type": dict(sorted(by_kind.items())),
        "by_scope": dict(sorted(by_scope.items())),
        "by_project": dict(sorted(by_project.items())),
        "by_tag": dict(by_tag.most_common(30)),
        "saves_per_day": dict(sorted(per_day.items())[-60:]),
        "recent": [_activity(e, named, ends) for e in reversed(recent)],
        "vector_status": service.vector_status(),
    }


def _event_memories(event: dict[str, Any]) -> list[str]:
    """The memories an event (as :meth:`MemoryService.history` gives it) names: a link's two ends, an
    archive's first few, or its one memory."""
    if event.get("type") == "linked":
        return [event.get("source", ""), event.get("target", "")]
    if event.get("type") == "archived":
        return list(event.get("memories", ()))[:3]
    return [event["memory"]] if event.get("memory") else []


def _activity(
    event: dict[str, Any], named: dict[str, dict[str, str]], ends: dict[str, tuple[str, str, str]]
) -> dict[str, Any]:
    """One row of the dashboard's recent activity: the memories it is about, each with its title and
    status (an ``unlinked`` event's are its link's two ends), and a link's relation."""
    ids = _event_memories(event)
    relation = event.get("relation", "related_to") if event.get("type") == "linked" else ""
    if event.get("type") == "unlinked" and event.get("link") in ends:
        source, target, relation = ends[event["link"]]
        ids = [source, target]
    memories = [{"id": m, **named.get(m, {"title": "", "status": "unknown"})} for m in ids if m]
    return {
        "ts": event["ts"],
        "type": event.get("type", ""),
        "memory": memories[0]["id"] if memories else "",
        "memories": memories,
        "relation": relation,
        "by": event.get("by", ""),
    }


def _table(path: os.PathLike[str] | str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        return tomllib.loads(data.decode("utf-8")) if len(data) <= MAX_CONFIG_BYTES else {}
    except (OSError, UnicodeError, tomllib.TOMLDecodeError):
        return {}


def effective_settings(service: MemoryService) -> dict[str, Any]:
    """Every setting in effect and where it came from: ``default``, the tracked ``.eventmem/config.toml``,
    ``.eventmem/config.local.toml``, the user's config file or an ``EVENTMEM_*`` variable; and the
    settings of the tracked file that were ignored."""
    config_file = service.project.paths.config_file
    layers = [
        (".eventmem/config.toml", _table(config_file)),
        ("user config (~/.config/eventmem/config.toml)", _table(user_config_file())),
        (".eventmem/config.local.toml", _table(config_file.with_name("config.local.toml"))),
    ]
    values = msgspec.to_builtins(service.config)
    rows: list[dict[str, Any]] = []
    for field in msgspec.structs.fields(Config):
        source = "default"
        for name, table in layers:
            if field.name in table and table[field.name] == values[field.name]:
                source = name
        variable = ENV_PREFIX + field.name.upper()
        if os.environ.get(variable, "").strip() and "${" not in os.environ.get(variable, ""):
            source = f"environment ({variable})"
        rows.append({"key": field.name, "value": values[field.name], "source": source})
    return {
        "settings": rows,
        "ignored": list(service.ignored_settings),
        "embedder": service.project.embedder.model_id,
        "vector_status": service.vector_status(),
    }


BLAME_MAX_BYTES = 8 * 1024 * 1024
"""A segment larger than this is not blamed (its lines' commits are left unknown)."""


def _knows(store: Any, memory_id: str) -> bool:
    with store.read() as view:
        return view.record(memory_id) is not None


def memory_history(service: MemoryService, memory_id: str) -> list[dict[str, Any]]:
    """Every event about the memory (its links included), oldest first, each with what it changed
    and the commit that brought its line into the repository (``""``: not committed yet, or unknown);
    a link's event names the memory at its other end (``other``: its id, title and status)."""
    if not memory_version(service, memory_id):
        raise UnknownMemory(memory_id)
    owner = next(s for s in service.stores() if _knows(s, memory_id))  # the project's, or the global
    lines = memory_log(read_worktree(owner.paths), memory_id)
    commits: dict[str, dict[int, str]] = {}
    for segment in {line.segment for line in lines}:
        commits[segment] = _line_commits(service, segment) if owner is service.project else {}
    named: dict[str, dict[str, str]] = {}  # a link's other end: its title and status, to name it
    others = {line.other for line in lines if line.other}
    for store in service.stores():
        with store.read() as view:
            for key in others - named.keys():
                if (found := view.record(key)) is not None:
                    named[key] = {"title": found.title or found.summary[:80], "status": found.status}
    out: list[dict[str, Any]] = []
    for line in lines:
        data = msgspec.to_builtins(line)
        data["commit"] = commits[line.segment].get(line.offset, "")
        if line.other:
            data["other"] = {"id": line.other, **named.get(line.other, {"title": "", "status": "unknown"})}
        else:
            del data["other"]
        out.append(data)
    return out


def _line_commits(service: MemoryService, segment: str) -> dict[int, str]:
    """For each line of a project segment, by byte offset: the commit that added it (git blame)."""
    base = service.project.paths.base
    path = base / segment
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > BLAME_MAX_BYTES:
            return {}
        data = path.read_bytes()
        output = git(service.root.root, "blame", "--porcelain", "--", str(path.relative_to(service.root.root)))
    except (OSError, ValueError, HistoryError):
        return {}
    starts = [0]
    end = data.find(b"\n")
    while end != -1:
        starts.append(end + 1)
        end = data.find(b"\n", end + 1)
    found: dict[int, str] = {}
    for row in output.split(b"\n"):
        parts = row.split(b" ")
        if len(parts) >= 3 and len(parts[0]) == 40 and parts[2].isdigit():
            number = int(parts[2])
            if 1 <= number <= len(starts):
                sha = parts[0].decode("ascii", "replace")
                found[starts[number - 1]] = "" if set(sha) == {"0"} else sha[:12]
    return found


LIST_STATUSES = ("live", "expired", "deleted", "superseded", "all")
LIST_SORTS = ("recent", "importance", "created", "title")


def list_memories(
    service: MemoryService,
    *,
    status: str = "live",
    kinds: list[str] | None = None,
    scope: str | None = None,
    tags: list[str] | None = None,
    min_importance: float | None = None,
    created_after: str | None = None,
    created_before: str | None = None,
    updated_after: str | None = None,
    updated_before: str | None = None,
    sort: str = "recent",
    offset: int = 0,
    limit: int = 50,
) -> tuple[list[Memory], int]:
    """Memories of every status for browsing: filtered, sorted, one page from ``offset``; and how
    many match in all. ``status``: live (not expired, not superseded), expired, deleted, superseded
    or all."""
    if status not in LIST_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(LIST_STATUSES)}, not {shown(status)}")
    if sort not in LIST_SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(LIST_SORTS)}, not {shown(sort)}")
    if scope not in (None, "project", "global", "all"):
        raise InvalidInput(f"scope must be project, global or all, not {shown(scope)}")
    check_whole(limit, "limit")
    if offset < 0:
        raise InvalidInput("offset must not be negative")
    for value in (created_after, created_before, updated_after, updated_before):
        if value is not None:
            check_length(value, "time")
    if min_importance is not None:
        check_number(min_importance, "importance", "min_importance")
    wanted_kinds, wanted_tags = set(kinds or ()), set(tags or ())
    now = time.time()
    found: list[tuple[Any, MemoryRecord]] = []  # (store, record) of the wanted status; views only for the page
    for store in service.stores():
        if scope in ("project", "global") and store is not service.store_for(scope):
            continue
        store.catch_up()
        with store.read() as view:
            for record in view.memories().values():
                if not record.exists or (wanted_kinds and record.kind not in wanted_kinds):
                    continue
                if wanted_tags and not wanted_tags.issubset(record.tags):
                    continue
                if min_importance is not None and record.importance < min_importance:
                    continue
                updated = record.updated_at or record.created_at
                if (created_after and record.created_at < created_after) or (
                    created_before and record.created_at >= created_before
                ):
                    continue
                if (updated_after and updated < updated_after) or (updated_before and updated >= updated_before):
                    continue
                if status != "all":
                    now_status: str = record.status
                    if now_status == "live" and view.expires_at(record) <= now:
                        now_status = "expired"
                    if now_status == "live" and view.superseded(record.id):
                        now_status = "superseded"
                    if now_status != status:
                        continue
                found.append((store, record))

    def key(pair: tuple[Any, MemoryRecord]) -> tuple[Any, ...]:
        record = pair[1]
        updated = record.updated_at or record.created_at
        if sort == "importance":
            return (record.importance, updated, record.id)
        if sort == "created":
            return (record.created_at, record.id)
        if sort == "title":
            return ((record.title or record.summary).casefold(), record.id)
        return (updated, record.id)

    found.sort(key=key, reverse=sort != "title")
    views: list[Memory] = []
    for store, record in found[offset : offset + limit]:
        views.append(service.view(store, record))
    return views, len(found)


def memory_any_status(service: MemoryService, memory_id: str) -> Memory:
    """One memory whatever its status (a deleted or expired one too, for a page that offers to restore
    it); :class:`UnknownMemory` if no memory of that id was ever saved."""
    found = _saved(service, memory_id)
    if found is None:
        raise UnknownMemory(memory_id)
    return service.view(*found)


def _saved(service: MemoryService, memory_id: str) -> tuple[Store, MemoryRecord] | None:
    """The store and folded record of a memory ever saved, whatever its status now."""
    check_length(memory_id, "memory_id")
    memory_id = canonical_id(memory_id)
    for store in service.stores():
        store.catch_up()
        with store.read() as view:
            record = view.record(memory_id)
        if record is not None and record.exists:
            return store, record
    return None
